package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// cleanupTraps are the tenant's traps: a function or operator in schema
// trap for every catalog function and operator the provider's sessions
// inside a tenant database use (and a few more), each recording who ran
// it in public.trap_log and then doing what the catalog's does.
func cleanupTraps() []string {
	out := []string{
		"CREATE TABLE public.trap_log (who text, what text)",
		"GRANT INSERT ON public.trap_log TO PUBLIC",
		"CREATE SCHEMA trap",
		"GRANT USAGE ON SCHEMA trap TO PUBLIC",
		`CREATE FUNCTION trap.log(what text) RETURNS void LANGUAGE sql AS
		 $f$ INSERT INTO public.trap_log VALUES (pg_catalog.current_user()::pg_catalog.text, what) $f$`,
	}
	fn := func(sig, ret, body string) string {
		return fmt.Sprintf(`CREATE FUNCTION trap.%s RETURNS %s LANGUAGE plpgsql AS $f$
BEGIN PERFORM trap.log(%s); %s END $f$`, sig, ret, "'"+strings.ReplaceAll(sig, "'", "''")+"'", body)
	}
	for _, f := range []struct{ sig, ret, body string }{
		{"pg_get_userbyid(oid)", "name", "RETURN pg_catalog.pg_get_userbyid($1);"},
		{"current_database()", "name", "RETURN pg_catalog.current_database();"},
		{"current_setting(text)", "text", "RETURN pg_catalog.current_setting($1);"},
		{"current_setting(text, bool)", "text", "RETURN pg_catalog.current_setting($1, $2);"},
		{"pg_describe_object(oid, oid, int4)", "text", "RETURN pg_catalog.pg_describe_object($1, $2, $3);"},
		{"pg_has_role(name, oid, text)", "bool", "RETURN pg_catalog.pg_has_role($1, $2, $3);"},
		{"pg_has_role(name, name, text)", "bool", "RETURN pg_catalog.pg_has_role($1, $2, $3);"},
		{"pg_terminate_backend(int4, int8)", "bool", "RETURN pg_catalog.pg_terminate_backend($1, $2);"},
		{"pg_terminate_backend(int4)", "bool", "RETURN pg_catalog.pg_terminate_backend($1);"},
		{"pg_backend_pid()", "int4", "RETURN pg_catalog.pg_backend_pid();"},
		{"has_database_privilege(oid, oid, text)", "bool", "RETURN pg_catalog.has_database_privilege($1, $2, $3);"},
		{"acldefault(\"char\", oid)", "aclitem[]", "RETURN pg_catalog.acldefault($1, $2);"},
		{"aclexplode(aclitem[])", "TABLE(grantor oid, grantee oid, privilege_type text, is_grantable bool)", "RETURN QUERY SELECT * FROM pg_catalog.aclexplode($1);"},
		{"unnest(oid[])", "SETOF oid", "RETURN QUERY SELECT pg_catalog.unnest($1);"},
		{"lower(text)", "text", "RETURN pg_catalog.lower($1);"},
	} {
		out = append(out, fn(f.sig, f.ret, f.body))
	}
	out = append(out,
		`CREATE FUNCTION trap.count_step(int8) RETURNS int8 LANGUAGE plpgsql AS $f$ BEGIN PERFORM trap.log('count(*)'); RETURN $1 OPERATOR(pg_catalog.+) 1; END $f$`,
		`CREATE AGGREGATE trap.count(*) (SFUNC = trap.count_step, STYPE = int8, INITCOND = '0')`,
		`CREATE FUNCTION trap.agg_step(text[], text) RETURNS text[] LANGUAGE plpgsql AS $f$ BEGIN PERFORM trap.log('array_agg(text)'); RETURN pg_catalog.array_append($1, $2); END $f$`,
		`CREATE AGGREGATE trap.array_agg(text) (SFUNC = trap.agg_step, STYPE = text[])`)
	for i, sig := range []struct{ l, r string }{
		{"oid", "oid"}, {"name", "name"}, {"text", "text"}, {"int4", "int4"}, {"int2", "int2"},
		{"\"char\"", "\"char\""}, {"name", "text"}, {"oid", "int4"}, {"int8", "int8"},
	} {
		for j, op := range []string{"=", "<>", ">=", "<"} {
			f := fmt.Sprintf("trap.op_%d_%d", i, j)
			out = append(out,
				fmt.Sprintf(`CREATE FUNCTION %s(%s, %s) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN PERFORM trap.log('%s %s %s'); RETURN $1 OPERATOR(pg_catalog.%s) $2; END $f$`, f, sig.l, sig.r, strings.ReplaceAll(sig.l, `"`, ""), op, strings.ReplaceAll(sig.r, `"`, ""), op),
				fmt.Sprintf("CREATE OPERATOR trap.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)", op, sig.l, sig.r, f))
		}
	}
	return out
}

// exec runs statements on c, failing the test on the first error.
func execAll(t *testing.T, c *pgx.Conn, who string, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.Exec(context.Background(), s); err != nil {
			t.Fatalf("as %s: %s: %v", who, s, err)
		}
	}
}

// inspector is a superuser session on database that sets aside what the
// tenant set there before it reads anything.
func inspector(t *testing.T, database string) *pgx.Conn {
	t.Helper()
	c := env.Postgres.SuperConnT(t, database)
	execAll(t, c, "the superuser", "SET search_path = pg_catalog, pg_temp", "SET default_transaction_read_only = off",
		"SET statement_timeout = 0", "SET transaction_read_only = off")
	return c
}

func trapLog(t *testing.T, database string) []string {
	t.Helper()
	c := inspector(t, database)
	rows, _ := c.Query(context.Background(), "SELECT who OPERATOR(pg_catalog.||) ': ' OPERATOR(pg_catalog.||) what FROM public.trap_log")
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// plantAccess: the owner opens doors to friend inside its database and on
// it (every kind of grant the cleanup removes).
func plantAccess(t *testing.T, own *pgx.Conn, db, friend string) {
	t.Helper()
	execAll(t, own, "the owner tenant",
		fmt.Sprintf("GRANT CONNECT, TEMPORARY ON DATABASE %s TO %s", db, friend),
		"CREATE TABLE IF NOT EXISTS public.data (id int, secret text)",
		"GRANT SELECT ON public.data TO "+friend,
		"GRANT UPDATE (secret) ON public.data TO "+friend,
		"CREATE SCHEMA IF NOT EXISTS app",
		"GRANT USAGE ON SCHEMA app TO "+friend,
		"CREATE OR REPLACE FUNCTION app.f(int, text[]) RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"GRANT EXECUTE ON FUNCTION app.f(int, text[]) TO "+friend,
		"CREATE SEQUENCE IF NOT EXISTS app.s",
		"GRANT USAGE ON SEQUENCE app.s TO "+friend,
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO "+friend,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT EXECUTE ON FUNCTIONS TO "+friend,
	)
	var lo uint32
	if err := own.QueryRow(context.Background(), "SELECT pg_catalog.lo_create(0::pg_catalog.oid)").Scan(&lo); err != nil {
		t.Fatal(err)
	}
	execAll(t, own, "the owner tenant", fmt.Sprintf("GRANT SELECT ON LARGE OBJECT %d TO %s", lo, friend))
}

// leftFor lists what friend still holds on and in db, as the server says.
func leftFor(t *testing.T, db, owner, friend string) []string {
	t.Helper()
	c := inspector(t, db)
	var left []string
	var n int
	q := func(what, sql string) {
		t.Helper()
		if err := c.QueryRow(context.Background(), sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n > 0 {
			left = append(left, fmt.Sprintf("%s: %d", what, n))
		}
	}
	q("database privileges", fmt.Sprintf(`SELECT count(*)::int FROM pg_database d, aclexplode(d.datacl) a
		WHERE d.datname = '%s' AND a.grantee = '%s'::regrole`, db, friend))
	q("memberships", fmt.Sprintf(`SELECT count(*)::int FROM pg_auth_members WHERE roleid = '%s'::regrole AND member = '%s'::regrole`, owner, friend))
	q("object grants", fmt.Sprintf(`SELECT count(*)::int FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid AND d.datname = current_database()
		WHERE s.deptype = 'a' AND s.refobjid = '%s'::regrole AND s.classid <> 'pg_default_acl'::regclass`, friend))
	q("default privileges", fmt.Sprintf(`SELECT count(*)::int FROM pg_default_acl da, aclexplode(da.defaclacl) a WHERE a.grantee = '%s'::regrole`, friend))
	q("sessions", fmt.Sprintf(`SELECT count(*)::int FROM pg_stat_activity WHERE datname = '%s' AND usename = '%s'`, db, friend))
	return left
}

// TestAccessCleanupRunsNoTenantCode: the tenant, owner of its database,
// opens every door the cleanup closes to another role (CONNECT and
// TEMPORARY, its role, default privileges, grants on a table, a column, a
// schema, a routine, a sequence and a large object; a session of that
// role is open), and plants a trap for every catalog function and
// operator the provider's sessions use, in a schema it puts first with
// ALTER DATABASE ... SET search_path and ALTER ROLE ... IN DATABASE ...
// SET search_path, with default_transaction_read_only on and a 1 ms
// statement_timeout for the database. Then the access cleanup, Observe,
// the login check and an extension install run: no trap runs, and every
// door is closed. A second cleanup finds nothing to do. With the
// search_path of the cleanup's session left to the tenant, the schema
// qualification of its statements alone still keeps every trap out.
func TestAccessCleanupRunsNoTenantCode(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	major, err := p.Major(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const db, friend, friend2 = "ct_owner", "ct_friend", "ct_friend2"
	pw := testenv.RandomSecret("ct-")
	provision(t, p, db, pw)
	friendPW := testenv.RandomSecret("ctf-")
	for _, r := range []string{friend, friend2} {
		if err := env.Postgres.CreateRole(ctx, r, friendPW, ""); err != nil {
			t.Fatal(err)
		}
	}
	own, err := appConn(t, db, pw, db)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close(ctx) //nolint:errcheck // test
	execAll(t, own, "the owner tenant", cleanupTraps()...)
	plantAccess(t, own, db, friend)
	adm, err := appConn(t, env.Postgres.AdminUser, env.Postgres.AdminPassword, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close(ctx) //nolint:errcheck // test
	if major < 15 {
		execAll(t, own, "the owner tenant", "GRANT ct_owner TO ct_friend") // on 14 a role may grant itself
	} else {
		execAll(t, adm, "the admin", "GRANT ct_owner TO ct_friend")
	}
	// Ending another role's sessions takes its privileges or
	// pg_signal_backend's, as the admin guide says.
	admIdent := pgx.Identifier{env.Postgres.AdminUser}.Sanitize()
	superExec(t, "postgres", "GRANT pg_signal_backend TO "+admIdent)
	t.Cleanup(func() { superExec(t, "postgres", "REVOKE pg_signal_backend FROM "+admIdent) })
	// A membership a superuser granted: from 16 on only a superuser may
	// revoke it, and the cleanup reports it.
	superExec(t, "postgres", "GRANT ct_owner TO ct_friend2")
	execAll(t, own, "the owner tenant",
		"ALTER DATABASE ct_owner SET search_path = trap, pg_catalog, public",
		"ALTER ROLE ct_owner IN DATABASE ct_owner SET search_path = trap, pg_catalog, public")
	// The traps are live: a session under the tenant's search_path runs
	// them.
	fs, err := appConn(t, friend, friendPW, db)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close(ctx) //nolint:errcheck // test
	if _, err := fs.Exec(ctx, "SELECT 1 FROM pg_catalog.pg_roles WHERE oid = 10 AND pg_get_userbyid(oid) IS NOT NULL"); err != nil {
		t.Fatal(err)
	}
	if got := trapLog(t, db); len(got) == 0 {
		t.Fatal("the planted traps did not run in a plain session: the test would prove nothing")
	}
	execAll(t, own, "the owner tenant", "TRUNCATE public.trap_log",
		"ALTER DATABASE ct_owner SET default_transaction_read_only = on",
		"ALTER DATABASE ct_owner SET statement_timeout = '1ms'")

	// The cleanup's session inside runs under its own settings, as the
	// login role, whatever the tenant set.
	got, err := postgres.InsideSettings(ctx, p, db, db)
	if err != nil {
		t.Fatalf("the cleanup's session: %v", err)
	}
	if want := []string{"pg_catalog, pg_temp", "off", "0", db}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the cleanup's session runs with search_path, default_transaction_read_only, statement_timeout, user = %q, want %q", got, want)
	}
	rep, err := p.CleanupAccess(ctx, db, db, nil)
	if err != nil {
		t.Fatalf("CleanupAccess: %v", err)
	}
	if _, err := p.Observe(ctx, db, db); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	tc, err := p.ConnectAs(ctx, db, postgres.Credential{Username: db, Password: pw})
	if err != nil {
		t.Fatalf("the login check: %v", err)
	}
	if _, err := tc.Extensions(ctx); err != nil {
		t.Fatalf("the login check's extension list: %v", err)
	}
	if err := tc.CreateExtension(ctx, "btree_gin"); err != nil {
		t.Fatalf("an extension install: %v", err)
	}
	_ = tc.Close(ctx)
	// The inspecting sessions need no 1 ms timeout of the tenant's.
	execAll(t, own, "the owner tenant", "ALTER DATABASE ct_owner RESET statement_timeout")
	if got := trapLog(t, db); len(got) > 0 {
		t.Errorf("the tenant's code ran in the provider's sessions: %v", got)
	}
	redact := strings.NewReplacer(env.Postgres.AdminUser, "<the admin>")
	if rep.DatabaseGrants != 1 || rep.Memberships == 0 || rep.DefaultPrivileges != 2 || rep.ObjectGrants < 6 || rep.Sessions != 1 {
		t.Errorf("the cleanup removed %+v, want 1 database grantee, the memberships, 2 default privileges, at least 6 object grants and 1 session", redact.Replace(fmt.Sprintf("%+v", rep)))
	}
	if left := leftFor(t, db, db, friend); len(left) > 0 {
		t.Errorf("left for %s after the cleanup: %v", friend, left)
	}
	if err := fs.Ping(ctx); err == nil {
		t.Error("the other role's session survived the cleanup")
	}
	left2 := leftFor(t, db, db, friend2)
	reported := strings.Contains(strings.Join(rep.Remaining, "\n"), friend2)
	if major >= 16 && (len(left2) == 0 || !reported) {
		t.Errorf("from 16 on, the membership a superuser granted stays (%v) and is reported: %q", left2, redact.Replace(strings.Join(rep.Remaining, "; ")))
	}
	if major < 16 && len(left2) > 0 {
		t.Errorf("before 16, the admin revokes every membership; left: %v", left2)
	}
	for _, r := range rep.Remaining {
		if strings.Contains(r, env.Postgres.AdminUser) {
			t.Errorf("a remaining entry names the admin role: %s", redact.Replace(r))
		}
	}

	// Again: nothing to do.
	again, err := p.CleanupAccess(ctx, db, db, nil)
	if err != nil {
		t.Fatalf("the second CleanupAccess: %v", err)
	}
	if again.DatabaseGrants+again.DefaultPrivileges+again.ObjectGrants+again.Sessions != 0 || (major < 16 && again.Memberships != 0) {
		t.Errorf("a second cleanup removed %+v", again)
	}

	// The schema qualification alone: the tenant's search_path applies.
	restore := postgres.UnpinCleanupSearchPath()
	defer restore()
	execAll(t, own, "the owner tenant", "ALTER DATABASE ct_owner RESET default_transaction_read_only")
	own2, err := appConn(t, db, pw, db)
	if err != nil {
		t.Fatal(err)
	}
	defer own2.Close(ctx) //nolint:errcheck // test
	execAll(t, own2, "the owner tenant", "SET statement_timeout = 0", "SET search_path = pg_catalog")
	plantAccess(t, own2, db, friend)
	if _, err := p.CleanupAccess(ctx, db, db, nil); err != nil {
		t.Fatalf("CleanupAccess under the tenant's search_path: %v", err)
	}
	restore()
	if got := trapLog(t, db); len(got) > 0 {
		t.Errorf("under the tenant's search_path, the tenant's code ran in the cleanup's session (a statement lacks a schema qualification): %v", got)
	}
	if left := leftFor(t, db, db, friend); len(left) > 0 {
		t.Errorf("left for %s after the cleanup under the tenant's search_path: %v", friend, left)
	}
}

// TestInterruptedAccessCleanupResumes: a cleanup stopped after the
// database's grants were revoked leaves the rest; run again, it finishes.
func TestInterruptedAccessCleanupResumes(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	fail := true
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM), Hook: func(point string) error {
		if fail && point == postgres.HookCleanupInside {
			return errors.New("injected fault")
		}
		return nil
	}})
	t.Cleanup(m.Close)
	p, _, err := m.Get("t/cleanup", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatal(err)
	}
	const db, friend = "cr_owner", "cr_friend"
	pw := testenv.RandomSecret("cr-")
	provision(t, p, db, pw)
	if err := env.Postgres.CreateRole(ctx, friend, testenv.RandomSecret("crf-"), ""); err != nil {
		t.Fatal(err)
	}
	own, err := appConn(t, db, pw, db)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close(ctx) //nolint:errcheck // test
	plantAccess(t, own, db, friend)

	if _, err := p.CleanupAccess(ctx, db, db, nil); err == nil {
		t.Fatal("the injected fault did not stop the cleanup")
	}
	left := strings.Join(leftFor(t, db, db, friend), ", ")
	if strings.Contains(left, "database privileges") || !strings.Contains(left, "object grants") || !strings.Contains(left, "default privileges") {
		t.Fatalf("after the fault, left: %s; want the database's grants gone and the rest there", left)
	}
	fail = false
	rep, err := p.CleanupAccess(ctx, db, db, nil)
	if err != nil {
		t.Fatalf("the resumed CleanupAccess: %v", err)
	}
	if rep.DatabaseGrants != 0 || rep.ObjectGrants == 0 || rep.DefaultPrivileges != 2 {
		t.Errorf("the resumed cleanup removed %+v", rep)
	}
	if left := leftFor(t, db, db, friend); len(left) > 0 {
		t.Errorf("left after the resumed cleanup: %v", left)
	}
}
