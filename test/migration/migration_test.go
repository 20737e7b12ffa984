// Package migration drills docs/migration.md as an app team runs it: an app
// whose database (with data and an extension) lives on an old PostgreSQL
// server (the oldest supported major) and whose connection settings come
// from a Secret moves into a Tenant on the shared server (the suite's
// major). The Tenant is composed by Crossplane core and the project's
// function, its Secret projected by the real ESO from the real OpenBao; the
// runbook's sh blocks run as written (psql, pg_dump, pg_restore, kubectl);
// row counts and contents, extensions and indexes match; the app switches
// to the Tenant's Secret, and rolls back by switching to its old one.
package migration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/inproc"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Kube: true, Postgres: true, OpenBao: true, ESO: true, Crossplane: true}, &env, func(e *testenv.Env) (func(), error) {
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

// oldSecret is the Secret the app read its old database's settings from
// before the migration: the seven keys of a Tenant's Secret.
const oldSecret = "legacy-db"

// snapshot is what must survive the move: exact row counts and an md5 of
// the rows per table, the extensions, the indexes.
type snapshot struct {
	Rows       map[string]int64
	Sums       map[string]string
	Extensions []string
	Indexes    []string
}

// take reads a snapshot, leaving out the rows of skip (table -> ids).
func take(ctx context.Context, t *testing.T, c *pgx.Conn, skip map[string][]int64) snapshot {
	t.Helper()
	s := snapshot{Rows: map[string]int64{}, Sums: map[string]string{}}
	// Row text (timestamptz) in one time zone on both servers.
	if _, err := c.Exec(ctx, "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
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
		name := tb[0] + "." + tb[1]
		var n int64
		var sum string
		// A nil slice would be NULL, and id <> ALL(NULL) no row.
		if err := c.QueryRow(ctx, "SELECT count(*), md5(coalesce(string_agg(r::text, E'\\n' ORDER BY r.id), '')) FROM "+tb.Sanitize()+" r WHERE r.id <> ALL($1)",
			append([]int64{}, skip[name]...)).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		s.Rows[name], s.Sums[name] = n, sum
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

// secretData reads a Secret of the app namespace through the Kubernetes
// API, as kubectl shows it to the team.
func secretData(ctx context.Context, t *testing.T, ns, name string) map[string]string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("Secret %s/%s: %v", ns, name, err)
	}
	d := map[string]string{}
	for k, v := range s.Data {
		d[k] = string(v)
	}
	return d
}

// appWrite is the app: it takes its connection settings from the Secret
// it is pointed at, key by key into libpq's variables as app-teams.md's
// Deployment does, with the platform's CA, and writes one page. It returns
// the page's id and title.
func appWrite(ctx context.Context, t *testing.T, ns, secret string) (int64, string) {
	t.Helper()
	d := secretData(ctx, t, ns, secret)
	bin, err := testenv.PostgresClientBinDir()
	if err != nil {
		t.Fatal(err)
	}
	title := testenv.RandomSecret("written by the app via " + secret + " ")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-Atc",
		"INSERT INTO pages (title) VALUES ('"+title+"') RETURNING id")
	cmd.Env = []string{
		"PGHOST=" + d["host"], "PGHOSTADDR=" + d["hostaddr"], "PGPORT=" + d["port"], "PGDATABASE=" + d["database"],
		"PGUSER=" + d["username"], "PGPASSWORD=" + d["password"], "PGSSLMODE=" + d["sslmode"],
		"PGSSLROOTCERT=" + env.CA.CertFile, "PGCONNECT_TIMEOUT=10",
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the app, on Secret %s: %v\n%s", secret, err, out)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("the app's write returned %q", out)
	}
	return id, title
}

// has reports whether the database on c has the page the app wrote.
func has(ctx context.Context, t *testing.T, c *pgx.Conn, id int64, title string) bool {
	t.Helper()
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pages WHERE id = $1 AND title = $2", id, title).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// runBlock runs the sh block name of docs/migration.md as written, in bash
// in dir, and returns its standard output.
func runBlock(ctx context.Context, t *testing.T, dir, name string, vars ...string) string {
	t.Helper()
	body, err := testenv.DocBlock("migration.md", "sh", name)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.PostgresClientBinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+body)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + bin + ":" + env.BinDir + ":" + os.Getenv("PATH"),
		"HOME=" + dir,
		"KUBECONFIG=" + env.Kube.KubeconfigFile,
		"PGCONNECT_TIMEOUT=10",
	}, vars...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docs/migration.md block %s: %v\n%s%s", name, err, out, stderr.String())
	}
	return string(out)
}

func TestMigrationRunbookDrill(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	work := t.TempDir()

	// The Tenant of step 2, as the runbook writes it: it names the app
	// namespace, the instance and the extensions.
	y, err := testenv.DocBlock("migration.md", "yaml", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	tn := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &tn.Object); err != nil {
		t.Fatalf("docs/migration.md, the Tenant: %v", err)
	}
	ns, name := tn.GetNamespace(), tn.GetName()
	if tn.GetAPIVersion() != tenantkit.TenantAPI || tn.GetKind() != "Tenant" || ns == "" {
		t.Fatalf("docs/migration.md's step 2 is not a namespaced Tenant: %s %s %s/%s", tn.GetAPIVersion(), tn.GetKind(), ns, name)
	}
	if ref, _, _ := unstructured.NestedString(tn.Object, "spec", "instanceRef"); ref != tenantkit.Instance {
		t.Fatalf("docs/migration.md's Tenant is on %q; the drill's instance (Retain) is %q", ref, tenantkit.Instance)
	}
	docExtensions, _, _ := unstructured.NestedStringSlice(tn.Object, "spec", "extensions")

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
	oc, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close(ctx) //nolint:errcheck // test connection
	for _, q := range []string{
		"CREATE EXTENSION pg_trgm",
		"CREATE TABLE pages (id bigserial PRIMARY KEY, title text NOT NULL, body text)",
		"CREATE TABLE revisions (id bigserial PRIMARY KEY, page_id bigint REFERENCES pages(id), at timestamptz DEFAULT now())",
		"INSERT INTO pages (title, body) SELECT 'page ' || g, repeat('x', g % 50) FROM generate_series(1, 1500) g",
		"INSERT INTO revisions (page_id) SELECT 1 + g % 1500 FROM generate_series(1, 4000) g",
		"CREATE INDEX pages_title_trgm ON pages USING gin (title gin_trgm_ops)",
		"ANALYZE",
	} {
		if _, err := oc.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The app namespace (with the reader service account install.md asks
	// for) and the app's Secret for its old database.
	if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: oldSecret},
		StringData: map[string]string{
			"host": old.Host, "hostaddr": old.Hostaddr, "port": strconv.Itoa(old.Port), "database": "legacy",
			"username": "legacy_app", "password": oldPassword, "sslmode": "verify-full",
		},
	}); err != nil {
		t.Fatal(err)
	}
	// The app at work before the migration.
	if id, title := appWrite(ctx, t, ns, oldSecret); !has(ctx, t, oc, id, title) {
		t.Fatal("the app's write before the migration is not in the old database")
	}
	before := take(ctx, t, oc, nil)
	if before.Rows["public.pages"] != 1501 || !slices.Contains(before.Extensions, "pg_trgm") {
		t.Fatalf("the old database is not what the drill needs: %+v", before)
	}
	// What the runbook's commands take: the old database as its owner
	// (the password in PGPASSWORD), the platform's CA.
	oldDSN := fmt.Sprintf("OLD=host=%s hostaddr=%s port=%d dbname=legacy user=legacy_app sslmode=verify-full sslrootcert=%s",
		old.Host, old.Hostaddr, old.Port, env.CA.CertFile)
	vars := []string{oldDSN, "PGPASSWORD=" + oldPassword, "CA=" + env.CA.CertFile}

	// Step 1: the inventory lists the extensions and every table.
	var invExtensions, invTables []string
	for _, l := range strings.Split(strings.TrimSpace(runBlock(ctx, t, work, "inventory", vars...)), "\n") {
		if table, _, ok := strings.Cut(l, "|"); ok {
			invTables = append(invTables, table)
		} else {
			invExtensions = append(invExtensions, l)
		}
	}
	if diff := cmp.Diff(before.Extensions, invExtensions); diff != "" {
		t.Errorf("step 1's extensions: -old database +inventory:\n%s", diff)
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(before.Rows)), invTables); diff != "" {
		t.Errorf("step 1's tables: -old database +inventory:\n%s", diff)
	}

	// Step 2: the Tenant, with the inventory's extensions, Ready; its
	// Secret (projected by ESO) has the seven keys and logs in.
	if diff := cmp.Diff(invExtensions, docExtensions); diff != "" {
		t.Fatalf("docs/migration.md's Tenant asks other extensions than the inventory's: -inventory +Tenant:\n%s", diff)
	}
	if err := env.Kube.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
	ready := tenantkit.WaitTenantReady(ctx, t, env, tn.GetAPIVersion(), ns, name)
	newSecret, _, _ := unstructured.NestedString(ready.Object, "status", "credential", "secretRef", "name")
	if newSecret != tenantkit.SecretName(name) {
		t.Fatalf("the Tenant's Secret is %q, want %q (the runbook's)", newSecret, tenantkit.SecretName(name))
	}
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, newSecret)
	database := tenantkit.DatabaseName(ctx, env, ns, name)

	// Step 3: the app is stopped (it writes only when the drill calls it).
	// Step 4: dump as the old owner, restore as the tenant with the
	// connection read from the Tenant's Secret, as the runbook writes it.
	runBlock(ctx, t, work, "dump-restore", vars...)

	// Step 5: verify, connected as the tenant with the Secret's credential.
	nd := secretData(ctx, t, ns, newSecret)
	ncfg, err := env.Postgres.ConnConfig(nd["username"], nd["password"], nd["database"])
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
	if diff := cmp.Diff(before, take(ctx, t, nc, nil)); diff != "" {
		t.Errorf("after the restore: -old +new:\n%s", diff)
	}
	var notOwned []string
	rows, err := nc.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner <> $1 ORDER BY 1", nd["username"])
	if err != nil {
		t.Fatal(err)
	}
	if notOwned, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(notOwned) > 0 {
		t.Errorf("tables not owned by the tenant role %s: %v (%v)", nd["username"], notOwned, err)
	}
	// The old database was only read.
	if diff := cmp.Diff(before, take(ctx, t, oc, nil)); diff != "" {
		t.Errorf("the old database changed: -before +after:\n%s", diff)
	}

	// Step 6: the app on the Tenant's Secret writes to the new database.
	newID, newTitle := appWrite(ctx, t, ns, newSecret)
	if !has(ctx, t, nc, newID, newTitle) || has(ctx, t, oc, newID, newTitle) {
		t.Errorf("after the switch the app's write is in the new database %v, in the old one %v; want only the new",
			has(ctx, t, nc, newID, newTitle), has(ctx, t, oc, newID, newTitle))
	}
	_ = nc.Close(ctx)

	// Rollback: the app on its old Secret again writes to the old
	// database, which has every row it had before and the app's write,
	// nothing else.
	backID, backTitle := appWrite(ctx, t, ns, oldSecret)
	if !has(ctx, t, oc, backID, backTitle) {
		t.Error("after the rollback the app's write is not in the old database")
	}
	// Then the Tenant goes: with Retain its Database stays Released, with
	// the database (the restored copy and the app's write), the role and
	// the record; its Secret goes, the app's old Secret stays.
	tenantkit.DeleteTenant(ctx, t, env, tn.GetAPIVersion(), ns, name)
	for {
		err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: newSecret}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the Tenant's Secret outlives the Tenant: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d, err := tenantkit.Get(ctx, env.Kube.Client, tenantkit.TenantAPI, "Database", "", database)
	if err != nil {
		t.Fatalf("Retain: the Database %s is gone: %v", database, err)
	}
	if p, _, _ := unstructured.NestedString(d.Object, "status", "binding", "phase"); p != "Released" {
		t.Errorf("Retain: the Database is %q, want Released", p)
	}
	if db, role := tenantkit.ServerHas(ctx, t, env, nd["database"], nd["username"]); !db || !role {
		t.Errorf("Retain: database kept %v, role kept %v", db, role)
	}
	if tenantkit.RecordVersions(ctx, t, env, tenantkit.RecordPath(database)) == 0 {
		t.Error("Retain: the credential record is gone")
	}
	kept, err := env.Postgres.SuperConn(ctx, nd["database"])
	if err != nil {
		t.Fatal(err)
	}
	if !has(ctx, t, kept, newID, newTitle) {
		t.Error("Retain: the kept database lost the app's write")
	}
	_ = kept.Close(ctx)
	if diff := cmp.Diff(before, take(ctx, t, oc, map[string][]int64{"public.pages": {backID}})); diff != "" {
		t.Errorf("the old database, but for the app's write after the rollback: -before +after:\n%s", diff)
	}
	if id, title := appWrite(ctx, t, ns, oldSecret); !has(ctx, t, oc, id, title) {
		t.Error("the app's old Secret does not work after the Tenant went")
	}
}
