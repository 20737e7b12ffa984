package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// superExec runs statements as the bootstrap superuser in database.
func superExec(t *testing.T, database string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := env.Postgres.SuperConn(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestHostileTenantCannotRunCodeAsTheAdmin plants, as a real tenant login,
// every object a tenant can create to take over a statement of the admin's
// (operators with exact-match argument types for the comparisons the admin
// makes, functions named like the ones it calls, a schema named like the
// admin role, which the default search_path "$user", public looks in), on a
// server configured like PostgreSQL 14 and older (PUBLIC may create in the
// admin database's public schema, and here even create schemas). Then it
// runs every admin statement the provider has and shows that none of the
// planted code ran.
func TestHostileTenantCannotRunCodeAsTheAdmin(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	pg := env.Postgres
	superExec(t, "postgres",
		"GRANT CREATE ON SCHEMA public TO PUBLIC",
		"GRANT CREATE ON DATABASE postgres TO PUBLIC")
	t.Cleanup(func() {
		superExec(t, "postgres",
			"DROP OWNED BY mallory", "DROP SCHEMA IF EXISTS "+pgx.Identifier{pg.AdminUser}.Sanitize()+" CASCADE",
			"REVOKE CREATE ON SCHEMA public FROM PUBLIC", "REVOKE CREATE ON DATABASE postgres FROM PUBLIC")
	})

	p := adminPool(t)
	pw := testenv.RandomSecret("mallory-")
	provision(t, p, "mallory", pw)

	// Mallory logs in to the admin's database (PUBLIC may connect to it
	// by default) and plants her traps. Each records who ran it.
	m, err := appConn(t, "mallory", pw, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx) //nolint:errcheck // test
	admin := pgx.Identifier{pg.AdminUser}.Sanitize()
	trap := func(schema string) []string {
		var out []string
		for i, sig := range []struct{ l, r, body string }{
			{"oid", "int4", "$1 OPERATOR(pg_catalog.=) $2::oid"},
			{"oid", "int8", "$1 OPERATOR(pg_catalog.=) $2::oid"},
			{"name", "text", "$1::text OPERATOR(pg_catalog.=) $2"},
			{"text", "text", "$1 OPERATOR(pg_catalog.=) $2"},
			{"name", "name", "$1 OPERATOR(pg_catalog.=) $2"},
			{"oid", "oid", "$1 OPERATOR(pg_catalog.=) $2"},
			{"int4", "int4", "$1 OPERATOR(pg_catalog.=) $2"},
		} {
			fn := fmt.Sprintf("%s.trap_%d", schema, i)
			out = append(out,
				fmt.Sprintf(`CREATE FUNCTION %s(%s, %s) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO public.hijack_log VALUES (CASE WHEN current_user::text OPERATOR(pg_catalog.=) 'mallory' THEN 'the tenant' ELSE 'another role' END, '%s = %s'); RETURN %s; END $f$`, fn, sig.l, sig.r, sig.l, sig.r, sig.body),
				fmt.Sprintf("CREATE OPERATOR %s.= (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)", schema, sig.l, sig.r, fn),
				fmt.Sprintf("CREATE OPERATOR %s.<> (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)", schema, sig.l, sig.r, fn))
		}
		for _, f := range []string{
			"current_setting(text) RETURNS text", "current_setting(text, bool) RETURNS text",
			"pg_has_role(name, oid, text) RETURNS bool", "pg_get_userbyid(oid) RETURNS name",
			"pg_terminate_backend(int4) RETURNS bool", "pg_backend_pid() RETURNS int4",
			"acldefault(\"char\", oid) RETURNS aclitem[]",
		} {
			out = append(out, fmt.Sprintf(`CREATE FUNCTION %s.%s LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO public.hijack_log VALUES (CASE WHEN current_user::text OPERATOR(pg_catalog.=) 'mallory' THEN 'the tenant' ELSE 'another role' END, '%s'); RETURN NULL; END $f$`, schema, f, f))
		}
		return out
	}
	stmts := []string{
		"CREATE TABLE public.hijack_log (who text, what text)",
		"GRANT INSERT ON public.hijack_log TO PUBLIC",
		"CREATE SCHEMA " + admin,
		"GRANT USAGE ON SCHEMA " + admin + " TO PUBLIC",
	}
	stmts = append(stmts, trap("public")...)
	stmts = append(stmts, trap(admin)...)
	for _, s := range stmts {
		if _, err := m.Exec(ctx, s); err != nil {
			t.Fatalf("as the tenant: %s: %v", s, err)
		}
	}
	logged := func() []string {
		t.Helper()
		c, err := pg.SuperConn(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx) //nolint:errcheck // test
		rows, _ := c.Query(ctx, "SELECT who || ': ' || what FROM public.hijack_log")
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The traps are live: an ordinary session with the default search_path
	// that compares an oid with an integer literal runs the tenant's code,
	// as the provider's observe query did before it was hardened.
	if _, err := m.Exec(ctx, "SELECT 1 FROM pg_catalog.pg_roles WHERE oid = 0"); err != nil {
		t.Fatal(err)
	}
	if got := logged(); len(got) == 0 {
		t.Fatal("the planted operator did not run in a plain session: the test would prove nothing")
	}
	if _, err := m.Exec(ctx, "TRUNCATE public.hijack_log"); err != nil {
		t.Fatal(err)
	}

	// Every admin statement the provider has, on a fresh pool.
	p = adminPool(t)
	if _, err := p.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := p.Observe(ctx, "mallory", "mallory"); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	if _, err := p.Extensions(ctx, []string{"pg_trgm", "earthdistance", "dblink"}); err != nil {
		t.Fatalf("Extensions: %v", err)
	}
	vpw := testenv.RandomSecret("victim-")
	v, _ := scram.Verifier(vpw)
	for _, step := range []struct {
		name string
		fn   func() error
	}{
		{"CreateRole", func() error { return p.CreateRole(ctx, "victim", v) }},
		{"GrantRoleToAdmin", func() error { return p.GrantRoleToAdmin(ctx, "victim") }},
		{"RepairRole", func() error { return p.RepairRole(ctx, "victim") }},
		{"CreateDatabase", func() error { return p.CreateDatabase(ctx, "victim", "victim") }},
		{"SetDatabaseOwner", func() error { return p.SetDatabaseOwner(ctx, "victim", "victim") }},
		{"RestrictConnect", func() error { return p.RestrictConnect(ctx, "victim", "victim") }},
		{"Observe", func() error { _, err := p.Observe(ctx, "victim", "victim"); return err }},
		{"BlockLogins", func() error { return p.BlockLogins(ctx, "victim") }},
		{"TerminateSessions", func() error { _, err := p.TerminateSessions(ctx, "victim", "victim"); return err }},
		{"DropDatabase", func() error { return p.DropDatabase(ctx, "victim", "victim") }},
		{"DropRole", func() error { return p.DropRole(ctx, "victim") }},
	} {
		if err := step.fn(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	if got := logged(); len(got) > 0 {
		t.Errorf("the tenant's code ran in the admin's sessions: %v", got)
	}
}
