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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/controller/binding"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

const api = tenantkit.TenantAPI

// dynDB is the name of the Database provisioned for the Tenant ns/name
// (named from the Tenant's UID).
func dynDB(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return "tenant-" + string(tn.GetUID())
}

// record is the KV path of the own record of the Tenant ns/name's Database.
func record(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	return tenantkit.RecordPath(dynDB(ctx, t, ns, name))
}

// dbCondition is the Ready condition's status and reason of the Tenant
// ns/name's Database ("" when there is none yet).
func dbCondition(ctx context.Context, ns, name string) (string, string) {
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
	if err != nil {
		return "", ""
	}
	db, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", "tenant-"+string(tn.GetUID()))
	if err != nil {
		return "", ""
	}
	st, reason, _ := tenantkit.Condition(db, "Ready")
	return st, reason
}

// endState asserts what a Ready Tenant leaves behind: a Secret that logs in
// by host and hostaddr with verify-full, the database owned by the role, and
// exactly one version of the record (one password, ever).
// name is the Tenant's; db its database and login role.
func endState(ctx context.Context, t *testing.T, ns, name, db string) string {
	t.Helper()
	password := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name))
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	var owner string
	var super, createdb, createrole bool
	if err := c.QueryRow(ctx, `SELECT r.rolname, r.rolsuper, r.rolcreatedb, r.rolcreaterole FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1`, db).Scan(&owner, &super, &createdb, &createrole); err != nil {
		t.Fatalf("database %s: %v", db, err)
	}
	if owner != db || super || createdb || createrole {
		t.Errorf("database %s owned by %s (superuser %v, createdb %v, createrole %v)", db, owner, super, createdb, createrole)
	}
	var publicConnect bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = $1 AND a.grantee = 0 AND a.privilege_type = 'CONNECT')`, db).Scan(&publicConnect); err != nil {
		t.Fatal(err)
	}
	if publicConnect {
		t.Errorf("PUBLIC may connect to %s", db)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, record(ctx, t, ns, name)); v != 1 {
		t.Errorf("the record has %d versions, want 1: a second password was written", v)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v != 1 {
		t.Errorf("the delivery copy has %d versions, want 1", v)
	}
	return password
}

// Kill the provider (its Pod's process ends itself as by SIGKILL) before each of the
// Database's and the binding's write steps (i.e. after each external
// write) and restart it: it converges to the same end state, with the one
// password it wrote first.
//
// Until the database exists, a provider that starts after a kill resumes
// the creation where it stopped, through the same steps: there one Tenant
// takes the kills in turn, each restart arming the next step's, so the
// provider that starts after a kill before a step does that step and dies
// before the next (one restart a step instead of two). Once the database
// exists, a resumed creation repairs what is missing through other steps,
// so each later kill point gets a Tenant of its own, killed on its first
// creation.
func TestKillProviderAfterEachExternalWrite(t *testing.T) {
	testenv.Need(t)
	resumed := []string{database.StepOwnerMetadata, database.StepCredential, database.StepRole, database.StepDatabase, database.StepRecordOID}
	fresh := []string{database.StepConnect, database.StepExtensions, database.StepCreated, binding.StepCopyCredential, binding.StepCopyOwner}
	killed := func(ctx context.Context, t *testing.T, step, ns, name string) {
		t.Helper()
		wait, cancelWait := context.WithTimeout(ctx, 90*time.Second)
		err := prov.waitExit(wait)
		cancelWait()
		if err != nil {
			t.Fatalf("not killed before %s: %v\n%s", step, err, tenantkit.Describe(ctx, env, api, ns, name))
		}
	}
	ok := t.Run("resumed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		const ns, name = "kill", "kill"
		for i, step := range resumed {
			prov.restart(ctx, t, "PPT_FAULT_KILL_BEFORE_STEP="+step)
			if i == 0 {
				tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: shared, extensions: [pg_trgm]}")
			}
			killed(ctx, t, step, ns, name)
		}
		prov.restart(ctx, t)
		tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
		endState(ctx, t, ns, name, name)
	})
	if !ok {
		return
	}
	for i, step := range fresh {
		t.Run(step, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ns, name := fmt.Sprintf("kill-%d", i), fmt.Sprintf("kill%d", i)
			prov.restart(ctx, t, "PPT_FAULT_KILL_BEFORE_STEP="+step)
			tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: shared, extensions: [pg_trgm]}")
			killed(ctx, t, step, ns, name)
			prov.restart(ctx, t)
			tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
			endState(ctx, t, ns, name, name)
		})
	}
}

// PostgreSQL, OpenBao and ESO each go away while a Tenant is provisioning;
// it waits, says why, and is Ready once they are back.
func TestDependencyOutagesMidProvisioning(t *testing.T) {
	testenv.Need(t)
	cases := []struct {
		name        string
		stop, start func(context.Context) error
		// blocked is true while the outage shows where it should.
		blocked func(ctx context.Context, ns, name string) bool
	}{
		{
			name:  "postgres",
			stop:  func(context.Context) error { env.Postgres.Stop(); return nil },
			start: env.Postgres.Start,
			blocked: func(ctx context.Context, ns, name string) bool {
				st, reason := dbCondition(ctx, ns, name)
				if st == "" {
					// The config may already be known not Ready when the
					// binding first runs: then no Database is created, and
					// the binding shows the outage.
					b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, name)
					if err != nil {
						return false
					}
					st, reason, _ = tenantkit.Condition(b, "Ready")
				}
				return st == "False" && (reason == "InstanceNotReady" || reason == "DependencyUnavailable")
			},
		},
		{
			name:  "openbao",
			stop:  func(context.Context) error { return env.OpenBao.Pause() },
			start: func(context.Context) error { return env.OpenBao.Resume() },
			blocked: func(ctx context.Context, ns, name string) bool {
				st, reason := dbCondition(ctx, ns, name)
				return st == "False" && reason == "DependencyUnavailable"
			},
		},
		{
			name:  "eso",
			stop:  func(context.Context) error { env.ESO.Stop(); return nil },
			start: func(context.Context) error { return env.ESO.Start() },
			blocked: func(ctx context.Context, ns, name string) bool {
				st, _ := dbCondition(ctx, ns, name)
				tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
				return err == nil && st == "True" && tenantkit.Phase(tn) == "ExternalSecretCreated" && tenantkit.Ready(tn) == "False"
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			ns, name, db := "outage-"+tc.name, "outage-"+tc.name, "outage_"+tc.name
			if err := tc.stop(ctx); err != nil {
				t.Fatal(err)
			}
			started := false
			defer func() {
				if !started {
					_ = tc.start(context.Background())
				}
			}()
			tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: shared, database: "+db+", loginRole: "+db+"}")
			for !tc.blocked(ctx, ns, name) {
				if ctx.Err() != nil {
					t.Fatalf("the outage never showed:\n%s", tenantkit.Describe(context.Background(), env, api, ns, name))
				}
				time.Sleep(200 * time.Millisecond)
			}
			// Still not Ready a while later: nothing pretends.
			time.Sleep(3 * time.Second)
			if tn, _ := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name); tenantkit.Ready(tn) == "True" {
				t.Fatal("the Tenant is Ready during the outage")
			}
			if err := tc.start(ctx); err != nil {
				t.Fatal(err)
			}
			started = true
			tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
			endState(ctx, t, ns, name, db)
		})
	}
}

// Deleting a Tenant's namespace (the garbage collector and the namespace
// controller at work): on an instance whose default reclaim policy is
// Retain, the Database outlives the namespace, Released, with its database,
// role, record and data; the namespace loses its copy of the credential. On
// an instance with Delete, the Database and everything it owns go. The
// namespace goes either way.
func TestNamespaceDeletion(t *testing.T) {
	testenv.Need(t)
	for _, policy := range []string{"Retain", "Delete"} {
		t.Run(policy, func(t *testing.T) {
			// The namespace controller backs off while the binding waits
			// for the ExternalSecret; under load that took two minutes once.
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			ns, name, db := "nsdel-"+strings.ToLower(policy), "nsdel-"+strings.ToLower(policy), "nsdel_"+strings.ToLower(policy)
			instance := tenantkit.Instance
			if policy == "Delete" {
				instance = tenantkit.DeleteInstance
			}
			tenantkit.NewTenant(ctx, t, env, api, ns, name, fmt.Sprintf("{instanceRef: %s, database: %s, loginRole: %s}", instance, db, db))
			password := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.InstanceSecretName(instance, name))
			dbName := dynDB(ctx, t, ns, name)
			if err := env.Kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			for {
				err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
				if apierrors.IsNotFound(err) {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("namespace %s not deleted:\n%s", ns, tenantkit.Describe(context.Background(), env, api, ns, name))
				}
				time.Sleep(250 * time.Millisecond)
			}
			if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v != 0 {
				t.Errorf("the deleted namespace's copy of the credential survived (%d versions)", v)
			}
			if policy == "Delete" {
				waitFor(ctx, t, "the Database's deletion", func() bool {
					_, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", dbName)
					return apierrors.IsNotFound(err)
				}, func() string { return dbName })
				hasDB, role := tenantkit.ServerHas(ctx, t, env, db, db)
				if hasDB || role || tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(dbName)) != 0 {
					t.Errorf("Delete: database %v, role %v, record left", hasDB, role)
				}
				return
			}
			waitFor(ctx, t, "Released", func() bool {
				u, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", dbName)
				return err == nil && str(u, "status", "binding", "phase") == "Released"
			}, func() string { return dbName })
			if hasDB, role := tenantkit.ServerHas(ctx, t, env, db, db); !hasDB || !role {
				t.Errorf("Retain: database %v, role %v", hasDB, role)
			}
			if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(dbName)); v != 1 {
				t.Errorf("Retain: the Database's record has %d versions, want 1", v)
			}
			cfg, err := env.Postgres.ConnConfig(db, password, db)
			if err != nil {
				t.Fatal(err)
			}
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatalf("Retain: the retained credential no longer logs in: %v", err)
			}
			_ = c.Close(ctx)
		})
	}
}

// Two namespaces ask for the same database name at once: the first wins,
// the second is Conflict, gets no Secret, and changes nothing of the first.
func TestTwoNamespacesRaceForOneDatabase(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const name = "contested"
	nss := []string{"race-a", "race-b"}
	for _, ns := range nss {
		if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, len(nss))
	for _, ns := range nss {
		go func() {
			errs <- env.Kube.Client.Create(ctx, tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Tenant\nmetadata: {name: %s, namespace: %s}\nspec: {instanceRef: shared}\n", api, name, ns)))
		}()
	}
	for range nss {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var winner, loser string
	for winner == "" || loser == "" {
		winner, loser = "", ""
		for _, ns := range nss {
			tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
			_, reason := dbCondition(ctx, ns, name)
			switch {
			case err == nil && tenantkit.Ready(tn) == "True":
				winner = ns
			case reason == "Conflict":
				loser = ns
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no winner and loser:\n%s\n%s", tenantkit.Describe(context.Background(), env, api, nss[0], name), tenantkit.Describe(context.Background(), env, api, nss[1], name))
		}
		time.Sleep(200 * time.Millisecond)
	}
	password := endState(ctx, t, winner, name, name)
	time.Sleep(5 * time.Second) // the loser keeps trying; nothing changes
	if tn, _ := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", loser, name); tenantkit.Ready(tn) == "True" {
		t.Errorf("the loser %s became Ready", loser)
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: loser, Name: tenantkit.SecretName(name)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the loser %s got a Secret (%v)", loser, err)
	}
	// Both raced past "is the role there?" and each Database wrote its own
	// record; the loser's opens nothing: the role is the winner's, with the
	// winner's password.
	if v := tenantkit.RecordVersions(ctx, t, env, record(ctx, t, loser, name)); v > 1 {
		t.Errorf("the loser %s wrote %d versions of its record", loser, v)
	}
	cfg, err := env.Postgres.ConnConfig(name, loserPassword(ctx, t, loser, name), name)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		_ = c.Close(ctx)
		t.Errorf("the loser's record logs in as the winner's role")
	}
	if got := endState(ctx, t, winner, name, name); got != password {
		t.Error("the winner's password changed")
	}
}

// Status wiped on every object (Tenant, binding, Database, ExternalSecret): rebuilt
// from Kubernetes records and the catalog, Ready again, same password.
func TestStatusWipedOnEveryObject(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "wiped", "wiped"
	tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: shared}")
	before := endState(ctx, t, ns, name, name)
	dbName := dynDB(ctx, t, ns, name)
	for _, o := range [][4]string{{api, "Tenant", ns, name}, {api, "DatabaseBinding", ns, name}, {api, "Database", "", dbName}, {"external-secrets.io/v1", "ExternalSecret", ns, tenantkit.SecretName(name)}} {
		// The object's controller may write its status meanwhile: read
		// again and wipe again on a conflict.
		err := testenv.EditStatusE(ctx, env.Kube.Client, tenantkit.Ref(o[0], o[1], o[2], o[3]), func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{}
		})
		if err != nil {
			t.Fatalf("wipe %s: %v", o[1], err)
		}
	}
	// Give the controllers a moment to see the wipe, then wait for Ready.
	time.Sleep(time.Second)
	tn := tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
	if got := endState(ctx, t, ns, name, name); got != before {
		t.Error("the password changed after the status was wiped")
	}
	db, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", dbName)
	if err != nil {
		t.Fatal(err)
	}
	if p := str(db, "status", "binding", "phase"); p != "Bound" {
		t.Errorf("Database binding phase %q after the wipe", p)
	}
	if p, _, _ := unstructured.NestedString(db.Object, "status", "atProvider", "phase"); p != "Ready" {
		t.Errorf("Database phase %q after the wipe", p)
	}
	// The binding's status, which the URL comes from, may be rebuilt a
	// poll after the Tenant is Ready again.
	for {
		if u, _, _ := unstructured.NestedString(tn.Object, "status", "credential", "openBaoURL"); u != "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the Tenant's OpenBao URL was not rebuilt")
		}
		time.Sleep(100 * time.Millisecond)
		if cur, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name); err == nil {
			tn = cur
		}
	}
}

// loserPassword reads the password of the loser's own record ("" if none).
func loserPassword(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := root.KVv2(env.OpenBao.KVMount).Get(ctx, record(ctx, t, ns, name))
	if err != nil {
		return ""
	}
	p, _ := sec.Data["password"].(string)
	return p
}
