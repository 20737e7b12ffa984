package docs

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// queries splits a block into its statements, with psql's :'name'
// replaced by the quoted value of vars[name].
func queries(t *testing.T, body string, vars map[string]string) []string {
	t.Helper()
	body = regexp.MustCompile(`:'(\w+)'`).ReplaceAllStringFunc(body, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := vars[name]
		if !ok {
			t.Fatalf("the block uses :'%s', which the runbook does not \\set", name)
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
// one line each, and the statements of their last column (what psql's
// \gexec runs).
func runbookRows(t *testing.T, c *pgx.Conn, qs []string) (rows []string, stmts []string) {
	t.Helper()
	ctx := context.Background()
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
			if s, ok := vals[len(vals)-1].(string); ok && s != "" {
				stmts = append(stmts, s)
			}
		}
		if err := r.Err(); err != nil {
			t.Fatalf("runbook query: %v\n%s", err, q)
		}
	}
	return rows, stmts
}

func execAll(t *testing.T, c *pgx.Conn, stmts []string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.Exec(context.Background(), s); err != nil {
			t.Fatalf("runbook statement %s: %v", strings.ReplaceAll(s, env.Postgres.AdminUser, "<the admin>"), err)
		}
	}
}

// TestRebindRunbookRemovesTheOldOwnersGrants: a tenant, as the owner of
// its database, opens doors to another role (CONNECT and TEMPORARY on the
// database, membership in its role, default privileges, grants on a table,
// a column, a schema and a function) and keeps a session of that role
// open. The runbook's queries of docs/admins.md, run as the provider's
// admin role (the session query as a superuser) with the names set as the
// runbook sets them, list every one of them, and the statements they
// produce remove them all and end the session; listed again, nothing is
// left. The tenant's own access and the admin's membership stay.
func TestRebindRunbookRemovesTheOldOwnersGrants(t *testing.T) {
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
	su := pg.SuperConnT(t, "postgres")
	var major int
	if err := su.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}

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
	for _, s := range []string{
		"CREATE ROLE rb_old LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '" + v + "'",
		grantToAdmin,
		"CREATE DATABASE rb_old OWNER rb_old TEMPLATE template0", // as the provider makes it
		"REVOKE CONNECT, TEMPORARY ON DATABASE rb_old FROM PUBLIC",
		"GRANT CONNECT ON DATABASE rb_old TO rb_old",
	} {
		if _, err := adm.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := pg.CreateRole(ctx, friend, friendPW, ""); err != nil {
		t.Fatal(err)
	}

	// The old owner opens its doors.
	own := conn(tenant, tenantPW, tenant)
	for _, s := range []string{
		"GRANT CONNECT, TEMPORARY ON DATABASE rb_old TO rb_friend",
		"CREATE TABLE public.data (id int, secret text)",
		"GRANT SELECT ON public.data TO rb_friend",
		"GRANT UPDATE (secret) ON public.data TO rb_friend",
		"CREATE SCHEMA app",
		"GRANT USAGE ON SCHEMA app TO rb_friend",
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO rb_friend",
		"ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT EXECUTE ON FUNCTIONS TO rb_friend",
		"CREATE FUNCTION app.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
	} {
		if _, err := own.Exec(ctx, s); err != nil {
			t.Fatalf("as the owner tenant: %s: %v", s, err)
		}
	}
	if major < 15 {
		// On 14 a role may grant itself.
		if _, err := own.Exec(ctx, "GRANT rb_old TO rb_friend"); err != nil {
			t.Fatalf("as the owner tenant: %v", err)
		}
	} else if _, err := adm.Exec(ctx, "GRANT rb_old TO rb_friend"); err != nil {
		// From 15 on only a role with ADMIN OPTION (or, before 16,
		// CREATEROLE) may: the admin, asked.
		t.Fatalf("as the admin: %v", err)
	}
	session := conn(friend, friendPW, tenant)

	vars := psqlVars(t, block(t, "admins.md", "sql", "rebind-vars"))
	vars["db"], vars["role"], vars["admin"] = tenant, tenant, pg.AdminUser
	server := queries(t, block(t, "admins.md", "sql", "rebind-server"), vars)
	inside := queries(t, block(t, "admins.md", "sql", "rebind-database"), vars)
	sessions := queries(t, block(t, "admins.md", "sql", "rebind-sessions"), vars)

	// Failure messages never carry the admin's name.
	redact := strings.NewReplacer(pg.AdminUser, "<the admin>")
	rows, stmts := runbookRows(t, adm, server)
	all := redact.Replace(strings.Join(rows, "\n"))
	for _, want := range []string{"CONNECT", "TEMPORARY", "REVOKE ALL ON DATABASE rb_old FROM rb_friend CASCADE", "REVOKE rb_old FROM rb_friend"} {
		if !strings.Contains(all, want) {
			t.Errorf("the server queries do not find %q:\n%s", want, all)
		}
	}
	if len(rows) != 2 {
		t.Errorf("the server queries list %d rows, want the grantee and the member (never the admin's own membership):\n%s", len(rows), all)
	}
	admDB := conn(pg.AdminUser, pg.AdminPassword, tenant)
	insideRows, insideStmts := runbookRows(t, admDB, inside)
	allInside := redact.Replace(strings.Join(insideRows, "\n"))
	for _, want := range []string{
		"ALTER DEFAULT PRIVILEGES FOR ROLE rb_old REVOKE ALL ON TABLES FROM rb_friend",
		"ALTER DEFAULT PRIVILEGES FOR ROLE rb_old IN SCHEMA app REVOKE ALL ON FUNCTIONS FROM rb_friend",
		"REVOKE ALL ON TABLE data FROM rb_friend",
		"REVOKE ALL (secret) ON TABLE data FROM rb_friend",
		"REVOKE ALL ON SCHEMA app FROM rb_friend",
		"REVOKE ALL ON ROUTINE app.f() FROM rb_friend",
	} {
		if !strings.Contains(allInside, want) {
			t.Errorf("the database queries do not find %q:\n%s", want, allInside)
		}
	}

	// \gexec: the statements, as the admin; the sessions as the superuser.
	execAll(t, adm, stmts)
	execAll(t, admDB, insideStmts)
	if r, _ := runbookRows(t, su, sessions); len(r) != 1 || !strings.Contains(r[0], friend) {
		t.Errorf("the session query ended %q, want the one session of %s", r, friend)
	}

	if rows, _ := runbookRows(t, adm, server); len(rows) != 0 {
		t.Errorf("left on the server after the runbook:\n%s", redact.Replace(strings.Join(rows, "\n")))
	}
	if rows, _ := runbookRows(t, admDB, inside); len(rows) != 0 {
		t.Errorf("left in the database after the runbook:\n%s", redact.Replace(strings.Join(rows, "\n")))
	}
	// The server agrees: the friend can neither connect nor read.
	var connect, member, read bool
	if err := su.QueryRow(ctx, `SELECT has_database_privilege('rb_friend', 'rb_old', 'CONNECT'),
		pg_has_role('rb_friend', 'rb_old', 'MEMBER'), false`).Scan(&connect, &member, &read); err != nil {
		t.Fatal(err)
	}
	if err := admDB.QueryRow(ctx, "SELECT has_table_privilege('rb_friend', 'public.data', 'SELECT')").Scan(&read); err != nil {
		t.Fatal(err)
	}
	if connect || member || read {
		t.Errorf("after the runbook rb_friend still has CONNECT %t, membership %t, SELECT %t", connect, member, read)
	}
	if err := session.Ping(ctx); err == nil {
		t.Error("the other role's session survived the runbook")
	}
	// What the provider needs stays.
	if err := su.QueryRow(ctx, `SELECT has_database_privilege('rb_old', 'rb_old', 'CONNECT'),
		pg_has_role($1::name, 'rb_old', 'USAGE')`, pg.AdminUser).Scan(&connect, &member); err != nil {
		t.Fatal(err)
	}
	if !connect || !member {
		t.Errorf("the runbook took the owner's CONNECT (%t) or the admin's membership (%t)", connect, member)
	}
}
