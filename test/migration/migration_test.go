// Package migration drills docs/migration.md: an existing database with data
// and an extension on an old PostgreSQL server (the oldest supported major)
// moves into a provider-managed database on the shared server (the suite's
// major), with pg_dump and pg_restore run as the runbook says; row counts,
// extensions and indexes match; and rollback (the old service) still works.
package migration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/inproc"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Kube: true, Postgres: true, OpenBao: true, ESO: true}, &env, func(e *testenv.Env) (func(), error) {
		_, stop, err := inproc.Start(e, inproc.Options{Poll: time.Second, ConfigInterval: 5 * time.Second, ConfigRetry: time.Second, Logs: &testenv.LogBuffer{}})
		if err != nil {
			return nil, err
		}
		if err := tenantkit.Platform(context.Background(), e); err != nil {
			stop()
			return nil, err
		}
		return stop, nil
	})
}

// snapshot is what must survive the move: exact row counts per table, the
// extensions, the indexes.
type snapshot struct {
	Rows       map[string]int64
	Extensions []string
	Indexes    []string
}

func take(ctx context.Context, t *testing.T, c *pgx.Conn) snapshot {
	t.Helper()
	s := snapshot{Rows: map[string]int64{}}
	rows, err := c.Query(ctx, "SELECT schemaname, relname FROM pg_stat_user_tables ORDER BY 1, 2")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgx.Identifier, error) {
		var schema, rel string
		return pgx.Identifier{schema, rel}, r.Scan(&schema, &rel)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		var n int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM "+tb.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		s.Rows[tb[0]+"."+tb[1]] = n
	}
	for q, into := range map[string]*[]string{
		"SELECT extname FROM pg_extension WHERE extname <> 'plpgsql' ORDER BY 1":  &s.Extensions,
		"SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1": &s.Indexes,
	} {
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if *into, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// tool runs a PostgreSQL client program with the password in PGPASSWORD.
func tool(ctx context.Context, t *testing.T, password, name string, args ...string) {
	t.Helper()
	dir, err := testenv.PostgresClientBinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, name), args...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=10")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func dsn(host, hostaddr string, port int, db, user string) string {
	return fmt.Sprintf("host=%s hostaddr=%s port=%d dbname=%s user=%s sslmode=verify-full sslrootcert=%s", host, hostaddr, port, db, user, env.CA.CertFile)
}

func TestMigrationRunbookDrill(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// The old service: its own server, an app role owning a database with
	// data, a trigram index and the extension it needs. The server runs the
	// oldest supported major, so the drill is an upgrade too (on every
	// major the shared server runs) and pg_dump is never older than the
	// server it dumps.
	majors, err := testenv.PostgresMajors()
	if err != nil {
		t.Fatal(err)
	}
	old, err := env.StartPostgresMajor(ctx, "old-server", majors[0])
	if err != nil {
		t.Fatal(err)
	}
	defer old.Stop()
	oldPassword := testenv.RandomSecret("old-")
	if err := old.CreateRole(ctx, "legacy_app", oldPassword, ""); err != nil {
		t.Fatal(err)
	}
	su, err := old.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	// The old server's database is as a PostgreSQL 14 default made it
	// (PUBLIC may create in its public schema): copied from template0,
	// since the harness hardens template1 as the provider requires.
	if _, err := su.Exec(ctx, "CREATE DATABASE legacy OWNER legacy_app TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	_ = su.Close(ctx)
	cfg, err := old.ConnConfig("legacy_app", oldPassword, "legacy")
	if err != nil {
		t.Fatal(err)
	}
	app, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // test connection
	for _, q := range []string{
		"CREATE EXTENSION pg_trgm",
		"CREATE TABLE pages (id bigserial PRIMARY KEY, title text NOT NULL, body text)",
		"CREATE TABLE revisions (id bigserial PRIMARY KEY, page_id bigint REFERENCES pages(id), at timestamptz DEFAULT now())",
		"INSERT INTO pages (title, body) SELECT 'page ' || g, repeat('x', g % 50) FROM generate_series(1, 1500) g",
		"INSERT INTO revisions (page_id) SELECT 1 + g % 1500 FROM generate_series(1, 4000) g",
		"CREATE INDEX pages_title_trgm ON pages USING gin (title gin_trgm_ops)",
		"ANALYZE",
	} {
		if _, err := app.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := take(ctx, t, app)
	if before.Rows["public.pages"] != 1500 || !slices.Contains(before.Extensions, "pg_trgm") {
		t.Fatalf("the old database is not what the drill needs: %+v", before)
	}

	// Step 2: the new database with the same extensions (a Database here;
	// a Tenant's binding provisions exactly this one).
	d := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: tenantkit.Instance}},
			ForProvider:                v1alpha1.DatabaseParameters{Database: "legacy", Extensions: before.Extensions},
		},
	}
	if err := env.Kube.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	for {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
		if d.GetCondition(xpv2.TypeReady).Status == "True" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the new Database is not Ready: %+v", d.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The credential, as the Tenant's Secret would carry it.
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := root.KVv2(env.OpenBao.KVMount).Get(ctx, d.Status.AtProvider.Credential.Path)
	if err != nil {
		t.Fatal(err)
	}
	r := func(k string) string { v, _ := rec.Data[k].(string); return v }
	var newPort int
	if _, err := fmt.Sscan(r("port"), &newPort); err != nil {
		t.Fatal(err)
	}

	// Step 4: dump as the old owner, restore as the tenant.
	dump := filepath.Join(t.TempDir(), "legacy.dump")
	tool(ctx, t, oldPassword, "pg_dump", "--format=custom", "--no-owner", "--no-privileges", "--file="+dump,
		dsn(old.Host, old.Hostaddr, old.Port, "legacy", "legacy_app"))
	tool(ctx, t, r("password"), "pg_restore", "--no-owner", "--no-privileges", "--exit-on-error",
		"--dbname="+dsn(r("host"), r("hostaddr"), newPort, r("database"), r("username")), dump)

	// Step 5: verify, connected as the tenant.
	ncfg, err := env.Postgres.ConnConfig(r("username"), r("password"), r("database"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := pgx.ConnectConfig(ctx, ncfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close(ctx) //nolint:errcheck // test connection
	if _, err := nc.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, take(ctx, t, nc)); diff != "" {
		t.Errorf("after the restore: -old +new:\n%s", diff)
	}
	var owner string
	if err := nc.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE tablename = 'pages'").Scan(&owner); err != nil || owner != r("username") {
		t.Errorf("pages owned by %q (%v), want the tenant role", owner, err)
	}

	// Rollback: the old service is untouched and still takes writes.
	if diff := cmp.Diff(before, take(ctx, t, app)); diff != "" {
		t.Errorf("the old database changed: -before +after:\n%s", diff)
	}
	if _, err := app.Exec(ctx, "INSERT INTO pages (title) VALUES ('after rollback')"); err != nil {
		t.Errorf("the old service does not take writes after the drill: %v", err)
	}
}
