package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func adminPool(t *testing.T) *postgres.Pool {
	t.Helper()
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM)})
	t.Cleanup(m.Close)
	p, _, err := m.Get("t/tenant", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// provision runs the provisioning statements as the non-superuser admin.
func provision(t *testing.T, p *postgres.Pool, name, password string) {
	t.Helper()
	ctx := context.Background()
	createRoleAndDatabase(t, p, name, password)
	if err := p.RestrictConnect(ctx, name, name); err != nil {
		t.Fatalf("RestrictConnect: %v", err)
	}
	tc, err := p.ConnectAs(ctx, name, postgres.Credential{Username: name, Password: password})
	if err != nil {
		t.Fatalf("ConnectAs: %v", err)
	}
	defer tc.Close(ctx) //nolint:errcheck // test
	if err := tc.CreateExtension(ctx, "pg_trgm"); err != nil {
		t.Fatalf("CreateExtension: %v", err)
	}
}

// createRoleAndDatabase takes the first provisioning steps for name: the
// login role with password's verifier, and its database, which accepts no
// connection until RestrictConnect.
func createRoleAndDatabase(t *testing.T, p *postgres.Pool, name, password string) {
	t.Helper()
	ctx := context.Background()
	v, err := scram.Verifier(password)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CreateRole(ctx, name, v); err != nil {
		t.Fatalf("CreateRole: %v", err)
	}
	if err := p.CreateDatabase(ctx, name, name); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
}

// appConn connects as a tenant role with the harness's own pgx config.
func appConn(t *testing.T, role, password, database string) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := env.Postgres.ConnConfig(role, password, database)
	if err != nil {
		t.Fatal(err)
	}
	return pgx.ConnectConfig(context.Background(), cfg)
}

func TestTenantLifecycleAsNonSuperuserAdmin(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	const name, other = "shop", "blog"
	pw, otherPW := testenv.RandomSecret("shop-"), testenv.RandomSecret("blog-")

	c, err := p.Observe(ctx, name, name)
	if err != nil || c.DatabaseExists || c.RoleExists {
		t.Fatalf("Observe(absent) = %+v, %v", c, err)
	}
	avail, err := p.Extensions(ctx, []string{"pg_trgm", "no_such_extension", "dblink", "earthdistance"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]postgres.Extension{
		"pg_trgm":           {Available: true, OwnerMayCreate: true, Requires: []string{}},
		"no_such_extension": {},
		// dblink needs a superuser and is not trusted: the owner cannot.
		"dblink":        {Available: true, Requires: []string{}},
		"earthdistance": {Available: true, Requires: []string{"cube"}},
	}
	if diff := cmp.Diff(want, avail, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("Extensions: -want +got:\n%s", diff)
	}

	provision(t, p, name, pw)
	provision(t, p, other, otherPW)

	c, err = p.Observe(ctx, name, name)
	if err != nil {
		t.Fatal(err)
	}
	if !c.DatabaseExists || !c.RoleExists || c.Owner != name || c.DatabaseOID == 0 || c.RoleOID == 0 {
		t.Errorf("after provisioning: %+v", c)
	}
	if !c.RoleAttributesOK() || c.PublicConnect || !c.RoleConnect || !c.AdminMember {
		t.Errorf("attributes/privileges: %+v", c)
	}

	tc, err := p.ConnectAs(ctx, name, postgres.Credential{Username: name, Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	exts, err := tc.Extensions(ctx)
	_ = tc.Close(ctx)
	if err != nil || !slices.Contains(exts, "pg_trgm") {
		t.Errorf("Extensions = %v, %v", exts, err)
	}

	// The app credential works for its own database and nothing more.
	app, err := appConn(t, name, pw, name)
	if err != nil {
		t.Fatalf("app login: %v", err)
	}
	defer app.Close(ctx) //nolint:errcheck // test
	if _, err := app.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)"); err != nil {
		t.Errorf("app cannot create a table: %v", err)
	}
	for _, stmt := range []string{"CREATE DATABASE evil", "CREATE ROLE evil"} {
		if _, err := app.Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s as the app: %v, want permission denied", stmt, err)
		}
	}
	if c, err := appConn(t, name, pw, other); err == nil {
		_ = c.Close(ctx)
		t.Error("the app connected to another tenant's database")
	} else if !strings.Contains(err.Error(), "permission denied for database") {
		t.Errorf("connect to another tenant: %v", err)
	}
	if c, err := appConn(t, name, pw, "postgres"); err == nil {
		// PUBLIC may connect to the admin database by default; the app
		// has no privileges there that matter. Recorded, not asserted.
		_ = c.Close(ctx)
	}

	// Deletion with a live session open.
	if err := p.BlockLogins(ctx, name); err != nil {
		t.Fatal(err)
	}
	if c, err := appConn(t, name, pw, name); err == nil {
		_ = c.Close(ctx)
		t.Error("a new login succeeded after BlockLogins")
	}
	n, err := p.TerminateSessions(ctx, name, name)
	if err != nil || n < 1 {
		t.Errorf("TerminateSessions = %d, %v; want the live session ended", n, err)
	}
	if err := p.DropDatabase(ctx, name, name); err != nil {
		t.Fatal(err)
	}
	if err := p.DropRole(ctx, name); err != nil {
		t.Fatal(err)
	}
	// Absent is success.
	if err := p.DropDatabase(ctx, name, name); err != nil {
		t.Errorf("second DropDatabase: %v", err)
	}
	c, err = p.Observe(ctx, name, name)
	if err != nil || c.DatabaseExists || c.RoleExists {
		t.Errorf("after drop: %+v, %v", c, err)
	}
	// The other tenant is untouched.
	c, err = p.Observe(ctx, other, other)
	if err != nil || !c.DatabaseExists || c.Owner != other {
		t.Errorf("other tenant after drop: %+v, %v", c, err)
	}
}

func TestRepairRole(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	const role = "drifty"
	v, _ := scram.Verifier("x-" + testenv.RandomSecret(""))
	if err := p.CreateRole(ctx, role, v); err != nil {
		t.Fatal(err)
	}
	if err := p.BlockLogins(ctx, role); err != nil {
		t.Fatal(err)
	}
	c, _ := p.Observe(ctx, "nodb", role)
	if c.RoleAttributesOK() {
		t.Fatalf("blocked role reads as OK: %+v", c)
	}
	if err := p.RepairRole(ctx, role); err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Observe(ctx, "nodb", role); !c.RoleAttributesOK() {
		t.Errorf("after repair: %+v", c)
	}
}

func TestRefusals(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	if err := p.CreateRole(ctx, "plain", "a-cleartext-password"); err == nil || !strings.Contains(err.Error(), "not a SCRAM-SHA-256 verifier") {
		t.Errorf("CreateRole with a password = %v, want a refusal", err)
	}
	for _, bad := range []string{`x"; DROP ROLE tenant_admin; --`, "Upper", ""} {
		if _, err := p.Observe(ctx, bad, "r"); postgres.ClassOf(err) != postgres.ClassInvalid {
			t.Errorf("Observe(%q) = %v, want InvalidSpec", bad, err)
		}
		if err := p.CreateDatabase(ctx, bad, "r"); postgres.ClassOf(err) != postgres.ClassInvalid {
			t.Errorf("CreateDatabase(%q) = %v, want InvalidSpec", bad, err)
		}
	}
	if _, err := p.Extensions(ctx, []string{"ok", "bad-name"}); postgres.ClassOf(err) != postgres.ClassInvalid {
		t.Errorf("Extensions(bad) = %v", err)
	}
}
