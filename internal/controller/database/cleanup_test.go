package database_test

import (
	"context"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// requestCleanup sets spec.accessCleanup.
func requestCleanup(t *testing.T, d *v1alpha1.Database, id string) {
	t.Helper()
	testenv.Edit(t, env.Kube.Client, d, func(d *v1alpha1.Database) {
		d.Spec.AccessCleanup = &v1alpha1.AccessCleanup{ID: id}
	})
}

func cleanedUp(id string) func(*v1alpha1.Database) bool {
	return func(d *v1alpha1.Database) bool {
		c := d.Status.AtProvider.AccessCleanup
		return ready(d) && c != nil && c.ID == id && c.CompletedAt != nil
	}
}

// TestAccessCleanupOnRequest: the owner tenant grants CONNECT on its
// database, a table and default privileges to another role. A new spec.accessCleanup.id removes all of it
// (the step recording the completion fails once on the way, and the
// cleanup runs again to its end): status.atProvider.accessCleanup shows
// the ID and the counts, the record's metadata keeps the ID, the
// OtherAccess condition turns False, and the Database stays Ready. Access
// granted again afterwards stays: the same ID runs nothing again, nor
// does a wiped status, which is rebuilt from the record.
func TestAccessCleanupOnRequest(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	const name, other = "acldb", "acl_other"
	d := newDB(name)
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	pw, _ := readKV(t, dbPath(name)).Data["password"].(string)
	su := superConn(t, "postgres")
	if _, err := su.Exec(ctx, "CREATE ROLE acl_other NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	app, err := appLogin(t, name, pw, name)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // test connection
	for _, s := range []string{
		"GRANT CONNECT ON DATABASE acldb TO acl_other",
		"CREATE TABLE public.t (id int)",
		"GRANT SELECT ON public.t TO acl_other",
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO acl_other",
	} {
		if _, err := app.Exec(ctx, s); err != nil {
			t.Fatalf("as the owner tenant: %s: %v", s, err)
		}
	}
	waitDB(t, d, "OtherAccess True", func(d *v1alpha1.Database) bool {
		return otherAccess(d).Status == corev1.ConditionTrue
	})

	inject(database.StepCleanupRecord, 1)
	requestCleanup(t, d, "c1")
	waitDB(t, d, "cleaned up", cleanedUp("c1"))
	fmu.Lock()
	left := faults[database.StepCleanupRecord]
	fmu.Unlock()
	if left != 0 {
		t.Fatal("the fault before recording the completion was never hit")
	}
	waitDB(t, d, "OtherAccess False", func(d *v1alpha1.Database) bool {
		return ready(d) && otherAccess(d).Status == corev1.ConditionFalse && otherAccess(d).Reason == tenancy.ReasonOwnerOnly
	})
	got := &v1alpha1.Database{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
		t.Fatal(err)
	}
	// The fault came after the removal: the second run found nothing
	// left on the database and still removes nothing twice; the counts
	// are those of the run that recorded the completion.
	c := got.Status.AtProvider.AccessCleanup
	if c.Removed == nil || len(c.Remaining) != 0 {
		t.Errorf("status.atProvider.accessCleanup = %+v", c)
	}
	if k := readKV(t, dbPath(name)); k.Owner[tenancy.MetaCleanupCompletedID] != "c1" {
		t.Errorf("%s = %v, want c1", tenancy.MetaCleanupCompletedID, k.Owner[tenancy.MetaCleanupCompletedID])
	}
	var connect, read bool
	if err := su.QueryRow(ctx, "SELECT has_database_privilege('acl_other', 'acldb', 'CONNECT')").Scan(&connect); err != nil {
		t.Fatal(err)
	}
	if err := app.QueryRow(ctx, "SELECT has_table_privilege('acl_other', 'public.t', 'SELECT')").Scan(&read); err != nil {
		t.Fatal(err)
	}
	if connect || read {
		t.Errorf("after the cleanup acl_other still has CONNECT %t, SELECT %t", connect, read)
	}
	if r := got.GetCondition(xpv2.TypeReady); r.Status != corev1.ConditionTrue || strings.Contains(r.Message, other) {
		t.Errorf("Ready = %s %q: the Ready message (relayed to the Tenant) names no other role", r.Status, r.Message)
	}

	// Granted again: the same ID, and a wiped status, revoke nothing.
	if _, err := app.Exec(ctx, "GRANT CONNECT ON DATABASE acldb TO acl_other"); err != nil {
		t.Fatal(err)
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 3)
	got.SetName(d.GetName())
	testenv.EditStatus(t, env.Kube.Client, got, func(got *v1alpha1.Database) { got.Status = v1alpha1.DatabaseStatus{} })
	waitDB(t, d, "status rebuilt", cleanedUp("c1"))
	awaitPolls(t, []*v1alpha1.Database{d}, 3)
	if err := su.QueryRow(ctx, "SELECT has_database_privilege('acl_other', 'acldb', 'CONNECT')").Scan(&connect); err != nil {
		t.Fatal(err)
	}
	if !connect {
		t.Error("the same cleanup ID ran again: a grant made after it was revoked")
	}
}

// TestAccessCleanupWithoutUpdateIsReported: without Update in the
// management policies a cleanup is InvalidSpec and revokes nothing.
func TestAccessCleanupWithoutUpdateIsReported(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("aclro", func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionDelete}
	})
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	pw, _ := readKV(t, dbPath("aclro")).Data["password"].(string)
	su := superConn(t, "postgres")
	if _, err := su.Exec(ctx, "CREATE ROLE aclro_other NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	app, err := appLogin(t, "aclro", pw, "aclro")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // test connection
	if _, err := app.Exec(ctx, "GRANT CONNECT ON DATABASE aclro TO aclro_other"); err != nil {
		t.Fatal(err)
	}
	requestCleanup(t, d, "c1")
	waitDB(t, d, "InvalidSpec naming Update", func(d *v1alpha1.Database) bool {
		c := d.GetCondition(xpv2.TypeReady)
		return string(c.Reason) == tenancy.ReasonInvalidSpec && strings.Contains(c.Message, "add Update to spec.managementPolicies")
	})
	awaitPolls(t, []*v1alpha1.Database{d}, 3)
	var connect bool
	if err := su.QueryRow(ctx, "SELECT has_database_privilege('aclro_other', 'aclro', 'CONNECT')").Scan(&connect); err != nil {
		t.Fatal(err)
	}
	if !connect {
		t.Error("without Update, the cleanup revoked a grant")
	}
}

// TestAccessCleanupKeepsTheDataRoles: the access cleanup removes another
// role's access and keeps what the Database itself grants: its data
// roles' privileges on the owner's tables and schemas (a schema made
// after the roles too), their default privileges, their CONNECT and the
// running app's session. A grant of a data role revoked by hand just
// before the cleanup is not reported ready on the strength of the last
// proven check: from the cleanup on, the status says ready only once a
// check has found (and the repair put back) every grant.
func TestAccessCleanupKeepsTheDataRoles(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	const name = "acldr"
	d := newDB(name, func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{
			{Name: "app", Access: v1alpha1.DataReadWrite},
			{Name: "report", Access: v1alpha1.DataReadOnly},
		}
	})
	apply(t, d)
	publicCreate(t, d, name)
	waitDB(t, d, "Ready with its data roles", dataRolesReady)
	pw := func(path string) string { p, _ := readKV(t, path).Data["password"].(string); return p }
	owner, err := appLogin(t, name, pw(dbPath(name)), name)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx) //nolint:errcheck // test connection
	su := superConn(t, "postgres")
	testenv.RunSQL(t, su, "the superuser", "CREATE ROLE acldr_other NOLOGIN")
	testenv.RunSQL(t, owner, "the owner",
		"CREATE TABLE public.orders (id int)", "CREATE SCHEMA later", "CREATE TABLE later.items (id int)",
		"GRANT CONNECT ON DATABASE acldr TO acldr_other", "GRANT SELECT ON public.orders TO acldr_other")
	in := superConn(t, name)
	// The app logs in as the member the record names: the cleanup keeps
	// its session too.
	app, err := appLogin(t, name+"_app_1", pw(dbPath(name)+"/roles/app"), name)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // test connection
	testenv.RunSQL(t, app, "the app", "INSERT INTO public.orders VALUES (1)", "INSERT INTO later.items VALUES (1)")

	// Drift a check would find, while the last proven check still stands.
	testenv.RunSQL(t, owner, "the owner", "REVOKE SELECT ON later.items FROM acldr_report")
	requestCleanup(t, d, "c1")
	completed := false
	var lie string
	waitDB(t, d, "cleaned up, the report role's grant back and its status ready", func(d *v1alpha1.Database) bool {
		if !completed {
			completed = cleanedUp("c1")(d)
			return false
		}
		var has bool
		if err := in.QueryRow(ctx, "SELECT has_table_privilege('acldr_report', 'later.items', 'SELECT')").Scan(&has); err != nil {
			t.Fatal(err)
		}
		for _, r := range d.Status.AtProvider.DataRoles {
			if r.Name == "report" && r.Ready && !has && lie == "" {
				lie = "after the cleanup the status shows the report role ready while it lacks SELECT on later.items"
			}
		}
		return has && dataRolesReady(d)
	})
	if lie != "" {
		t.Error(lie)
	}
	for _, q := range []string{
		"SELECT has_database_privilege('acldr_app', 'acldr', 'CONNECT') AND has_database_privilege('acldr_report', 'acldr', 'CONNECT')",
		"SELECT has_table_privilege('acldr_app', 'public.orders', 'SELECT, INSERT, UPDATE, DELETE') AND has_table_privilege('acldr_report', 'public.orders', 'SELECT')",
		"SELECT has_schema_privilege('acldr_app', 'later', 'USAGE') AND has_table_privilege('acldr_app', 'later.items', 'INSERT')",
		"SELECT NOT has_database_privilege('acldr_other', 'acldr', 'CONNECT')",
	} {
		var ok bool
		if err := in.QueryRow(ctx, q).Scan(&ok); err != nil || !ok {
			t.Errorf("after the cleanup: %s = %v (%v)", q, ok, err)
		}
	}
	if _, err := app.Exec(ctx, "INSERT INTO public.orders VALUES (2)"); err != nil {
		t.Errorf("the app's session did not outlive the cleanup: %v", err)
	}
	// A table made after the cleanup still reaches the data roles: their
	// default privileges were kept.
	testenv.RunSQL(t, owner, "the owner", "CREATE TABLE public.later_table (id int)")
	testenv.RunSQL(t, app, "the app", "INSERT INTO public.later_table VALUES (1)")
	got := &v1alpha1.Database{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
		t.Fatal(err)
	}
	if c := got.Status.AtProvider.AccessCleanup; c == nil || c.Removed == nil || c.Removed.ObjectGrants != 1 || c.Removed.DatabaseGrants != 1 || c.Removed.Sessions != 0 {
		t.Errorf("status.atProvider.accessCleanup = %+v; want the other role's one database grant and one object grant, no session ended", c)
	}
}
