package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// appConn logs in with the Tenant's Secret, as the app would.
func appConn(ctx context.Context, t *testing.T, ns, name string) *pgx.Conn {
	t.Helper()
	return appConnTo(ctx, t, ns, tenantkit.SecretName(name))
}

// appConnTo logs in with the Secret ns/secret.
func appConnTo(ctx context.Context, t *testing.T, ns, secret string) *pgx.Conn {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Postgres.ConnConfig(string(s.Data["username"]), string(s.Data["password"]), string(s.Data["database"]))
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The app's credential logs in to its database and can work in it, but
// cannot create databases or roles.
func TestAppCredentialCannotCreateDatabasesOrRoles(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tenantkit.NewTenant(ctx, t, env, api, "appcred", "appcred", "{instanceRef: shared}")
	c := appConn(ctx, t, "appcred", "appcred")
	defer c.Close(ctx) //nolint:errcheck // test connection
	if _, err := c.Exec(ctx, "CREATE TABLE notes (id int PRIMARY KEY, body text)"); err != nil {
		t.Errorf("the app cannot create a table in its own database: %v", err)
	}
	for _, stmt := range []string{"CREATE DATABASE appcred_other", "CREATE ROLE appcred_other"} {
		_, err := c.Exec(ctx, stmt)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as the app: %v, want insufficient_privilege (42501)", stmt, err)
		}
	}
}

// An extension the server does not have is refused before anything is
// written: no database, no role, no record, no Secret.
func TestUnavailableExtensionRejectedBeforeAnyWrite(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "noext", "noext"
	tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: shared, extensions: [no_such_extension]}")
	for {
		if _, reason := dbCondition(ctx, ns, name); reason == "InvalidSpec" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no InvalidSpec:\n%s", tenantkit.Describe(context.Background(), env, api, ns, name))
		}
		time.Sleep(200 * time.Millisecond)
	}
	nothingWritten(ctx, t, ns, name, "despite the unavailable extension")
}

// nothingWritten waits 3 s (later reconciles must write nothing either) and
// checks that the Tenant ns/name has no database, no role, no credential
// version and is not Ready.
func nothingWritten(ctx context.Context, t *testing.T, ns, name, why string) {
	t.Helper()
	time.Sleep(3 * time.Second)
	if db, role := tenantkit.ServerHas(ctx, t, env, name, name); db || role {
		t.Errorf("written %s: database %v, role %v", why, db, role)
	}
	if tenantkit.RecordVersions(ctx, t, env, record(ctx, t, ns, name)) != 0 || tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)) != 0 {
		t.Errorf("a credential was written %s", why)
	}
	if tn, _ := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name); tenantkit.Ready(tn) == "True" {
		t.Error("the Tenant is Ready")
	}
}

// When the server cannot answer whether an extension is available (here: the
// admin role may no longer read pg_available_extensions), the Database says
// DependencyUnavailable naming the failed check, never "not available"
// (InvalidSpec); nothing is written meanwhile; and once the server answers
// again the Tenant becomes Ready without anyone touching it.
func TestExtensionCheckFailureIsNotUnsupported(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "extcheck", "extcheck"
	su, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(context.Background()) //nolint:errcheck // test connection
	grant := func() {
		if _, err := su.Exec(context.Background(), "GRANT SELECT ON pg_catalog.pg_available_extensions TO PUBLIC"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := su.Exec(ctx, "REVOKE SELECT ON pg_catalog.pg_available_extensions FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	granted := false
	defer func() {
		if !granted {
			grant()
		}
	}()
	// The revocation really makes the admin's query fail (so the test
	// below cannot pass for another reason).
	acfg, err := env.Postgres.ConnConfig(env.Postgres.AdminUser, env.Postgres.AdminPassword, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	ac, err := pgx.ConnectConfig(ctx, acfg)
	if err != nil {
		t.Fatal(err)
	}
	_, qerr := ac.Exec(ctx, "SELECT name FROM pg_catalog.pg_available_extensions")
	_ = ac.Close(ctx)
	if pe := (*pgconn.PgError)(nil); !errors.As(qerr, &pe) || pe.Code != "42501" {
		t.Fatalf("the admin can still read pg_available_extensions: %v", qerr)
	}

	tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: shared, extensions: [pg_trgm]}")
	var msg string
	for {
		var db *unstructured.Unstructured
		tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
		if err == nil {
			db, err = tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", "tenant-"+string(tn.GetUID()))
		}
		status, reason, m := tenantkit.Condition(db, "Ready")
		if err == nil && reason == "InvalidSpec" {
			t.Fatalf("a failed availability query was reported as an unavailable extension: %s", m)
		}
		if err == nil && status == "False" && reason == tenancy.ReasonDependencyUnavailable {
			msg = m
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no DependencyUnavailable:\n%s", tenantkit.Describe(context.Background(), env, api, ns, name))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(msg, "pg_available_extensions") {
		t.Errorf("the message does not name the failed check: %q", msg)
	}
	nothingWritten(ctx, t, ns, name, "although availability was unknown")

	grant()
	granted = true
	tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
	c := appConn(ctx, t, ns, name)
	defer c.Close(ctx) //nolint:errcheck // test connection
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&n); err != nil || n != 1 {
		t.Errorf("pg_trgm installed: %d (%v)", n, err)
	}
}

// The registered server is Ready over TLS (every admin connection the
// provider holds is TLS), reports its version, goes unready while the server
// is down and recovers by itself.
func TestConfigReadyOverTLSAndRecoversAfterOutage(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cpc := func() *v1alpha1.ClusterProviderConfig {
		c := &v1alpha1.ClusterProviderConfig{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: tenantkit.Instance}, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	waitPhase := func(want v1alpha1.ConfigPhase, ready corev1.ConditionStatus) *v1alpha1.ClusterProviderConfig {
		for {
			c := cpc()
			if c.Status.Phase == want && c.GetCondition(xpv2.TypeReady).Status == ready {
				return c
			}
			if ctx.Err() != nil {
				t.Fatalf("config never %s/%s: %+v", want, ready, c.Status)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	c := waitPhase(v1alpha1.ConfigPhaseReady, corev1.ConditionTrue)
	if c.Status.PostgreSQLVersion == "" {
		t.Error("no server version in the config's status")
	}
	su, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var plain, tls int
	if err := su.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT s.ssl), count(*) FILTER (WHERE s.ssl) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.usename = $1`, env.Postgres.AdminUser).Scan(&plain, &tls); err != nil {
		t.Fatal(err)
	}
	_ = su.Close(ctx)
	if plain != 0 || tls == 0 {
		t.Errorf("admin connections: %d without TLS, %d with", plain, tls)
	}
	env.Postgres.Stop()
	started := false
	defer func() {
		if !started {
			_ = env.Postgres.Start(context.Background())
		}
	}()
	c = waitPhase(v1alpha1.ConfigPhaseValidating, corev1.ConditionFalse)
	if r := c.GetCondition(xpv2.TypeReady).Reason; r != "DependencyUnavailable" {
		t.Errorf("while the server is down: reason %s, want DependencyUnavailable", r)
	}
	if err := env.Postgres.Start(ctx); err != nil {
		t.Fatal(err)
	}
	started = true
	waitPhase(v1alpha1.ConfigPhaseReady, corev1.ConditionTrue)
}

// Delete, with the provider killed before each deletion step in turn and
// restarted: after every kill the Database is there, being deleted, with
// its finalizer; in the end the database, the role, every record version
// and the finalizer are gone, and another role's objects stay. One Tenant
// takes every kill: each restart arms the next step's, so every step is
// done by a provider that started where a kill left the deletion.
func TestDeleteWithTheProviderKilledAtEveryStep(t *testing.T) {
	testenv.Need(t)
	steps := []string{database.StepBlockLogins, database.StepTerminate, database.StepDropDatabase, database.StepDropRole, database.StepDeleteKV}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const ns, name = "delkill", "delkill"
	tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: "+tenantkit.DeleteInstance+"}")
	dbName := dynDB(ctx, t, ns, name)
	live := appConnTo(ctx, t, ns, tenantkit.InstanceSecretName(tenantkit.DeleteInstance, name)) // a session the deletion must end
	defer live.Close(context.Background())                                                      //nolint:errcheck // ended by the provider
	// Someone else's role, owning a table in another database: nothing of
	// the Database's, so no step may touch it.
	const foreign = "delkill_foreign"
	super := env.Postgres.SuperConnT(t, "postgres")
	for _, q := range []string{
		"CREATE ROLE " + foreign + " NOLOGIN",
		"CREATE TABLE public." + foreign + " (x int)",
		"ALTER TABLE public." + foreign + " OWNER TO " + foreign,
	} {
		if _, err := super.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		_, _ = super.Exec(context.Background(), "DROP TABLE IF EXISTS public."+foreign)
		_, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS "+foreign)
	}()
	for i, step := range steps {
		ok := t.Run(step, func(t *testing.T) {
			prov.restart(ctx, t, "PPT_FAULT_KILL_BEFORE_STEP="+step)
			if i == 0 {
				tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
				if err != nil {
					t.Fatal(err)
				}
				if err := env.Kube.Client.Delete(ctx, tn); err != nil {
					t.Fatal(err)
				}
			}
			wait, cancelWait := context.WithTimeout(ctx, 90*time.Second)
			err := prov.waitExit(wait)
			cancelWait()
			if err != nil {
				t.Fatalf("not killed before %s: %v\n%s", step, err, tenantkit.Describe(ctx, env, api, ns, name))
			}
			// Killed mid-deletion: the Database is there, being deleted,
			// and keeps the finalizer that makes the next provider finish.
			mid, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", dbName)
			if err != nil {
				t.Fatalf("killed before %s: the Database is gone: %v", step, err)
			}
			if mid.GetDeletionTimestamp() == nil || !slices.Contains(mid.GetFinalizers(), "finalizer.managedresource.crossplane.io") {
				t.Errorf("killed before %s: the Database is deleted %v with finalizers %v, want being deleted with the managed-resource finalizer", step, mid.GetDeletionTimestamp() != nil, mid.GetFinalizers())
			}
		})
		if !ok {
			return
		}
	}
	prov.restart(ctx, t)
	err := testenv.WaitFor(ctx, 3*time.Minute, func(ctx context.Context) error {
		_, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", dbName)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return testenv.ErrNotYet
	})
	if err != nil {
		t.Fatalf("the Database is still there: %v\n%s", err, tenantkit.Describe(context.Background(), env, api, ns, name))
	}
	if db, role := tenantkit.ServerHas(ctx, t, env, name, name); db || role {
		t.Errorf("after Delete: database %v, role %v", db, role)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(dbName)); v != 0 {
		t.Errorf("after Delete: %d record versions left", v)
	}
	var owner string
	if err := super.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = $1", foreign).Scan(&owner); err != nil || owner != foreign {
		t.Errorf("after Delete: the foreign role's table: owner %q, %v; want it untouched", owner, err)
	}
}

// A phase forged before the provider ever saw the Database (status says
// Ready) skips nothing: the provider provisions and verifies everything.
func TestForgedPhaseNeverSkipsVerification(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const name = "forged"
	prov.stop(t)
	defer func() {
		if !prov.running() {
			prov.restart(context.Background(), t)
		}
	}()
	d := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: tenantkit.Instance}},
			ForProvider:                v1alpha1.DatabaseParameters{Database: name},
		},
	}
	if err := env.Kube.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	testenv.EditStatus(t, env.Kube.Client, d, func(d *v1alpha1.Database) {
		d.Status.AtProvider.Phase = v1alpha1.DatabasePhaseReady
		d.Status.AtProvider.Owner = name
		d.SetConditions(xpv2.Available().WithMessage("forged"))
	})
	prov.restart(ctx, t)
	for {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
		c := d.GetCondition(xpv2.TypeReady)
		if c.Status == corev1.ConditionTrue && c.Message != "forged" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the forged status was never replaced: %+v", d.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if db, role := tenantkit.ServerHas(ctx, t, env, name, name); !db || !role {
		t.Errorf("the forged Ready skipped provisioning: database %v, role %v", db, role)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(name)); v != 1 {
		t.Errorf("%d record versions, want 1", v)
	}
}

// A Tenant deleted with Retain leaves its Database Released with
// everything in it; a new Tenant with the same name gets a new Database
// whose same-named database and role exist and are not its own: a Conflict
// (a new UID cannot prove the old objects are its own), no Secret, and the
// retained database, role and record are untouched.
func TestRetainedThenRequestedAgainConflicts(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "again", "again"
	tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: shared}")
	password := endState(ctx, t, ns, name, name)
	retained := dynDB(ctx, t, ns, name)
	tenantkit.DeleteTenant(ctx, t, env, api, ns, name)
	tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: shared}")
	conflict(ctx, t, ns, name)
	if db, role := tenantkit.ServerHas(ctx, t, env, name, name); !db || !role {
		t.Errorf("the retained database %v / role %v is gone", db, role)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(retained)); v != 1 {
		t.Errorf("the retained record has %d versions, want 1", v)
	}
	if p := str(getDatabase(ctx, t, retained), "status", "binding", "phase"); p != "Released" {
		t.Errorf("the retained Database is %q, want Released", p)
	}
	// The retained credential still opens the retained database.
	cfg, err := env.Postgres.ConnConfig(name, password, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("the retained credential no longer logs in: %v", err)
	}
	_ = c.Close(ctx)
}

// A record someone else left where a Tenant's namespace reads its copy is
// not the Tenant's: the binding reports Conflict, the record is untouched,
// and no Secret is made from it.
func TestForeignRecordAtTheDeliveryPathConflicts(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "foreign", "foreign"
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	foreign := map[string]any{"username": "someone", "password": "not-yours"}
	if _, err := root.KVv2(env.OpenBao.KVMount).Put(ctx, tenantkit.DeliveryPath(ns, name), foreign); err != nil {
		t.Fatal(err)
	}
	tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: shared}")
	waitFor(ctx, t, "the binding's Conflict", func() bool {
		b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, name)
		_, reason, _ := tenantkit.Condition(b, "Ready")
		return err == nil && reason == "Conflict"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	time.Sleep(3 * time.Second)
	sec, err := root.KVv2(env.OpenBao.KVMount).Get(ctx, tenantkit.DeliveryPath(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sec.Data) != fmt.Sprint(foreign) || sec.VersionMetadata.Version != 1 {
		t.Errorf("the foreign record changed: version %d", sec.VersionMetadata.Version)
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenantkit.SecretName(name)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret was made despite the foreign record (%v)", err)
	}
}

// A record someone else left at a new Database's own path is not its own:
// Conflict, the record untouched, nothing made on the server.
func TestForeignRecordAtTheDatabasePathConflicts(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const name = "foreign-db"
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	foreign := map[string]any{"username": "someone", "password": "not-yours"}
	if _, err := root.KVv2(env.OpenBao.KVMount).Put(ctx, tenantkit.RecordPath(name), foreign); err != nil {
		t.Fatal(err)
	}
	d := tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Database\nmetadata: {name: %s}\nspec:\n  providerConfigRef: {name: shared}\n  forProvider: {database: foreign_db}\n", api, name))
	if err := env.Kube.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "Conflict", func() bool {
		_, reason, _ := tenantkit.Condition(getDatabase(ctx, t, name), "Ready")
		return reason == "Conflict"
	}, func() string { return fmt.Sprint(getDatabase(ctx, t, name).Object["status"]) })
	time.Sleep(3 * time.Second)
	sec, err := root.KVv2(env.OpenBao.KVMount).Get(ctx, tenantkit.RecordPath(name))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sec.Data) != fmt.Sprint(foreign) || sec.VersionMetadata.Version != 1 {
		t.Errorf("the foreign record changed: version %d", sec.VersionMetadata.Version)
	}
	if db, role := tenantkit.ServerHas(ctx, t, env, "foreign_db", "foreign_db"); db || role {
		t.Errorf("provisioned despite the foreign record: database %v, role %v", db, role)
	}
}

// conflict waits until the Tenant's Database reports Conflict, and the
// Tenant shows it too, then checks that the Tenant stays unready and gets
// no Secret.
func conflict(ctx context.Context, t *testing.T, ns, name string) {
	t.Helper()
	waitFor(ctx, t, "Conflict", func() bool {
		_, reason := dbCondition(ctx, ns, name)
		tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
		return reason == "Conflict" && err == nil && str(tn, "status", "reason") == "Conflict"
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	time.Sleep(3 * time.Second)
	if tn, _ := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name); tenantkit.Ready(tn) == "True" {
		t.Error("the Tenant in Conflict is Ready")
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenantkit.SecretName(name)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Tenant in Conflict got a Secret (%v)", err)
	}
}
