package binding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func roleCredential(role, db, password string) map[string]string {
	c := credential(db, password)
	c["username"] = role
	return c
}

// makeRoleReady writes the data role's record and shows it Ready on the
// Database, as the Database controller would.
func makeRoleReady(t *testing.T, db *v1alpha1.Database, name string, access v1alpha1.DataAccess, password string) {
	t.Helper()
	ctx := context.Background()
	p := tenancy.DataRolePath(recordPath(db.GetName()), name)
	owner := map[string]string{tenancy.MetaManagedBy: tenancy.ManagedBy, tenancy.MetaName: db.GetName(), tenancy.MetaUID: string(db.GetUID()),
		tenancy.MetaDataRole: name, tenancy.MetaDataAccess: string(access)}
	if err := admin.SetOwner(ctx, p, owner); err != nil {
		t.Fatal(err)
	}
	role := tenancy.DataRoleName(db.Spec.ForProvider.Database, name)
	ver, err := admin.Write(ctx, p, roleCredential(role, db.Spec.ForProvider.Database, password), 0)
	if err != nil {
		t.Fatal(err)
	}
	proven.set(memo.DataRoleKey(db.GetUID(), name), ver)
	testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) {
		db.Status.AtProvider.DataRoles = append(db.Status.AtProvider.DataRoles, v1alpha1.DataRoleObservation{Name: name, Role: role, Access: access, CredentialPath: p, Ready: true})
	})
}

// rotateRoleRecord writes the next version of a data role's record, with
// login as its username, and shows it in the Database's status as the
// Database controller does after a rotation.
func rotateRoleRecord(t *testing.T, db *v1alpha1.Database, name, login, password string) {
	t.Helper()
	ctx := context.Background()
	p := tenancy.DataRolePath(recordPath(db.GetName()), name)
	rec, err := admin.Read(ctx, p)
	if err != nil || rec == nil {
		t.Fatalf("the role's record: %v", err)
	}
	ver, err := admin.Write(ctx, p, roleCredential(login, db.Spec.ForProvider.Database, password), rec.Version)
	if err != nil {
		t.Fatal(err)
	}
	proven.set(memo.DataRoleKey(db.GetUID(), name), ver)
	testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) {
		for i := range db.Status.AtProvider.DataRoles {
			if r := &db.Status.AtProvider.DataRoles[i]; r.Name == name {
				r.LoginRole, r.PasswordSetAt = login, &metav1.Time{Time: time.Now()}
			}
		}
	})
}

// watchNotReady records, until the returned stop, the first time b's Ready
// condition is seen False, polling every 20 ms.
func watchNotReady(b *v1alpha1.DatabaseBinding, seen *atomic.Value) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			got := &v1alpha1.DatabaseBinding{}
			if err := env.Kube.Client.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
				continue
			}
			if c := got.GetCondition(xpv2.TypeReady); c.Status == corev1.ConditionFalse && seen.Load() == nil {
				seen.Store(fmt.Sprintf("%s: %s", c.Reason, c.Message))
			}
		}
	}()
	return func() { close(done); <-finished }
}

func roleStatus(b *v1alpha1.DatabaseBinding, name string) (v1alpha1.BindingDataRoleObservation, bool) {
	i := slices.IndexFunc(b.Status.AtProvider.DataRoles, func(r v1alpha1.BindingDataRoleObservation) bool { return r.Name == name })
	if i < 0 {
		return v1alpha1.BindingDataRoleObservation{}, false
	}
	return b.Status.AtProvider.DataRoles[i], true
}

func dbRoles(t *testing.T, db *v1alpha1.Database) []string {
	t.Helper()
	if err := env.Kube.Client.Get(context.Background(), client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range db.Spec.ForProvider.DataRoles {
		out = append(out, r.Name+":"+string(r.Access))
	}
	return out
}

// A dynamic binding's data roles are its new Database's; each role's
// credential is delivered beside the owner's once the Database shows the
// role Ready, and the binding is Ready only when every role is delivered.
// A role added later is added to the Database. A role removed goes in
// order: while an ExternalSecret reads its copy, the copy and the role
// stay; then the copy goes; then the role leaves the Database. Deleting
// the binding removes every copy.
func TestDataRolesDeliveredAndRemovedInOrder(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimDelete)
	tenantUID := tenant(t, ns, "shop", "shop-db")
	b := &v1alpha1.DatabaseBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db"},
		Spec: v1alpha1.DatabaseBindingSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: inst}},
			ForProvider: v1alpha1.DatabaseBindingParameters{
				Tenant: v1alpha1.TenantReference{Name: "shop", UID: tenantUID}, Database: ptr.To("shop"),
				DataRoles: []v1alpha1.BindingDataRole{{Name: "app", Access: v1alpha1.DataReadWrite}},
			},
		},
	}
	create(t, b)
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + tenantUID}}
	testenv.Await(t, env.Kube.Client, db, timeout, "the Database is created", func(*v1alpha1.Database) bool { return true }, func(*v1alpha1.Database) string { return describeBinding(b) })
	if got := dbRoles(t, db); !slices.Equal(got, []string{"app:readWrite"}) {
		t.Fatalf("the new Database's data roles are %v; want app:readWrite", got)
	}
	makeReady(t, db, "owner-secret-1")
	awaitBinding(t, b, "the owner is delivered and the role waits for its Database", func(b *v1alpha1.DatabaseBinding) bool {
		r, ok := roleStatus(b, "app")
		return b.Status.AtProvider.Phase == v1alpha1.BindingPhaseReady && readyReason(tenancy.ReasonDataRoleNotReady)(b) && ok && !r.Ready
	})
	cp := copyPath(ns, "shop")
	if readKV(t, cp) == nil {
		t.Fatal("the owner's copy waits for the data role: it must not")
	}
	appCopy := tenancy.DataRoleDeliveryPath(cp, "app")
	if rec := readKV(t, appCopy); rec != nil {
		t.Fatalf("a data role's copy exists before its Database shows it Ready: %s", ownerOnly(rec))
	}

	makeRoleReady(t, db, "app", v1alpha1.DataReadWrite, "app-secret-1")
	awaitBinding(t, b, "the binding is Available with its data role", available)
	rec := readKV(t, appCopy)
	if rec == nil {
		t.Fatal("no copy of the data role's credential")
	}
	if diff := cmp.Diff(roleCredential("shop_app", "shop", "app-secret-1"), rec.Data); diff != "" {
		t.Errorf("the role's copy differs from its record in %d keys", strings.Count(diff, "\n"))
	}
	wantOwner := tenancy.DeliveryOwner(specOf(b), db.GetName(), string(db.GetUID()), 1)
	wantOwner[tenancy.MetaDataRole] = "app"
	if diff := cmp.Diff(wantOwner, rec.Owner); diff != "" {
		t.Errorf("the role's copy's ownership metadata: -want +got:\n%s", diff)
	}
	r, _ := roleStatus(b, "app")
	want := v1alpha1.BindingDataRoleObservation{Name: "app", Role: "shop_app", Ready: true,
		Credential: v1alpha1.CredentialObservation{Path: appCopy, OpenBaoURL: "https://openbao.example:8200/v1/kv/data/" + appCopy, Version: 1}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("status.atProvider.dataRoles[app]: -want +got:\n%s", diff)
	}

	// The role's credential changes (a rotation hands it to its other
	// login member): the copy follows, and the binding never leaves Ready
	// meanwhile (the previous login works during its grace).
	rotateRoleRecord(t, db, "app", "shop_app_2", "app-secret-2")
	var notReady atomic.Value
	stop := watchNotReady(b, &notReady)
	awaitCopy(t, appCopy, "the role's copy holds the rotated credential", func(r *openbao.Record) bool {
		return r != nil && r.Data["username"] == "shop_app_2"
	})
	awaitBinding(t, b, "the binding shows the copy's new version", func(b *v1alpha1.DatabaseBinding) bool {
		r, _ := roleStatus(b, "app")
		return available(b) && r.Credential.Version == 2
	})
	stop()
	if why, _ := notReady.Load().(string); why != "" {
		t.Errorf("while the role's rotated credential was copied, the binding was not Ready: %s", why)
	}

	// A role added later goes to the Database; the binding is not Ready
	// until it is delivered too.
	setRoles(t, b, v1alpha1.BindingDataRole{Name: "app", Access: v1alpha1.DataReadWrite}, v1alpha1.BindingDataRole{Name: "report", Access: v1alpha1.DataReadOnly})
	awaitBinding(t, b, "the new role waits for its Database", readyReason(tenancy.ReasonDataRoleNotReady))
	if got := dbRoles(t, db); !slices.Equal(got, []string{"app:readWrite", "report:readOnly"}) {
		t.Fatalf("the Database's data roles are %v; want app and report", got)
	}
	makeRoleReady(t, db, "report", v1alpha1.DataReadOnly, "report-secret-1")
	awaitBinding(t, b, "both roles are delivered", available)
	reportCopy := tenancy.DataRoleDeliveryPath(cp, "report")

	// Removing report while an ExternalSecret reads its copy: nothing of
	// it goes, and the binding says why.
	reader := externalSecret(t, ns, "shop-report", reportCopy)
	setRoles(t, b, v1alpha1.BindingDataRole{Name: "app", Access: v1alpha1.DataReadWrite})
	awaitBinding(t, b, "the removed role waits for its reader", func(b *v1alpha1.DatabaseBinding) bool {
		r, ok := roleStatus(b, "report")
		return ok && strings.Contains(r.Message, "ExternalSecret shop-report")
	})
	if !available(b) {
		t.Errorf("a role being removed keeps the binding from Ready: %s", describeBinding(b))
	}
	if readKV(t, reportCopy) == nil || !slices.Contains(dbRoles(t, db), "report:readOnly") {
		t.Fatalf("the removed role's copy or role went while an ExternalSecret still read its copy (Database roles %v)", dbRoles(t, db))
	}
	if err := env.Kube.Client.Delete(ctx, reader); err != nil {
		t.Fatal(err)
	}
	release(t, reader)
	awaitCopy(t, reportCopy, "the removed role's copy is deleted", func(r *openbao.Record) bool { return r == nil })
	testenv.Await(t, env.Kube.Client, db, timeout, "the removed role leaves the Database", func(db *v1alpha1.Database) bool {
		return len(db.Spec.ForProvider.DataRoles) == 1 && db.Spec.ForProvider.DataRoles[0].Name == "app"
	}, func(*v1alpha1.Database) string { return describeBinding(b) })
	awaitBinding(t, b, "the status no longer lists the removed role", func(b *v1alpha1.DatabaseBinding) bool {
		_, ok := roleStatus(b, "report")
		return !ok && available(b)
	})
	noSecretsIn(t, ns, b, "owner-secret-1", "app-secret-1", "report-secret-1")

	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, b, "the binding")
	if rec := readKV(t, appCopy); rec != nil {
		t.Errorf("the data role's copy survived the binding: %s", ownerOnly(rec))
	}
}

// A static binding gets only the data roles its Database has (an admin's):
// one it lacks is reported, and the binder never adds it.
func TestStaticBindingNeverAddsADataRole(t *testing.T) {
	testenv.Need(t)
	_, db, b, _ := availableStatic(t, "shop", "static-secret-1")
	setRoles(t, b, v1alpha1.BindingDataRole{Name: "app", Access: v1alpha1.DataReadWrite})
	awaitBinding(t, b, "the missing role is reported", func(b *v1alpha1.DatabaseBinding) bool {
		c := b.GetCondition(xpv2.TypeReady)
		return c.Status == corev1.ConditionFalse && string(c.Reason) == tenancy.ReasonDataRoleUnavailable && strings.Contains(c.Message, "ask them to add app")
	})
	if got := dbRoles(t, db); len(got) != 0 {
		t.Errorf("the binder added %v to a static Database", got)
	}
}

func setRoles(t *testing.T, b *v1alpha1.DatabaseBinding, roles ...v1alpha1.BindingDataRole) {
	t.Helper()
	testenv.Edit(t, env.Kube.Client, b, func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.DataRoles = roles })
}
