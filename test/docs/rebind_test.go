package docs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// psqlVars reads the `\set name 'value'` lines of a block.
func psqlVars(t *testing.T, body string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	re := regexp.MustCompile(`^\\set (\w+) '([^']*)'$`)
	for _, line := range strings.Split(body, "\n") {
		if m := re.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			vars[m[1]] = m[2]
		}
	}
	return vars
}

// queries splits a block into its statements, without psql's
// meta-commands (lines starting with a backslash), with psql's :'name'
// replaced by the quoted value of vars[name].
func queries(t *testing.T, body string, vars map[string]string) []string {
	t.Helper()
	var sqlLines []string
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), `\`) {
			sqlLines = append(sqlLines, line)
		}
	}
	body = regexp.MustCompile(`:'(\w+)'`).ReplaceAllStringFunc(strings.Join(sqlLines, "\n"), func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := vars[name]
		if !ok {
			t.Fatalf("the block uses :'%s', which it does not \\set", name)
		}
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	})
	var out []string
	for _, q := range strings.Split(body, ";\n") {
		if q = strings.TrimSpace(q); q != "" {
			out = append(out, q)
		}
	}
	return out
}

// runbookRows runs the queries of a block and returns their rows as text,
// one line each.
func runbookRows(t *testing.T, c *pgx.Conn, qs []string) []string {
	t.Helper()
	ctx := context.Background()
	var rows []string
	for _, q := range qs {
		r, err := c.Query(ctx, q)
		if err != nil {
			t.Fatalf("runbook query: %v\n%s", err, q)
		}
		for r.Next() {
			vals, err := r.Values()
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, strings.TrimSpace(fmt.Sprintln(vals...)))
		}
		if err := r.Err(); err != nil {
			t.Fatalf("runbook query: %v\n%s", err, q)
		}
	}
	return rows
}

// TestRebindCheckListsWhatTheCleanupRemoves: a tenant, as the owner of
// its database, opens doors to another role (CONNECT and TEMPORARY on the
// database, membership in its role, default privileges, grants on a
// table, a column, a schema and a function), keeps a session of that role
// open, and puts a schema of its own first on the database's search_path
// with functions and operators named like the catalog's. The runbook's
// check of docs/admins.md, run as the provider's admin role in the admin's
// database, lists the grantee, the member and the session; run even in
// the tenant's database, it runs none of the tenant's code. The access
// cleanup the runbook requests (the provider's CleanupAccess, with the
// admin role holding pg_signal_backend as the runbook says) removes all of
// it: the check then lists nothing, and the tenant's own access and the
// admin's membership stay.
func TestRebindCheckListsWhatTheCleanupRemoves(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg := env.Postgres
	const tenant, friend = "rb_old", "rb_friend"
	tenantPW, friendPW := testenv.RandomSecret("rb-"), testenv.RandomSecret("rbf-")
	conn := func(user, password, db string) *pgx.Conn {
		t.Helper()
		cfg, err := pg.ConnConfig(user, password, db)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("connect as %s to %s: %v", user, db, err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	exec := func(c *pgx.Conn, who string, stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := c.Exec(ctx, s); err != nil {
				t.Fatalf("as %s: %s: %v", who, strings.ReplaceAll(s, pg.AdminUser, "<the admin>"), err)
			}
		}
	}
	su := pg.SuperConnT(t, "postgres")
	var major int
	if err := su.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}
	adminIdent := pgx.Identifier{pg.AdminUser}.Sanitize()
	exec(su, "the superuser", "GRANT pg_signal_backend TO "+adminIdent)
	t.Cleanup(func() { _, _ = su.Exec(context.Background(), "REVOKE pg_signal_backend FROM "+adminIdent) })

	// Provisioned as the provider does it, by its admin role.
	adm := conn(pg.AdminUser, pg.AdminPassword, "postgres")
	v, err := scram.Verifier(tenantPW)
	if err != nil {
		t.Fatal(err)
	}
	grantToAdmin := "GRANT rb_old TO CURRENT_USER"
	if major >= 16 {
		grantToAdmin += " WITH INHERIT TRUE, SET TRUE"
	}
	exec(adm, "the admin",
		"CREATE ROLE rb_old LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '"+v+"'",
		grantToAdmin,
		"CREATE DATABASE rb_old OWNER rb_old TEMPLATE template0",
		"REVOKE CONNECT, TEMPORARY ON DATABASE rb_old FROM PUBLIC",
		"GRANT CONNECT ON DATABASE rb_old TO rb_old")
	if err := pg.CreateRole(ctx, friend, friendPW, ""); err != nil {
		t.Fatal(err)
	}
	// The Database's own data role, as the provider makes it: a login
	// role with the owner's grants, and the running app's session.
	dataRolePW := testenv.RandomSecret("rbd-")
	if err := pg.CreateRole(ctx, "rb_old_app", dataRolePW, ""); err != nil {
		t.Fatal(err)
	}

	// The old owner opens its doors and sets its traps.
	own := conn(tenant, tenantPW, tenant)
	exec(own, "the owner tenant",
		"GRANT CONNECT, TEMPORARY ON DATABASE rb_old TO rb_friend",
		"GRANT CONNECT ON DATABASE rb_old TO rb_old_app",
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO rb_old_app",
		"CREATE TABLE public.data (id int, secret text)",
		"GRANT SELECT ON public.data TO rb_friend",
		"GRANT UPDATE (secret) ON public.data TO rb_friend",
		"CREATE SCHEMA app",
		"GRANT USAGE ON SCHEMA app TO rb_friend",
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO rb_friend",
		"ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT EXECUTE ON FUNCTIONS TO rb_friend",
		"CREATE FUNCTION app.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"GRANT EXECUTE ON FUNCTION app.f() TO rb_friend",
		"CREATE TABLE public.trap_log (who text, what text)",
		"GRANT INSERT ON public.trap_log TO PUBLIC",
		"CREATE SCHEMA trap",
		"GRANT USAGE ON SCHEMA trap TO PUBLIC")
	for _, f := range []struct{ sig, ret, call string }{
		{"pg_get_userbyid(oid)", "name", "pg_catalog.pg_get_userbyid($1)"},
		{"pg_backend_pid()", "int4", "pg_catalog.pg_backend_pid()"},
	} {
		exec(own, "the owner tenant", fmt.Sprintf(`CREATE FUNCTION trap.%s RETURNS %s LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO public.trap_log VALUES (pg_catalog.current_user()::pg_catalog.text, '%s'); RETURN %s; END $f$`, f.sig, f.ret, f.sig, f.call))
	}
	for i, sig := range []struct{ l, r string }{{"oid", "oid"}, {"name", "name"}, {"text", "text"}, {"int4", "int4"}} {
		for j, op := range []string{"=", "<>"} {
			fn := fmt.Sprintf("trap.op_%d_%d", i, j)
			exec(own, "the owner tenant",
				fmt.Sprintf(`CREATE FUNCTION %s(%s, %s) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO public.trap_log VALUES (pg_catalog.current_user()::pg_catalog.text, '%s %s %s'); RETURN $1 OPERATOR(pg_catalog.%s) $2; END $f$`, fn, sig.l, sig.r, sig.l, op, sig.r, op),
				fmt.Sprintf("CREATE OPERATOR trap.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)", op, sig.l, sig.r, fn))
		}
	}
	exec(own, "the owner tenant", "ALTER DATABASE rb_old SET search_path = trap, pg_catalog, public")
	if major < 15 {
		exec(own, "the owner tenant", "GRANT rb_old TO rb_friend") // on 14 a role may grant itself
	} else {
		exec(adm, "the admin", "GRANT rb_old TO rb_friend")
	}
	session := conn(friend, friendPW, tenant)
	app := conn("rb_old_app", dataRolePW, tenant)

	body := block(t, "admins.md", "sql", "rebind-check")
	vars := psqlVars(t, body)
	for _, k := range []string{"db", "role", "admin", "dataroles"} {
		if _, ok := vars[k]; !ok {
			t.Fatalf("the check does not \\set %s", k)
		}
	}
	vars["db"], vars["role"], vars["admin"], vars["dataroles"] = tenant, tenant, pg.AdminUser, "{rb_old_app}"
	check := queries(t, body, vars)
	redact := strings.NewReplacer(pg.AdminUser, "<the admin>")

	rows := runbookRows(t, adm, check)
	all := redact.Replace(strings.Join(rows, "\n"))
	for _, want := range []string{"privilege on the database rb_friend", "member of the login role rb_friend", "session on the database rb_friend"} {
		if !strings.Contains(all, want) {
			t.Errorf("the check does not list %q:\n%s", want, all)
		}
	}
	if len(rows) != 3 {
		t.Errorf("the check lists %d rows, want the grantee, the member and the session (never the admin, the owner or the data role):\n%s", len(rows), all)
	}
	// Run where the runbook says not to, in the tenant's database as a
	// superuser: it runs none of the tenant's code.
	inside, err := pg.SuperConn(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	inTenantDB := runbookRows(t, inside, check)
	var logged int
	if err := inside.QueryRow(ctx, "SELECT pg_catalog.count(*)::pg_catalog.int4 FROM public.trap_log").Scan(&logged); err != nil {
		t.Fatal(err)
	}
	_ = inside.Close(ctx)
	if logged != 0 || len(inTenantDB) != len(rows) {
		t.Errorf("the check in the tenant's database ran %d of the tenant's functions or operators and listed %d rows, want %d", logged, len(inTenantDB), len(rows))
	}

	// The cleanup the runbook requests.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, env.CA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	m := postgres.NewManager(postgres.Options{CABundleFile: ca})
	t.Cleanup(m.Close)
	p, _, err := m.Get("docs/rebind", "uid", postgres.Target{Host: pg.Host, Hostaddr: pg.Hostaddr, Port: pg.Port, Database: "postgres", SSLMode: postgres.SSLVerifyFull},
		postgres.Credential{Username: pg.AdminUser, Password: pg.AdminPassword})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := p.CleanupAccess(ctx, tenant, tenant, []string{"rb_old_app"})
	if err != nil {
		t.Fatalf("CleanupAccess: %v", err)
	}
	if len(rep.Remaining) > 0 {
		t.Errorf("the cleanup left: %s", redact.Replace(strings.Join(rep.Remaining, "; ")))
	}
	if rows := runbookRows(t, adm, check); len(rows) != 0 {
		t.Errorf("the check lists after the cleanup:\n%s", redact.Replace(strings.Join(rows, "\n")))
	}
	var connect, member, read, selectDefault bool
	if err := su.QueryRow(ctx, `SELECT has_database_privilege('rb_friend', 'rb_old', 'CONNECT'),
		pg_has_role('rb_friend', 'rb_old', 'MEMBER')`).Scan(&connect, &member); err != nil {
		t.Fatal(err)
	}
	sut := pg.SuperConnT(t, tenant)
	if err := sut.QueryRow(ctx, `SELECT pg_catalog.has_table_privilege('rb_friend', 'public.data', 'SELECT'),
		EXISTS (SELECT 1 FROM pg_catalog.pg_default_acl d, pg_catalog.aclexplode(d.defaclacl) a WHERE a.grantee OPERATOR(pg_catalog.=) 'rb_friend'::pg_catalog.regrole::pg_catalog.oid)`).Scan(&read, &selectDefault); err != nil {
		t.Fatal(err)
	}
	if connect || member || read || selectDefault {
		t.Errorf("after the cleanup rb_friend still has CONNECT %t, membership %t, SELECT %t, default privileges %t", connect, member, read, selectDefault)
	}
	if err := session.Ping(ctx); err == nil {
		t.Error("the other role's session survived the cleanup")
	}
	// What the provider needs stays.
	if err := su.QueryRow(ctx, `SELECT has_database_privilege('rb_old', 'rb_old', 'CONNECT'),
		pg_has_role($1::name, 'rb_old', 'USAGE')`, pg.AdminUser).Scan(&connect, &member); err != nil {
		t.Fatal(err)
	}
	if !connect || !member {
		t.Errorf("the cleanup took the owner's CONNECT (%t) or the admin's membership (%t)", connect, member)
	}
	if err := sut.QueryRow(ctx, `SELECT pg_catalog.has_database_privilege('rb_old_app', 'rb_old', 'CONNECT'),
		pg_catalog.has_table_privilege('rb_old_app', 'public.data', 'SELECT')`).Scan(&connect, &read); err != nil {
		t.Fatal(err)
	}
	if !connect || !read {
		t.Errorf("the cleanup took the data role's CONNECT (%t) or its SELECT (%t)", connect, read)
	}
	if err := app.Ping(ctx); err != nil {
		t.Errorf("the data role's session did not survive the cleanup: %v", err)
	}
}
