package delivery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// adoptingDoc is the doc TestAdoptingDocRunsAsWritten runs.
const adoptingDoc = "adopting.md"

// readyMessagePrompt is the command docs/adopting.md shows the Database's
// Ready message with; the line under each such prompt is what it says the
// command prints.
const readyMessagePrompt = `$ kubectl get databases.database.ayatori.ddupan.top legacy-erp -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'`

// TestAdoptingDocRunsAsWritten runs the common path of docs/adopting.md as
// an admin reads it, its named blocks taken from the doc and run with the
// pinned kubectl and bao, the doc's names replaced by the test's: a
// database and its owner role a superuser made, with a row written before
// the adoption and a connection Secret shaped like provider-sql's. The
// record is written through the doc's pipe; on PostgreSQL 16 and later
// the doc's GRANT runs as the superuser; the read-only import changes
// nothing in the catalog or the record; with Update it turns Ready; a
// Tenant bound to it through the doc's reservation gets a Secret that
// logs in and reads the row; the doc's rotation refuses the old password
// and the Secret follows; handing it back drops nothing. A step taken out
// of the doc fails here: its block is looked up before anything is made,
// and a block that no longer does what the next step needs fails that
// step's wait with the Database's status.
func TestAdoptingDocRunsAsWritten(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// The test's names for the doc's: one word that is a valid PostgreSQL
	// name and Kubernetes name alike, for the database, the role, the app
	// namespace and the Tenant (the doc's "erp" in every place), and the
	// admin role the tests run with.
	id := strings.ReplaceAll(testenv.UniqueName("adopt"), "-", "")
	rename := func(s string) string {
		s = regexp.MustCompile(`\berp\b`).ReplaceAllString(s, id)
		return regexp.MustCompile(`\btenant_provisioner\b`).ReplaceAllString(s, env.Postgres.AdminUser)
	}
	block := func(lang, name string) string {
		t.Helper()
		body, err := testenv.DocBlock(adoptingDoc, lang, name)
		if err != nil {
			t.Fatalf("%v: the step it documents is missing", err)
		}
		return rename(body)
	}
	recordCmd := block("sh", "adopt-record")
	grant := block("sql", "adopt-admin-option")
	importYAML := block("yaml", "adopt-import")
	updateCmd := block("sh", "adopt-update")
	reserveCmd := block("sh", "adopt-reserve")
	tenantYAML := block("yaml", "adopt-tenant")
	rotateCmd := block("sh", "adopt-rotate")
	handBackCmd := block("sh", "adopt-hand-back")
	messages := docSamples(t, readyMessagePrompt)
	if len(messages) != 2 {
		t.Fatalf("docs/adopting.md shows the Ready message %d times, want twice (after the read-only import, after Update)", len(messages))
	}
	for i := range messages {
		messages[i] = rename(messages[i])
	}
	rotationID := regexp.MustCompile(`"credentialRotation":\{"id":"([^"]+)"`).FindStringSubmatch(rotateCmd)
	if rotationID == nil {
		t.Fatalf("the rotation step of docs/adopting.md sets no credentialRotation.id: %s", rotateCmd)
	}
	dbObj := tenantkit.MustUnstructured(importYAML)
	tenantObj := tenantkit.MustUnstructured(tenantYAML)
	ns, tenant := tenantObj.GetNamespace(), tenantObj.GetName()
	if ns != id || tenant != id {
		t.Fatalf("the Tenant of docs/adopting.md is %s/%s, not the erp/erp of its examples", ns, tenant)
	}
	dbRef := tenantkit.Ref(tenantAPI, "Database", "", dbObj.GetName())
	tenantRef := tenantkit.Ref(tenantAPI, "Tenant", ns, tenant)
	recordPath := "postgresql-databases/imports/" + id
	peerSecret := id + "-db"
	var major int
	if _, err := fmt.Sscan(env.Postgres.Version, &major); err != nil {
		t.Fatalf("PostgreSQL version %q: %v", env.Postgres.Version, err)
	}
	t.Logf("PostgreSQL %d: the GRANT of step 3 runs: %v", major, major >= 16)

	// 1. No peer runs to pause: what another tool left is a role and a
	// database a superuser made, a row the app wrote, and a Secret shaped
	// like provider-sql's. The password is sent to the server as a
	// verifier and never logged.
	super := env.Postgres.SuperConnT(t, "postgres")
	password := testenv.RandomSecret("adopt-")
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	kv := root.KVv2(env.OpenBao.KVMount)
	t.Cleanup(func() {
		c := context.Background()
		for _, s := range []string{"DROP DATABASE IF EXISTS " + id + " WITH (FORCE)", "DROP ROLE IF EXISTS " + id} {
			if _, err := super.Exec(c, s); err != nil {
				t.Errorf("cleanup: %s: %v", s, err)
			}
		}
		if err := kv.DeleteMetadata(c, recordPath); err != nil {
			t.Errorf("cleanup: deleting the record: %v", err)
		}
	})
	if err := env.Postgres.CreateRole(ctx, id, password, ""); err != nil {
		t.Fatal(err)
	}
	testenv.RunSQL(t, super, "the superuser", "CREATE DATABASE "+id+" OWNER "+id)
	owner := connectAs(ctx, t, id, password)
	// In a schema of the owner's own: on PostgreSQL 14 the public schema
	// is the bootstrap superuser's, and PUBLIC's CREATE on it is revoked
	// in template1.
	testenv.RunSQL(t, owner, "the role", "CREATE SCHEMA app", "CREATE TABLE app.kept (v text)", "INSERT INTO app.kept VALUES ('before the adoption')")
	_ = owner.Close(ctx)
	if err := env.Kube.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	peer := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: peerSecret},
		StringData: map[string]string{"username": id, "password": password, "endpoint": env.Postgres.Host, "port": strconv.Itoa(env.Postgres.Port)},
	}
	if err := env.Kube.Client.Create(ctx, peer); err != nil {
		t.Fatal(err)
	}

	// What the test made in Kubernetes goes when it ends, whatever step
	// it stopped at: the Tenant, then the Database (Retain: nothing is
	// dropped), each waited for; one left behind stops being polled.
	testenv.PauseWhenDone(t, env.Kube.Client, dbRef)
	t.Cleanup(func() {
		c, done := context.WithTimeout(context.Background(), 2*time.Minute)
		defer done()
		for _, o := range []*unstructured.Unstructured{tenantRef, dbRef} {
			if err := env.Kube.Client.Delete(c, o); apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				t.Errorf("cleanup: deleting %s %s: %v", o.GetKind(), o.GetName(), err)
				continue
			}
			if err := testenv.WaitFor(c, time.Minute, func(ctx context.Context) error {
				u := tenantkit.Ref(o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
				if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(u), u); !apierrors.IsNotFound(err) {
					return testenv.ErrNotYet
				}
				return nil
			}); err != nil {
				t.Errorf("cleanup: %s %s not gone: %v", o.GetKind(), o.GetName(), err)
			}
		}
		_ = env.Kube.Client.Delete(c, peer)
	})

	// 2. The record, written by the doc's pipe from the peer's Secret:
	// exactly the role's username and password.
	out := runAsWritten(ctx, t, "the record command (adopt-record)", recordCmd, "")
	rec, err := kv.Get(ctx, recordPath)
	if err != nil {
		t.Fatalf("no record at %s after the record command: %v\n%s", recordPath, err, out)
	}
	if got := strings.Join(slices.Sorted(maps.Keys(rec.Data)), ","); got != "password,username" {
		t.Errorf("the record holds the keys %s, want exactly password,username", got)
	}
	if rec.Data["username"] != id || rec.Data["password"] != password {
		t.Fatalf("the record command did not copy the peer's username and password (username %v, password equal: %v); its output:\n%s",
			rec.Data["username"], rec.Data["password"] == password, out)
	}

	// 3. On 16 and later the superuser's GRANT, as the doc writes it.
	if major >= 16 {
		for _, q := range strings.Split(grant, ";") {
			if q = strings.TrimSpace(q); q != "" {
				if _, err := super.Exec(ctx, q); err != nil {
					t.Fatalf("the GRANT of docs/adopting.md, as the superuser: %v", err)
				}
			}
		}
	}

	// 4. The read-only import reports what it found and changes nothing.
	before := adoptCatalog(ctx, t, id)
	runAsWritten(ctx, t, "the read-only import (adopt-import)", "kubectl apply -f -", importYAML)
	describe := func(u *unstructured.Unstructured) string {
		y, _ := yaml.Marshal(map[string]any{"spec": u.Object["spec"], "status": u.Object["status"]})
		return "the Database:\n" + string(y)
	}
	readyMessage := func(u *unstructured.Unstructured) string {
		_, _, m := tenantkit.Condition(u, "Ready")
		return m
	}
	testenv.Await(t, env.Kube.Client, dbRef, 2*time.Minute, "the read-only import reports what it found", func(u *unstructured.Unstructured) bool {
		st, reason, msg := tenantkit.Condition(u, "Ready")
		return st == "True" || (reason == "ImportDifferences" && strings.HasPrefix(msg, "imported read-only"))
	}, describe)
	if m := readyMessage(dbRef); strings.Contains(m, "no credential") || strings.Contains(m, "does not log in") {
		t.Fatalf("the import does not log in with the record of the record command: %s", m)
	} else if m != messages[0] {
		t.Errorf("the read-only import says %q; docs/adopting.md shows %q", m, messages[0])
	}
	// Several polls (one a second) of the import.
	time.Sleep(5 * time.Second)
	if diff := cmp.Diff(before, adoptCatalog(ctx, t, id)); diff != "" {
		t.Errorf("the read-only import changed the catalog (-before +after):\n%s", diff)
	}
	meta, err := kv.GetMetadata(ctx, recordPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Versions) != 1 || len(meta.CustomMetadata) != 0 {
		t.Errorf("the read-only import wrote the record: %d versions, metadata keys %v", len(meta.Versions), slices.Sorted(maps.Keys(meta.CustomMetadata)))
	}

	// 5. With Update the provider repairs what differs, never the password.
	runAsWritten(ctx, t, "the patch adding Update (adopt-update)", updateCmd, "")
	testenv.Await(t, env.Kube.Client, dbRef, 3*time.Minute, "the import with Update is Ready", func(u *unstructured.Unstructured) bool {
		return tenantkit.Ready(u) == "True" && strings.HasPrefix(readyMessage(u), "imported with Update allowed")
	}, describe)
	if m := readyMessage(dbRef); m != messages[1] {
		t.Errorf("the import with Update says %q; docs/adopting.md shows %q", m, messages[1])
	}
	repaired := adoptCatalog(ctx, t, id)
	if repaired["public connect"] != "false" {
		t.Errorf("after Update PUBLIC may still connect to the database")
	}
	if repaired["role password"] != before["role password"] {
		t.Errorf("the repairs changed the role's password")
	}

	// 6. The reservation and the app team's Tenant: its Secret holds the
	// role's password and reads the row written before the adoption.
	runAsWritten(ctx, t, "the reservation (adopt-reserve)", reserveCmd, "")
	if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
		t.Fatal(err)
	}
	runAsWritten(ctx, t, "the Tenant (adopt-tenant)", "kubectl apply -f -", tenantYAML)
	bindCtx, bindDone := context.WithTimeout(ctx, 4*time.Minute)
	defer bindDone()
	tenantkit.WaitTenantReady(bindCtx, t, env, tenantAPI, ns, tenant)
	secret := tenantkit.StaticSecretName(tenant)
	if got := tenantkit.CheckSecretLogsIn(ctx, t, env, ns, secret); got != password {
		t.Errorf("the Tenant's Secret does not hold the password the role had before the adoption")
	}
	readKept(ctx, t, id, password, "with the Tenant's Secret")

	// 7. The rotation: the peer's password is refused, the Secret follows.
	runAsWritten(ctx, t, "the rotation (adopt-rotate)", rotateCmd, "")
	testenv.Await(t, env.Kube.Client, dbRef, 2*time.Minute, "the rotation is done", func(u *unstructured.Unstructured) bool {
		got, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "credentialRotation", "id")
		return got == rotationID[1]
	}, describe)
	cfg, err := env.Postgres.ConnConfig(id, password, id)
	if err != nil {
		t.Fatal(err)
	}
	var pe *pgconn.PgError
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		_ = c.Close(ctx)
		t.Error("the peer's password still logs in after the rotation")
	} else if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("the peer's password after the rotation: %v, want a refused password (28P01)", err)
	}
	var rotated string
	if err := testenv.WaitFor(ctx, time.Minute, func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
			return err
		}
		if rotated = string(s.Data["password"]); rotated == "" || rotated == password {
			return testenv.ErrNotYet
		}
		return nil
	}); err != nil {
		t.Fatalf("the Tenant's Secret still holds the old password a minute after the rotation: %v", err)
	}
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, secret)
	readKept(ctx, t, id, rotated, "with the rotated Secret")

	// 8. Handing it back: the Tenant and the Database go, nothing of the
	// server or the record does.
	runAsWritten(ctx, t, "handing it back (adopt-hand-back)", handBackCmd, "")
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(dbRef), dbRef); !apierrors.IsNotFound(err) {
		t.Errorf("the Database is still there after handing it back (%v)", err)
	}
	if db, role := tenantkit.ServerHas(ctx, t, env, id, id); !db || !role {
		t.Errorf("handing it back dropped something: database there %v, role there %v", db, role)
	}
	readKept(ctx, t, id, rotated, "with the record's password after handing it back")
	if v := tenantkit.RecordVersions(ctx, t, env, recordPath); v != 2 {
		t.Errorf("the record has %d versions after the rotation and handing back, want 2", v)
	}
}

// runAsWritten runs a shell block of docs/adopting.md as an admin would:
// in sh, with the pinned kubectl and bao first on the PATH, the test's
// kubeconfig and OpenBao (its root token as the admin's token), stdin
// as its input. It returns the combined output, which holds no password
// (the record command's password goes through a pipe).
func runAsWritten(ctx context.Context, t *testing.T, what, script, stdin string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "sh", "-c", script)
	cmd.Env = []string{
		"PATH=" + testenv.BinDir() + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"KUBECONFIG=" + env.Kube.KubeconfigFile,
		"BAO_ADDR=" + env.OpenBao.Address,
		"BAO_CACERT=" + env.OpenBao.CA.CertFile,
		"BAO_TOKEN=" + env.OpenBao.RootToken,
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/adopting.md, %s: %v\n%s", what, err, out)
	}
	return string(out)
}

// docSamples returns the line under each `$ ` prompt of docs/adopting.md
// that is exactly prompt: what the doc says the command prints.
func docSamples(t *testing.T, prompt string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", adoptingDoc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []string
	for i, l := range lines {
		if l == prompt && i+1 < len(lines) {
			out = append(out, lines[i+1])
		}
	}
	return out
}

// connectAs logs in to the database named like the role.
func connectAs(ctx context.Context, t *testing.T, role, password string) *pgx.Conn {
	t.Helper()
	cfg, err := env.Postgres.ConnConfig(role, password, role)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("logging in as the role %s: %v", role, err)
	}
	return c
}

// readKept logs in as the role with password and reads the row written
// before the adoption.
func readKept(ctx context.Context, t *testing.T, role, password, how string) {
	t.Helper()
	c := connectAs(ctx, t, role, password)
	defer c.Close(context.Background()) //nolint:errcheck // test session
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM app.kept").Scan(&v); err != nil || v != "before the adoption" {
		t.Errorf("%s, the row written before the adoption: %q, %v", how, v, err)
	}
}

// adoptCatalog is what the server says of the database and its role, read
// as the superuser outside the database (its extensions from inside): what
// a read-only import must leave as it is. The role's password is shown by
// a digest of its verifier.
func adoptCatalog(ctx context.Context, t *testing.T, name string) map[string]string {
	t.Helper()
	super, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(context.Background()) //nolint:errcheck // test session
	got := map[string]string{}
	queries := map[string]string{
		"database": `SELECT format('owner=%s acl=%s connlimit=%s template=%s allowconn=%s', pg_get_userbyid(datdba), coalesce(datacl::text, 'default'), datconnlimit, datistemplate, datallowconn)
			FROM pg_database WHERE datname = $1`,
		"public connect": `SELECT has_database_privilege('public', $1, 'CONNECT')::text`,
		"database settings": `SELECT coalesce(string_agg(coalesce(pg_get_userbyid(s.setrole), '*') || ':' || s.setconfig::text, ' ' ORDER BY 1), '')
			FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = $1`,
		"role": `SELECT format('super=%s inherit=%s createrole=%s createdb=%s login=%s replication=%s bypassrls=%s connlimit=%s validuntil=%s config=%s',
			rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls, rolconnlimit, coalesce(rolvaliduntil::text, 'none'), coalesce(rolconfig::text, 'none'))
			FROM pg_roles WHERE rolname = $1`,
		"role password": `SELECT md5(coalesce(rolpassword, '')) FROM pg_authid WHERE rolname = $1`,
		"role members": `SELECT coalesce(string_agg(pg_get_userbyid(m.member) || ' admin=' || m.admin_option, ', ' ORDER BY 1), '')
			FROM pg_auth_members m WHERE m.roleid = (SELECT oid FROM pg_roles WHERE rolname = $1)`,
		"role memberships": `SELECT coalesce(string_agg(pg_get_userbyid(m.roleid), ', ' ORDER BY 1), '')
			FROM pg_auth_members m WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = $1)`,
	}
	for k, q := range queries {
		var v string
		if err := super.QueryRow(ctx, q, name).Scan(&v); err != nil {
			t.Fatalf("reading the catalog (%s): %v", k, err)
		}
		got[k] = v
	}
	in, err := env.Postgres.SuperConn(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close(context.Background()) //nolint:errcheck // test session
	var ext, rows string
	if err := in.QueryRow(ctx, `SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension`).Scan(&ext); err != nil {
		t.Fatal(err)
	}
	if err := in.QueryRow(ctx, `SELECT string_agg(v, ',' ORDER BY v) FROM app.kept`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	got["extensions"], got["rows"] = ext, rows
	return got
}
