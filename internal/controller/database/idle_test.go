package database_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/inproc"
)

// writes counts what the in-process controllers send to the API server.
var writes = inproc.NewWrites()

// idlePolls is how many polls of each idle Database TestIdleDatabasesWriteNothing
// watches.
const idlePolls = 8

// TestIdleDatabasesWriteNothing: a Ready Database whose server, record and
// spec do not change writes nothing at its polls, its status included,
// whether it has data roles or not: at thousands of Databases a write per
// poll would make the provider etcd's busiest writer for no information.
// Counted, not timed: the write requests the controllers send for each
// Database and its binding (a status update the API server would take as a
// no-op is a request all the same) over idlePolls polls of each.
func TestIdleDatabasesWriteNothing(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	owner := newDB("idleowner")
	roles := newDB("idleroles", func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{
			{Name: "app", Access: v1alpha1.DataReadWrite},
			{Name: "report", Access: v1alpha1.DataReadOnly},
		}
	})
	// As a Tenant's: claimed by the Tenant, whose binding exists.
	claimed := newDB("idleclaimed", func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = roles.Spec.ForProvider.DataRoles
	})
	b := binding(t, "idle-ns", "idle", claimed.Name)
	claimed.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "idle-ns", Name: "idle", UID: b.Spec.ForProvider.Tenant.UID}
	dbs := []*v1alpha1.Database{owner, roles, claimed}
	for _, d := range dbs {
		apply(t, d)
	}
	// On PostgreSQL 14 a superuser first takes PUBLIC's CREATE on the
	// public schema, as the docs tell an admin to.
	publicCreate(t, roles, roles.Name)
	publicCreate(t, claimed, claimed.Name)
	waitDB(t, claimed, "Bound", phase(v1alpha1.BindingBound))
	// Ready, its data roles too, and sized (the size is written once it is
	// first measured): what is left to write is nothing.
	for _, d := range dbs {
		waitDB(t, d, "Ready with its data roles and sized", func(d *v1alpha1.Database) bool {
			return dataRolesReady(d) && d.Status.AtProvider.Size != nil
		})
	}
	// Two polls more: a write the last observation decided is done.
	awaitPolls(t, dbs, 2)
	before := map[string]*v1alpha1.Database{}
	for _, d := range dbs {
		got := &v1alpha1.Database{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			t.Fatal(err)
		}
		before[d.Name] = got
	}
	sent := map[string]int{}
	for _, d := range dbs {
		sent[d.Name] = writes.Of("Database", d.Name)
	}
	sentB := writes.Of("DatabaseBinding", b.Name)
	// Nor do they read their data roles' records, or log in as them, at
	// every poll: the last proven check stands until it is due (at most
	// once in this window, against a read at each of its polls).
	roleRecords := []string{}
	for _, d := range []*v1alpha1.Database{roles, claimed} {
		for _, r := range d.Spec.ForProvider.DataRoles {
			roleRecords = append(roleRecords, dbPath(d.Name)+"/roles/"+r.Name)
		}
	}
	readsBefore := map[string]int{}
	for _, p := range roleRecords {
		readsBefore[p] = recordReads(p)
	}
	bBefore := &v1alpha1.DatabaseBinding{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(b), bBefore); err != nil {
		t.Fatal(err)
	}
	awaitPolls(t, dbs, idlePolls)
	for _, p := range roleRecords {
		if n := recordReads(p) - readsBefore[p]; n > 1 {
			t.Errorf("the data role record %s was read %d times in %d idle polls: its proven check did not stand", p, n, idlePolls)
		}
	}
	bAfter := &v1alpha1.DatabaseBinding{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(b), bAfter); err != nil {
		t.Fatal(err)
	}
	if n := writes.Of("DatabaseBinding", b.Name) - sentB; n != 0 || bAfter.ResourceVersion != bBefore.ResourceVersion {
		t.Errorf("the idle binding %s: %d writes sent (resourceVersion %s, then %s); what changed (-before +after):\n%s",
			b.Name, n, bBefore.ResourceVersion, bAfter.ResourceVersion, cmp.Diff(bBefore, bAfter))
	}
	// The count sees writes: the Databases were written while they were
	// made.
	if writes.Of("Database", roles.Name) == 0 {
		t.Fatal("no write of the Databases was counted: the counter is not on the controllers' client")
	}
	for _, d := range dbs {
		got := &v1alpha1.Database{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			t.Fatal(err)
		}
		b := before[d.Name]
		if n := writes.Of("Database", d.Name) - sent[d.Name]; n != 0 || got.ResourceVersion != b.ResourceVersion {
			t.Errorf("idle Database %s: %d writes sent in %d polls (resourceVersion %s, then %s); what changed (-before +after):\n%s",
				d.Name, n, idlePolls, b.ResourceVersion, got.ResourceVersion, cmp.Diff(b, got))
		}
	}
}

// awaitPolls waits until each Database was polled n times more.
func awaitPolls(t *testing.T, dbs []*v1alpha1.Database, n int) {
	t.Helper()
	start := map[string]int{}
	for _, d := range dbs {
		start[d.Name] = polls.polled(d.Name)
	}
	err := testenv.WaitFor(context.Background(), time.Duration(n)*poll+time.Minute, func(context.Context) error {
		for _, d := range dbs {
			if got := polls.polled(d.Name) - start[d.Name]; got < n {
				return fmt.Errorf("%w: %s polled %d times of %d", testenv.ErrNotYet, d.Name, got, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %d polls: %v", n, err)
	}
}
