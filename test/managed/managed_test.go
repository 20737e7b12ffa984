// Package managed runs the Database lifecycle on a PostgreSQL server set up
// like a managed service's: an admin that is no superuser but has CREATEDB
// and CREATEROLE and belongs to an rds_superuser-like group, an extension
// allow-list, and a server certificate with a DNS name only.
package managed

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/inproc"
)

var (
	env     *testenv.Env
	managed *testenv.Managed
	logs    = &testenv.LogBuffer{}
)

const poll = 2 * time.Second

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.All, &env, func(e *testenv.Env) (func(), error) {
		ctx := context.Background()
		var err error
		if managed, err = e.Postgres.MakeManagedLike(ctx, []string{"pg_trgm"}); err != nil {
			return nil, err
		}
		_, stop, err := inproc.Start(e, inproc.Options{Poll: poll, ConfigInterval: 5 * time.Second, ConfigRetry: time.Second, Logs: logs})
		if err != nil {
			return nil, err
		}
		if err := e.Kube.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ProviderNamespace, Name: "managed-admin"},
			StringData: map[string]string{"username": managed.AdminUser, "password": managed.AdminPassword},
		}); err != nil {
			stop()
			return nil, err
		}
		return stop, nil
	})
}

func config(name, hostaddr string) *v1alpha1.ClusterProviderConfig {
	pg := env.Postgres
	return &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: pg.Host, Hostaddr: hostaddr, Port: int32(pg.Port)}, //nolint:gosec // test port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "managed-admin"}},
		},
	}
}

// database is a Database of that name on config, with the Delete reclaim
// policy and every management action.
func database(name, config string, exts ...string) *v1alpha1.Database {
	return &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
				ProviderConfigReference: &xpv2.Reference{Name: config},
				ManagementPolicies:      xpv2.ManagementPolicies{xpv2.ManagementActionAll},
			},
			ReclaimPolicy: v1alpha1.ReclaimDelete,
			ForProvider:   v1alpha1.DatabaseParameters{Database: name, Extensions: exts},
		},
	}
}

func await[T client.Object](t *testing.T, obj T, what string, cond func(T) bool) {
	t.Helper()
	testenv.Await(t, env.Kube.Client, obj, 90*time.Second, what, cond, func(o T) string {
		b, _ := json.MarshalIndent(o, "", " ")
		return string(b)
	})
}

func readyReason(c xpv2.Condition) string {
	if c.Status == corev1.ConditionTrue {
		return "Ready"
	}
	return string(c.Reason)
}

func superConn(t *testing.T, db string) *pgx.Conn { return env.Postgres.SuperConnT(t, db) }

func exists(t *testing.T, kind, name string) bool {
	t.Helper()
	q := map[string]string{"database": "SELECT count(*) FROM pg_database WHERE datname = $1", "role": "SELECT count(*) FROM pg_roles WHERE rolname = $1"}[kind]
	var n int
	if err := superConn(t, "postgres").QueryRow(context.Background(), q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestDatabaseLifecycleOnAManagedLikeServer(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := env.Kube.Client

	// The admin really is what a managed service hands out.
	var super, createDB, createRole, member bool
	err := superConn(t, "postgres").QueryRow(ctx, `SELECT rolsuper, rolcreatedb, rolcreaterole, pg_has_role(rolname, $2, 'MEMBER')
		FROM pg_roles WHERE rolname = $1`, managed.AdminUser, managed.ManagedGroup).Scan(&super, &createDB, &createRole, &member)
	if err != nil || super || !createDB || !createRole || !member {
		t.Fatalf("the managed admin: super %v createdb %v createrole %v in %s %v (%v)", super, createDB, createRole, managed.ManagedGroup, member, err)
	}

	// With a hostaddr, verify-full needs the address in the certificate,
	// which a managed service's certificate never has.
	withAddr := config("with-hostaddr", env.Postgres.Hostaddr)
	if err := c.Create(ctx, withAddr); err != nil {
		t.Fatal(err)
	}
	await(t, withAddr, "AuthenticationFailed", func(o *v1alpha1.ClusterProviderConfig) bool {
		r := o.GetCondition(xpv2.TypeReady)
		return r.Reason == "AuthenticationFailed" && strings.Contains(r.Message, "does not name hostaddr")
	})

	// Without one, verify-full verifies the name.
	cfg := config("managed", "")
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	await(t, cfg, "Ready", func(o *v1alpha1.ClusterProviderConfig) bool {
		return readyReason(o.GetCondition(xpv2.TypeReady)) == "Ready"
	})
	if m := cfg.GetCondition(xpv2.TypeReady).Message; strings.Contains(m, "is a superuser") || !strings.Contains(m, "localhost:") {
		t.Errorf("config message %q", m)
	}

	newDB := func(name string, exts ...string) *v1alpha1.Database { return database(name, "managed", exts...) }
	record := func(name string) string { return options.DefaultDatabaseBasePath + "/" + name }

	// An extension outside the allow-list: refused before any write.
	denied := newDB("denied", "citext")
	if err := c.Create(ctx, denied); err != nil {
		t.Fatal(err)
	}
	await(t, denied, "InvalidSpec", func(d *v1alpha1.Database) bool {
		r := d.GetCondition(xpv2.TypeReady)
		return r.Reason == "InvalidSpec" && strings.Contains(r.Message, "[citext] are not in the server's extension allow-list")
	})
	time.Sleep(2 * poll)
	if exists(t, "role", "denied") || exists(t, "database", "denied") {
		t.Error("a role or database was created for an extension outside the allow-list")
	}
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	kv := root.KVv2(env.OpenBao.KVMount)
	if _, err := kv.GetMetadata(ctx, record("denied")); err == nil {
		t.Error("a credential record was written for an extension outside the allow-list")
	}

	// The lifecycle.
	d := newDB("shop", "pg_trgm")
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	await(t, d, "Ready", func(d *v1alpha1.Database) bool { return readyReason(d.GetCondition(xpv2.TypeReady)) == "Ready" })
	sec, err := kv.Get(ctx, record("shop"))
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := sec.Data["hostaddr"]; !ok || h != "" {
		t.Errorf("the credential's hostaddr = %v (present %v), want present and empty", h, ok)
	}
	// The app connects with what the credential says, by name, verify-full.
	app, err := env.Postgres.ConnConfig(sec.Data["username"].(string), sec.Data["password"].(string), sec.Data["database"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if app.Host != sec.Data["host"] {
		t.Fatalf("the app would dial %q, the credential says %q", app.Host, sec.Data["host"])
	}
	ac, err := pgx.ConnectConfig(ctx, app)
	if err != nil {
		t.Fatalf("the app cannot log in with its credential: %v", err)
	}
	var trgm bool
	if err := ac.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')").Scan(&trgm); err != nil || !trgm {
		t.Errorf("pg_trgm installed: %v (%v)", trgm, err)
	}
	_ = ac.Close(ctx)

	if err := c.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); kerrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Database was not deleted: %+v", d.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if exists(t, "role", "shop") || exists(t, "database", "shop") {
		t.Error("Delete left the role or the database")
	}
	if _, err := kv.GetMetadata(ctx, record("shop")); err == nil {
		t.Error("Delete left the credential record")
	}
	for _, s := range []string{managed.AdminPassword, sec.Data["password"].(string)} {
		if strings.Contains(logs.String(), s) {
			t.Error("a password appears in the provider's log")
		}
	}
}
