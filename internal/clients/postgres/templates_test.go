package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// templateProblem is what a fresh pool's health check says of the
// template databases.
func templateProblem(t *testing.T) string {
	t.Helper()
	s, err := adminPool(t).Templates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tenancy.TemplateProblem(s)
}

// TestPlantedTemplate1NeverReachesANewDatabase: on a server where PUBLIC
// may create in template1.public (the PostgreSQL 14 default), a tenant's
// own login plants a function and a table there; the health check refuses
// the server with the statement to run, and a database the provider
// creates next holds none of it.
func TestPlantedTemplate1NeverReachesANewDatabase(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	if p := templateProblem(t); p != "" {
		t.Fatalf("the hardened test server is refused: %s", p)
	}
	p := adminPool(t)
	pw := testenv.RandomSecret("planter-")
	provision(t, p, "planter", pw)

	superExec(t, "template1", "GRANT CREATE ON SCHEMA public TO PUBLIC")
	t.Cleanup(func() {
		superExec(t, "template1", "DROP FUNCTION IF EXISTS public.planted()", "DROP TABLE IF EXISTS public.planted_t",
			"REVOKE CREATE ON SCHEMA public FROM PUBLIC")
	})
	app, err := appConn(t, "planter", pw, "template1")
	if err != nil {
		t.Fatalf("the tenant cannot connect to template1 (PUBLIC's default CONNECT): %v", err)
	}
	for _, s := range []string{
		"CREATE FUNCTION public.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"CREATE TABLE public.planted_t (x int)",
	} {
		if _, err := app.Exec(ctx, s); err != nil {
			t.Fatalf("as the tenant: %s: %v", s, err)
		}
	}
	_ = app.Close(ctx)

	problem := templateProblem(t)
	for _, want := range []string{"REVOKE CREATE ON SCHEMA public FROM PUBLIC", "connected to template1", "REVOKE CONNECT ON DATABASE template1 FROM PUBLIC"} {
		if !strings.Contains(problem, want) {
			t.Errorf("the health check does not say %q:\n%s", want, problem)
		}
	}

	createRoleAndDatabase(t, p, "victim", testenv.RandomSecret("victim-"))
	if err := p.RestrictConnect(ctx, "victim", "victim"); err != nil {
		t.Fatalf("RestrictConnect: %v", err)
	}
	sc := env.Postgres.SuperConnT(t, "victim")
	defer sc.Close(ctx) //nolint:errcheck // test
	var planted []string
	rows, err := sc.Query(ctx, `SELECT 'function ' || proname FROM pg_proc WHERE proname = 'planted'
		UNION ALL SELECT 'table ' || relname FROM pg_class WHERE relname = 'planted_t'`)
	if err != nil {
		t.Fatal(err)
	}
	if planted, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(planted) > 0 {
		t.Errorf("the new database holds what the tenant planted in template1: %v", planted)
	}
	var enc, collate, t0collate string
	if err := sc.QueryRow(ctx, `SELECT pg_encoding_to_char(d.encoding), d.datcollate::text, t0.datcollate::text
		FROM pg_database d, pg_database t0 WHERE d.datname = 'victim' AND t0.datname = 'template0'`).Scan(&enc, &collate, &t0collate); err != nil {
		t.Fatal(err)
	}
	if enc != "UTF8" || collate != t0collate {
		t.Errorf("the new database has encoding %s and LC_COLLATE %q; want UTF8 and template0's %q", enc, collate, t0collate)
	}
}

// TestHealthRefusesTemplate0AcceptingConnections: a server whose
// template0 accepts connections is refused with the statement to run.
func TestHealthRefusesTemplate0AcceptingConnections(t *testing.T) {
	testenv.Need(t)
	superExec(t, "postgres", "ALTER DATABASE template0 ALLOW_CONNECTIONS true")
	t.Cleanup(func() { superExec(t, "postgres", "ALTER DATABASE template0 ALLOW_CONNECTIONS false") })
	problem := templateProblem(t)
	if !strings.Contains(problem, "as a superuser, run ALTER DATABASE template0 ALLOW_CONNECTIONS false") || strings.Contains(problem, "template1") {
		t.Errorf("the health check says:\n%s", problem)
	}
}

// TestLoginToADatabaseNotAcceptingConnections: a database created by the
// provider accepts no connection until RestrictConnect; the server says so
// after authentication (SQLSTATE 55000), which is not a refused
// credential, while a wrong password still is.
func TestLoginToADatabaseNotAcceptingConnections(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	pw := testenv.RandomSecret("closed-")
	createRoleAndDatabase(t, p, "closed", pw)
	if c, err := p.Observe(ctx, "closed", "closed"); err != nil || !c.DatabaseExists || c.AllowConn {
		t.Fatalf("Observe after CreateDatabase = %+v, %v; want a database that accepts no connections", c, err)
	}
	_, err := p.ConnectAs(ctx, "closed", postgres.Credential{Username: "closed", Password: pw})
	var pe *postgres.Error
	if err == nil || !errors.As(err, &pe) || pe.SQLState != "55000" || pe.Class == postgres.ClassAuthentication {
		t.Fatalf("login with the right password = %v; want SQLSTATE 55000, not an authentication failure", err)
	}
	_, err = p.ConnectAs(ctx, "closed", postgres.Credential{Username: "closed", Password: "wrong"})
	if postgres.ClassOf(err) != postgres.ClassAuthentication {
		t.Fatalf("login with a wrong password = %v; want AuthenticationFailed", err)
	}
	if err := p.RestrictConnect(ctx, "closed", "closed"); err != nil {
		t.Fatal(err)
	}
	if c, err := p.Observe(ctx, "closed", "closed"); err != nil || !c.AllowConn || c.PublicConnect || !c.RoleConnect {
		t.Fatalf("Observe after RestrictConnect = %+v, %v", c, err)
	}
	tc, err := p.ConnectAs(ctx, "closed", postgres.Credential{Username: "closed", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	_ = tc.Close(ctx)
}

// foreignSessions counts the sessions of role in database, as the
// superuser sees them.
func foreignSessions(t *testing.T, database, role string) int {
	t.Helper()
	c := env.Postgres.SuperConnT(t, "postgres")
	defer c.Close(context.Background()) //nolint:errcheck // test
	n, err := testenv.SessionCount(context.Background(), c, database, role)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNoForeignSessionWhileProvisioning: another tenant's own login polls
// pg_database and connects in a loop while the provider creates a
// database, pauses (as an interruption between the creation and the
// CONNECT step would) and restricts CONNECT: it never has a session in it.
func TestNoForeignSessionWhileProvisioning(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	apw := testenv.RandomSecret("lurker-")
	provision(t, p, "lurker", apw)

	lurker := env.Postgres.Lurk(t, "lurker", apw, "lurker", "target")
	defer lurker.Stop()

	pw := testenv.RandomSecret("target-")
	createRoleAndDatabase(t, p, "target", pw)
	// Paused between the database and its CONNECT step.
	lurker.WaitTries(20, 10*time.Second)
	if err := p.RestrictConnect(ctx, "target", "target"); err != nil {
		t.Fatal(err)
	}
	tc, err := p.ConnectAs(ctx, "target", postgres.Credential{Username: "target", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	_ = tc.Close(ctx)
	time.Sleep(500 * time.Millisecond)
	left := foreignSessions(t, "target", "lurker")
	lurker.Stop()
	if n := lurker.Tries.Load(); n < 20 {
		t.Fatalf("the connect loop tried only %d times", n)
	}
	if n := lurker.Sessions.Load(); n > 0 || left > 0 {
		t.Errorf("another tenant's login had %d session(s) in the new database (%d still there after it was provisioned)", n, left)
	}
}

// TestRepairConnectEndsForeignSessions: when PUBLIC was given CONNECT on a
// tenant database and another role connected, the repair of CONNECT ends
// that session (a REVOKE alone ends none) and verifies none is left.
func TestRepairConnectEndsForeignSessions(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	provision(t, p, "drifted", testenv.RandomSecret("drifted-"))
	ipw := testenv.RandomSecret("intruder-")
	provision(t, p, "intruder", ipw)
	superExec(t, "postgres", "GRANT CONNECT ON DATABASE drifted TO PUBLIC")
	in, err := appConn(t, "intruder", ipw, "drifted")
	if err != nil {
		t.Fatalf("the drift did not let another role in: %v", err)
	}
	defer in.Close(ctx) //nolint:errcheck // test
	if c, err := p.Observe(ctx, "drifted", "drifted"); err != nil || !c.PublicConnect {
		t.Fatalf("Observe = %+v, %v", c, err)
	}
	if err := p.RestrictConnect(ctx, "drifted", "drifted"); err != nil {
		t.Fatal(err)
	}
	if n := foreignSessions(t, "drifted", "intruder"); n != 0 {
		t.Errorf("%d session(s) of a role without CONNECT are still in the database after the repair", n)
	}
	if err := in.Ping(ctx); err == nil {
		t.Error("the intruder's session still answers after the repair")
	}
}
