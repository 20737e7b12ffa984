package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/controller/binding"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// waitFor polls cond until it is true, failing with describe() when ctx
// ends first.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	if err := testenv.WaitFor(ctx, 0, func(context.Context) error {
		if !cond() {
			return testenv.ErrNotYet
		}
		return nil
	}); err != nil {
		t.Fatalf("%s never happened:\n%s", what, describe())
	}
}

func getDatabase(ctx context.Context, t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func str(u *unstructured.Unstructured, f ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, f...)
	return s
}

// A dynamic Tenant gets its own cluster-scoped Database, named from its UID
// and bound to exactly its UID; twenty forced reconciles of every object
// change nothing: one Database, one password.
func TestDynamicProvisioningIsIdempotent(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "dyn", "dyn-app"
	tn := tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: shared}")
	db := tenantkit.BoundDatabase(ctx, t, env, ns, name)
	if want := "tenant-" + string(tn.GetUID()); db.GetName() != want {
		t.Errorf("Database %q, want %q", db.GetName(), want)
	}
	if got := str(db, "spec", "claimRef", "uid"); got != string(tn.GetUID()) {
		t.Errorf("claimRef.uid %q, want the Tenant's %q", got, tn.GetUID())
	}
	if got := str(db, "spec", "reclaimPolicy"); got != "Retain" {
		t.Errorf("reclaimPolicy %q, want the instance's default Retain", got)
	}
	if got := str(db, "spec", "forProvider", "database"); got != "dyn_app" {
		t.Errorf("database %q, want dyn_app (the Tenant's name as an identifier)", got)
	}
	waitFor(ctx, t, "binding phase Bound", func() bool {
		return str(getDatabase(ctx, t, db.GetName()), "status", "binding", "phase") == "Bound"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	password := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name))

	for i := range 20 {
		for _, o := range [][3]string{{"Tenant", ns, name}, {"DatabaseBinding", ns, name}, {"Database", "", db.GetName()}} {
			testenv.Edit(t, env.Kube.Client, tenantkit.Ref(api, o[0], o[1], o[2]), func(u *unstructured.Unstructured) {
				a := u.GetAnnotations()
				if a == nil {
					a = map[string]string{}
				}
				a["test/poke"] = fmt.Sprint(i)
				u.SetAnnotations(a)
			})
		}
		time.Sleep(300 * time.Millisecond)
	}
	tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(api)
	list.SetKind("DatabaseList")
	if err := env.Kube.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range list.Items {
		if str(&d, "spec", "claimRef", "uid") == string(tn.GetUID()) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d Databases claim the Tenant, want 1", n)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(db.GetName())); v != 1 {
		t.Errorf("the Database's record has %d versions, want 1", v)
	}
	if got := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name)); got != password {
		t.Error("the password changed")
	}
}

// seedExisting makes a database, its owner role and a credential record by
// hand, as they exist before the provider is installed, and returns the
// database's OID.
func seedExisting(ctx context.Context, t *testing.T, database, recordPath, password string) uint32 {
	t.Helper()
	v, err := scram.Verifier(password)
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", database, v),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", database, database),
		fmt.Sprintf("REVOKE CONNECT ON DATABASE %s FROM PUBLIC", database),
		fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", database, database),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var oid uint32
	if err := c.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = $1", database).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	// The record says where the provider's Pod reaches the server, as the
	// instance's config does.
	hostaddr := env.Postgres.Hostaddr
	if env.Postgres.PodHostaddr != "" {
		hostaddr = env.Postgres.PodHostaddr
	}
	rec := map[string]any{"username": database, "password": password, "database": database,
		"host": env.Postgres.Host, "hostaddr": hostaddr, "port": fmt.Sprint(env.Postgres.Port), "sslmode": "verify-full"}
	if _, err := root.KVv2(env.OpenBao.KVMount).Put(ctx, recordPath, rec); err != nil {
		t.Fatal(err)
	}
	// The app's data.
	tc, err := env.Postgres.SuperConn(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close(ctx) //nolint:errcheck // test connection
	if _, err := tc.Exec(ctx, fmt.Sprintf("CREATE TABLE kept (v text); ALTER TABLE kept OWNER TO %s; INSERT INTO kept VALUES ('data')", database)); err != nil {
		t.Fatal(err)
	}
	return oid
}

// importDatabase creates an admin's read-only import, reserved for the
// Tenant ns/tenant when ns is not empty.
func importDatabase(ctx context.Context, t *testing.T, name, database, recordPath, ns, tenant string) {
	t.Helper()
	claim := ""
	if ns != "" {
		claim = fmt.Sprintf("\n  claimRef: {namespace: %s, name: %s}", ns, tenant)
	}
	u := tenantkit.MustUnstructured(fmt.Sprintf(`apiVersion: %s
kind: Database
metadata: {name: %s}
spec:
  providerConfigRef: {name: shared}
  managementPolicies: [Observe]%s
  forProvider: {database: %s, loginRole: %s, credentialPath: %s}
`, api, name, claim, database, database, recordPath))
	if err := env.Kube.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the import Ready", func() bool {
		return tenantkit.Ready(getDatabase(ctx, t, name)) == "True"
	}, func() string {
		u, err := tenantkit.Get(context.Background(), env.Kube.Client, api, "Database", "", name)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(u.Object["status"])
	})
}

// dataKept checks the seeded row is there, read with password as the role.
func dataKept(ctx context.Context, t *testing.T, database, password string) {
	t.Helper()
	cfg, err := env.Postgres.ConnConfig(database, password, database)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("%s no longer logs in with its password: %v", database, err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "data" {
		t.Errorf("the data of %s: %q, %v", database, v, err)
	}
}

// An admin imports an existing database read-only and reserves it for one
// Tenant; that Tenant binds it statically and gets the same database, owner
// and password: nothing is changed on the server or in the record.
// Released after the Tenant goes, it is not handed to a new Tenant of the
// same name until the admin rotates the credential and presets the claim
// for a new Tenant: the old password then opens nothing, and the new
// Tenant, in another namespace, gets the data with the new one.
func TestImportStaticBindReleaseRebind(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const dbName, database, ns, tenant = "legacy-erp", "erp", "erp", "erp"
	const password = "imported-canary-PASSWORD-9b2"
	oid := seedExisting(ctx, t, database, "postgresql-databases/imports/erp", password)
	importDatabase(ctx, t, dbName, database, "postgresql-databases/imports/erp", ns, tenant)

	tn := tenantkit.NewTenant(ctx, t, env, api, ns, tenant, "{databaseRef: "+dbName+"}")
	if got := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.StaticSecretName(tenant)); got != password {
		t.Error("the static binding delivered another password than the imported one")
	}
	db := getDatabase(ctx, t, dbName)
	if got := str(db, "spec", "claimRef", "uid"); got != string(tn.GetUID()) {
		t.Errorf("claimRef.uid %q, want %q", got, tn.GetUID())
	}
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	var now uint32
	var owner string
	if err := c.QueryRow(ctx, "SELECT d.oid, r.rolname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1", database).Scan(&now, &owner); err != nil {
		t.Fatal(err)
	}
	if now != oid || owner != database {
		t.Errorf("database OID %d owner %s, want %d owned by %s", now, owner, oid, database)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, "postgresql-databases/imports/erp"); v != 1 {
		t.Errorf("the imported record has %d versions, want 1", v)
	}

	// Released: the data and the login stay, the namespace loses the copy.
	tenantkit.DeleteTenant(ctx, t, env, api, ns, tenant)
	waitFor(ctx, t, "Released", func() bool {
		return str(getDatabase(ctx, t, dbName), "status", "binding", "phase") == "Released"
	}, func() string { return fmt.Sprint(getDatabase(ctx, t, dbName).Object["status"]) })
	dataKept(ctx, t, database, password)
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, tenant)); v != 0 {
		t.Errorf("the namespace's copy survived the release (%d versions)", v)
	}

	// A new Tenant of the same namespace and name inherits nothing.
	tenantkit.CreateTenant(ctx, t, env, api, ns, tenant, "{databaseRef: "+dbName+"}")
	waitFor(ctx, t, "the new Tenant refused as Released", func() bool {
		b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, tenant)
		_, reason, _ := tenantkit.Condition(b, "Ready")
		return err == nil && reason == "Released"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, tenant) })
	time.Sleep(3 * time.Second)
	if got := str(getDatabase(ctx, t, dbName), "spec", "claimRef", "uid"); got != string(tn.GetUID()) {
		t.Errorf("the Released claim changed to %q", got)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, tenant)); v != 0 {
		t.Error("a refused Tenant got a delivery copy")
	}
	tenantkit.DeleteTenant(ctx, t, env, api, ns, tenant)

	// The admin hands it to a Tenant in another namespace: first the old
	// access goes (a rotation, with Update allowed on the import, ending
	// the old sessions), then the claim is preset for the new Tenant.
	old, err := env.Postgres.ConnConfig(database, password, database)
	if err != nil {
		t.Fatal(err)
	}
	oldSession, err := pgx.ConnectConfig(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	defer oldSession.Close(context.Background()) //nolint:errcheck // ended by the rotation
	// Setting a password on a role the admin did not create needs ADMIN
	// OPTION on it from PostgreSQL 16 on (the Database says so with
	// InsufficientPrivileges); the admin of an import grants it first.
	su, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, fmt.Sprintf("GRANT %s TO %s WITH ADMIN OPTION", database, env.Postgres.AdminUser)); err != nil {
		t.Fatal(err)
	}
	_ = su.Close(ctx)
	testenv.Edit(t, env.Kube.Client, tenantkit.Ref(api, "Database", "", dbName), func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"Observe", "Update"}, "spec", "managementPolicies")
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"id": "before-rebind", "terminateSessions": true}, "spec", "credentialRotation")
	})
	waitFor(ctx, t, "the rotation", func() bool {
		return str(getDatabase(ctx, t, dbName), "status", "atProvider", "credentialRotation", "id") == "before-rebind"
	}, func() string {
		u, _ := tenantkit.Get(context.Background(), env.Kube.Client, api, "Database", "", dbName)
		return fmt.Sprint(u.Object["status"])
	})
	if c, err := pgx.ConnectConfig(ctx, old); err == nil {
		_ = c.Close(ctx)
		t.Error("the old password still logs in after the rotation")
	}
	if err := oldSession.Ping(ctx); err == nil {
		t.Error("a session of the old password survived the rotation")
	}
	const ns2, tenant2 = "erp-next", "erp-next"
	testenv.Edit(t, env.Kube.Client, tenantkit.Ref(api, "Database", "", dbName), func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"namespace": ns2, "name": tenant2}, "spec", "claimRef")
	})
	tenantkit.NewTenant(ctx, t, env, api, ns2, tenant2, "{databaseRef: "+dbName+"}")
	got := tenantkit.CheckSecretLogsIn(ctx, t, env, ns2, tenantkit.StaticSecretName(tenant2))
	if got == password {
		t.Error("the new Tenant got the old password")
	}
	dataKept(ctx, t, database, got)
}

// Binding what is not open for binding is refused, and nothing is written:
// a Database bound to another Tenant, and one that is not Ready.
func TestStaticBindingRefusals(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Taken: bound to the owner's Tenant.
	const owner, thief = "taken-owner", "taken-thief"
	tenantkit.NewTenant(ctx, t, env, api, owner, owner, "{instanceRef: shared}")
	taken := tenantkit.BoundDatabase(ctx, t, env, owner, owner)
	claim := str(taken, "spec", "claimRef", "uid")
	tenantkit.CreateTenant(ctx, t, env, api, thief, thief, "{databaseRef: "+taken.GetName()+"}")
	waitFor(ctx, t, "AlreadyBound", func() bool {
		b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", thief, thief)
		_, reason, _ := tenantkit.Condition(b, "Ready")
		return err == nil && reason == "AlreadyBound"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, thief, thief) })
	waitFor(ctx, t, "the binding's reason AlreadyBound on the Tenant", func() bool {
		tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", thief, thief)
		return err == nil && str(tn, "status", "reason") == "AlreadyBound"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, thief, thief) })
	time.Sleep(3 * time.Second)
	if got := str(getDatabase(ctx, t, taken.GetName()), "spec", "claimRef", "uid"); got != claim {
		t.Errorf("the claim changed from %s to %s", claim, got)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(thief, thief)); v != 0 {
		t.Error("the thief got a delivery copy")
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: thief, Name: tenantkit.StaticSecretName(thief)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the thief got a Secret (%v)", err)
	}
	// What the thief's namespace reads names neither the owner's
	// namespace, nor its Tenant's UID, nor the Database's messages.
	b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", thief, thief)
	if err != nil {
		t.Fatal(err)
	}
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", thief, thief)
	if err != nil {
		t.Fatal(err)
	}
	_, _, bmsg := tenantkit.Condition(b, "Ready")
	for _, msg := range []string{bmsg, str(tn, "status", "message")} {
		// The Database's name (which the thief named, and which a dynamic
		// Database derives from its Tenant's UID) aside.
		msg = strings.ReplaceAll(msg, taken.GetName(), "<database>")
		if strings.Contains(msg, owner+"/") || strings.Contains(msg, "namespace "+owner) || strings.Contains(msg, claim) {
			t.Errorf("the refusal the thief's namespace reads tells the owner's claim: %q", msg)
		}
	}

	// Not Ready: an import whose credential does not log in.
	const notReady = "not-ready"
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	for _, q := range []string{"CREATE ROLE broken LOGIN", "CREATE DATABASE broken OWNER broken"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	u := tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Database\nmetadata: {name: %s}\nspec:\n  providerConfigRef: {name: shared}\n  managementPolicies: [Observe]\n  forProvider: {database: broken, credentialPath: postgresql-databases/imports/broken}\n", api, notReady))
	if err := env.Kube.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	const ns = "wants-broken"
	tenantkit.CreateTenant(ctx, t, env, api, ns, ns, "{databaseRef: "+notReady+"}")
	waitFor(ctx, t, "DatabaseNotReady", func() bool {
		b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, ns)
		_, reason, _ := tenantkit.Condition(b, "Ready")
		return err == nil && reason == "DatabaseNotReady"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, ns) })
	if _, ok, _ := unstructured.NestedMap(getDatabase(ctx, t, notReady).Object, "spec", "claimRef"); ok {
		t.Error("a Database that is not Ready was claimed")
	}
}

// Twenty rounds of two Tenants in two namespaces racing for one Available
// Database: exactly one binds it each time, and the loser gets nothing.
func TestTwoTenantsRaceForOneDatabase(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const dbName, database = "contested-db", "contested_db"
	seedExisting(ctx, t, database, "postgresql-databases/imports/contested", "contested-password")
	importDatabase(ctx, t, dbName, database, "postgresql-databases/imports/contested", "", "")
	nss := []string{"race-one", "race-two"}
	for round := range 20 {
		name := fmt.Sprintf("r%d", round)
		errs := make(chan error, len(nss))
		for _, ns := range nss {
			if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
				t.Fatal(err)
			}
		}
		for _, ns := range nss {
			go func() {
				errs <- env.Kube.Client.Create(ctx, tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Tenant\nmetadata: {name: %s, namespace: %s}\nspec: {databaseRef: %s}\n", api, name, ns, dbName)))
			}()
		}
		for range nss {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		var winner, loser string
		waitFor(ctx, t, fmt.Sprintf("round %d: a winner and a loser", round), func() bool {
			winner, loser = "", ""
			for _, ns := range nss {
				b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, name)
				if err != nil {
					continue
				}
				_, reason, _ := tenantkit.Condition(b, "Ready")
				switch {
				case str(b, "status", "atProvider", "databaseName") == dbName:
					winner = ns
				case reason == "AlreadyBound":
					loser = ns
				}
			}
			return winner != "" && loser != ""
		}, func() string {
			return tenantkit.Describe(context.Background(), env, api, nss[0], name) + tenantkit.Describe(context.Background(), env, api, nss[1], name)
		})
		if got := str(getDatabase(ctx, t, dbName), "spec", "claimRef", "namespace"); got != winner {
			t.Fatalf("round %d: the claim names %q, the winner is %q", round, got, winner)
		}
		if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(loser, name)); v != 0 {
			t.Fatalf("round %d: the loser %s got a delivery copy", round, loser)
		}
		for _, ns := range nss {
			tenantkit.DeleteTenant(ctx, t, env, api, ns, name)
		}
		// Released; the admin opens it again for the next round.
		testenv.Edit(t, env.Kube.Client, tenantkit.Ref(api, "Database", "", dbName), func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "claimRef")
		})
	}
}

// An app namespace's identity cannot create, import, patch or delete a
// Database, even when a RoleBinding in its namespace grants it every verb
// on Databases: Databases are cluster-scoped, and only a ClusterRoleBinding
// grants rights on them. The same identity does create in its namespace,
// so the refusal is not a broken impersonation.
func TestAppNamespaceCannotTouchDatabases(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "app-rbac"
	if err := env.Kube.EnsureServiceAccount(ctx, ns, "deployer"); err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: test-every-database-verb}
rules:
- apiGroups: [database.ayatori.ddupan.top]
  resources: [databases, databasebindings, tenants]
  verbs: ["*"]
- apiGroups: [""]
  resources: [configmaps]
  verbs: ["*"]
`,
		fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deployer-every-database-verb, namespace: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: test-every-database-verb}
subjects: [{kind: ServiceAccount, name: deployer, namespace: %s}]
`, ns, ns),
	} {
		if err := env.Kube.Client.Create(ctx, tenantkit.MustUnstructured(y)); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	as := asServiceAccount(t, ns, "deployer")
	if err := as.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allowed"}}); err != nil {
		t.Fatalf("the identity cannot create in its own namespace, so the refusals below prove nothing: %v", err)
	}
	imp := tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Database\nmetadata: {name: stolen}\nspec:\n  providerConfigRef: {name: shared}\n  managementPolicies: [Observe, Delete]\n  reclaimPolicy: Delete\n  forProvider: {database: stolen, credentialPath: postgresql-databases/other}\n", api))
	if err := as.Create(ctx, imp); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Database as the namespace: %v, want Forbidden", err)
	}
	// An existing Database: neither patch nor delete.
	victim := tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Database\nmetadata: {name: rbac-victim}\nspec:\n  providerConfigRef: {name: shared}\n  managementPolicies: [Observe]\n  forProvider: {database: rbac_victim, credentialPath: postgresql-databases/imports/rbac-victim}\n", api))
	if err := env.Kube.Client.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"reclaimPolicy":"Delete"}}`))
	if err := as.Patch(ctx, victim.DeepCopy(), patch); !apierrors.IsForbidden(err) {
		t.Errorf("patching a Database as the namespace: %v, want Forbidden", err)
	}
	if err := as.Delete(ctx, victim.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a Database as the namespace: %v, want Forbidden", err)
	}
	if got := str(getDatabase(ctx, t, "rbac-victim"), "spec", "reclaimPolicy"); got != "Retain" {
		t.Errorf("the victim's reclaimPolicy is %q", got)
	}
	if err := env.Kube.Client.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
}

// An app namespace's own identity (a service account with crossplane-edit
// in its namespace, not the admin) cannot write a DatabaseBinding while the
// shipped admission policy is installed; without it, it still cannot
// reopen the Released Database of
// its deleted Tenant by writing a DatabaseBinding that names that Tenant's
// name and UID, controlled (ownerReference with that UID) by an object of
// an apiVersion nobody serves, so that the garbage collector never removes
// it: the binding is refused, the Database stays Released with its claim,
// no delivery copy is written where the namespace's ESO reads, and the
// refusal names no UID.
func TestForgedBindingCannotReopenAReleasedDatabase(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "forger", "victim"
	tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: shared}")
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	oldUID := string(tn.GetUID())
	dbName := dynDB(ctx, t, ns, name)
	tenantkit.DeleteTenant(ctx, t, env, api, ns, name)
	waitFor(ctx, t, "the Database Released", func() bool {
		return str(getDatabase(ctx, t, dbName), "status", "binding", "phase") == "Released"
	}, func() string { return fmt.Sprint(getDatabase(ctx, t, dbName).Object["status"]) })
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v != 0 {
		t.Fatalf("the delivery copy survived the release (%d versions)", v)
	}

	// The namespace's own identity: crossplane-edit in its namespace.
	if err := env.Kube.EnsureServiceAccount(ctx, ns, "app"); err != nil {
		t.Fatal(err)
	}
	rb := tenantkit.MustUnstructured(fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-crossplane-edit, namespace: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: crossplane-edit}
subjects: [{kind: ServiceAccount, name: app, namespace: %s}]
`, ns, ns))
	if err := env.Kube.Client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	as := asServiceAccount(t, ns, "app")
	forged := tenantkit.MustUnstructured(fmt.Sprintf(`apiVersion: %[1]s
kind: DatabaseBinding
metadata:
  name: %[2]s
  namespace: %[3]s
  ownerReferences:
  - {apiVersion: forged.example.org/v1, kind: Tenant, name: %[2]s, uid: %[4]s, controller: true}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: shared}
  forProvider:
    tenant: {name: %[2]s, uid: %[4]s}
    database: %[2]s
`, api, name, ns, oldUID))
	// With the shipped admission policy (cluster/admission), the
	// namespace's identity cannot write a binding at all.
	var cerr error
	waitFor(ctx, t, "the app identity's create refused by the admission policy (the RBAC manager's roles aggregate)", func() bool {
		cerr = as.Create(ctx, forged.DeepCopy())
		return cerr != nil && strings.Contains(cerr.Error(), "DatabaseBindings are written only by Crossplane")
	}, func() string {
		return fmt.Sprintf("the namespace's identity's create was not refused by the admission policy: %v", cerr)
	})
	// Without it (a cluster whose admin has not installed it), the
	// provider refuses the forged binding itself.
	if err := env.Kube.UninstallAdmissionPolicies(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Kube.InstallAdmissionPolicies(context.Background()); err != nil {
			t.Errorf("reinstalling the admission policy: %v", err)
		}
	})
	waitFor(ctx, t, "the app identity's create", func() bool {
		cerr = as.Create(ctx, forged.DeepCopy())
		return cerr == nil || apierrors.IsAlreadyExists(cerr)
	}, func() string {
		return fmt.Sprintf("the namespace's identity cannot create a DatabaseBinding, so nothing below would be proven: %v", cerr)
	})

	waitFor(ctx, t, "the forged binding refused", func() bool {
		b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, name)
		_, reason, _ := tenantkit.Condition(b, "Ready")
		return err == nil && reason == "NotATenantsBinding"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	time.Sleep(5 * time.Second)
	b, err := tenantkit.Get(ctx, as, api, "DatabaseBinding", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"Ready", "Synced"} {
		if _, _, msg := tenantkit.Condition(b, typ); strings.Contains(msg, oldUID) {
			t.Errorf("the %s message the namespace reads tells the earlier Tenant's UID: %q", typ, msg)
		}
	}
	if p := str(b, "status", "atProvider", "databaseName"); p != "" {
		t.Errorf("the forged binding recorded Database %s", p)
	}
	db := getDatabase(ctx, t, dbName)
	if p := str(db, "status", "binding", "phase"); p != "Released" {
		t.Errorf("the Database is %q, want Released", p)
	}
	if got := str(db, "spec", "claimRef", "uid"); got != oldUID {
		t.Errorf("the claim changed from %s to %q", oldUID, got)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v != 0 {
		t.Errorf("the forged binding got a delivery copy (%d versions)", v)
	}
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the forged binding's deletion", func() bool {
		_, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, name)
		return apierrors.IsNotFound(err)
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	if p := str(getDatabase(ctx, t, dbName), "status", "binding", "phase"); p != "Released" {
		t.Errorf("after the forged binding's deletion the Database is %q, want Released", p)
	}
}

// Editing the external-name annotation of a Bound Database moves nothing:
// no new role or database is created, the record keeps its names, and the
// Tenant keeps its data.
func TestExternalNameEditMovesNothing(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "extname", "extname"
	tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: shared}")
	password := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name))
	db := tenantkit.BoundDatabase(ctx, t, env, ns, name)
	testenv.Edit(t, env.Kube.Client, tenantkit.Ref(api, "Database", "", db.GetName()), func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["crossplane.io/external-name"] = "moved"
		u.SetAnnotations(a)
	})
	time.Sleep(8 * time.Second) // several polls
	if hasDB, role := tenantkit.ServerHas(ctx, t, env, "moved", "moved"); hasDB || role {
		t.Errorf("the edit created database %v / role %v named moved", hasDB, role)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(db.GetName())); v != 1 {
		t.Errorf("the record has %d versions, want 1", v)
	}
	if got := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name)); got != password {
		t.Error("the Secret's password changed")
	}
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := root.KVv2(env.OpenBao.KVMount).Get(ctx, tenantkit.RecordPath(db.GetName()))
	if err != nil {
		t.Fatal(err)
	}
	if sec.Data["database"] != strings.ReplaceAll(name, "-", "_") {
		t.Errorf("the record now names database %v", sec.Data["database"])
	}
}

// A one-sided bind: the provider is killed after it wrote the claim on the
// Database and before the binding recorded it. The claim alone grants
// nothing (no copy, no Secret); after a restart the binding completes it,
// and the Tenant is Ready with the Database's own credential.
func TestOneSidedBindIsCompletedAfterAKill(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const dbName, database, ns, tenant = "one-sided", "one_sided", "one-sided", "one-sided"
	const password = "one-sided-canary-PASSWORD-3c1"
	seedExisting(ctx, t, database, "postgresql-databases/imports/one-sided", password)
	importDatabase(ctx, t, dbName, database, "postgresql-databases/imports/one-sided", ns, tenant)
	prov.restart(ctx, t, "PPT_FAULT_KILL_BEFORE_STEP="+binding.StepRecordBinding)
	tenantkit.CreateTenant(ctx, t, env, api, ns, tenant, "{databaseRef: "+dbName+"}")
	wait, cancelWait := context.WithTimeout(ctx, 90*time.Second)
	err := prov.waitExit(wait)
	cancelWait()
	if err != nil {
		t.Fatalf("%v\n%s", err, tenantkit.Describe(ctx, env, api, ns, tenant))
	}
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if got := str(getDatabase(ctx, t, dbName), "spec", "claimRef", "uid"); got != string(tn.GetUID()) {
		t.Fatalf("the kill came before the claim was written (claimRef.uid %q)", got)
	}
	if n := tenantkit.DatabaseName(ctx, env, ns, tenant); n != "" {
		t.Fatalf("the binding recorded %s before the kill: the test did not make a one-sided bind", n)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, tenant)); v != 0 {
		t.Error("a one-sided claim was delivered")
	}
	prov.restart(ctx, t)
	tenantkit.WaitTenantReady(ctx, t, env, api, ns, tenant)
	if got := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.StaticSecretName(tenant)); got != password {
		t.Error("the completed binding delivered another password")
	}
}
