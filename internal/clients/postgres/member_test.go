package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// staleOnce returns a pool whose next n statements that need the admin's
// membership in a tenant role are refused before they reach the server
// the way a session acting on an outdated list of its memberships refuses
// them (SQLSTATE 42501), and a function that arms it.
func staleOnce(t *testing.T, name string) (*postgres.Pool, func(n int32)) {
	t.Helper()
	var left atomic.Int32
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM), Hook: func(point string) error {
		if point == postgres.HookMember && left.Add(-1) >= 0 {
			return &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: "must be able to SET ROLE (injected)"}
		}
		return nil
	}})
	t.Cleanup(m.Close)
	p, _, err := m.Get("t/"+name, types.UID("uid-"+name), target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatal(err)
	}
	return p, func(n int32) { left.Store(n) }
}

// TestStaleSessionIsClosedAndTheStatementRetried: when the server refuses
// a statement for lack of a membership that pg_auth_members shows the
// admin holds, the session is closed and the statement runs on another
// one, so provisioning goes on instead of failing (and, with the same idle
// session handed out again, failing for as long as no role changes).
func TestStaleSessionIsClosedAndTheStatementRetried(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p, stale := staleOnce(t, "stale")
	v, _ := scram.Verifier(testenv.RandomSecret("s-"))
	if err := p.CreateRole(ctx, "stale_role", v); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"CreateDatabase", func() error { return p.CreateDatabase(ctx, "stale_role", "stale_role") }},
		{"RestrictConnect", func() error { return p.RestrictConnect(ctx, "stale_role", "stale_role") }},
		{"SetDatabaseOwner", func() error { return p.SetDatabaseOwner(ctx, "stale_role", "stale_role") }},
		{"TerminateRoleSessions", func() error { _, err := p.TerminateRoleSessions(ctx, "stale_role"); return err }},
	}
	for _, s := range steps {
		doneDespiteOneStale(t, stale, s.name, s.do)
	}
	c, err := p.Observe(ctx, "stale_role", "stale_role")
	if err != nil || !c.DatabaseExists || c.Owner != "stale_role" || c.PublicConnect || !c.RoleConnect {
		t.Fatalf("after the steps: %+v, %v; want the database owned by the role, CONNECT only for it", c, err)
	}
	doneDespiteOneStale(t, stale, "TerminateSessions", func() error { _, err := p.TerminateSessions(ctx, "stale_role", "stale_role"); return err })
	doneDespiteOneStale(t, stale, "DropDatabase", func() error { return p.DropDatabase(ctx, "stale_role", "stale_role") })
	if c, err := p.Observe(ctx, "stale_role", "stale_role"); err != nil || c.DatabaseExists {
		t.Fatalf("after DropDatabase: %+v, %v; want no database", c, err)
	}

	// Every session stale: the attempts end (one more than the pool has
	// sessions) and the refusal is returned as it is.
	stale(100)
	t.Cleanup(func() { stale(0) })
	err = p.CreateDatabase(ctx, "stale_role_2", "stale_role")
	if postgres.ClassOf(err) != postgres.ClassPrivileges {
		t.Fatalf("CreateDatabase with every session stale = %v; want InsufficientPrivileges", err)
	}
}

// doneDespiteOneStale runs do with one stale session armed: it must
// succeed, and close exactly that session.
func doneDespiteOneStale(t *testing.T, stale func(int32), name string, do func() error) {
	t.Helper()
	before := testutil.ToFloat64(metrics.StaleAdminSessions)
	stale(1)
	if err := do(); err != nil {
		t.Fatalf("%s with one stale session: %v; want it done on another session", name, err)
	}
	if got := testutil.ToFloat64(metrics.StaleAdminSessions) - before; got != 1 {
		t.Errorf("%s: %v sessions closed, want 1", name, got)
	}
}

// TestRealLackOfPrivilegesIsReported: a tenant role the admin is not a
// member of is a real lack of privileges. It is reported at once, without
// closing a session; and a REVOKE/GRANT of CONNECT the server answers
// with a warning (changing nothing) is an error, not a success.
func TestRealLackOfPrivilegesIsReported(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	superExec(t, "postgres",
		`DROP DATABASE IF EXISTS outsider_db`, `DROP ROLE IF EXISTS outsider`,
		`CREATE ROLE outsider LOGIN`, `CREATE DATABASE outsider_db OWNER outsider`)
	t.Cleanup(func() {
		superExec(t, "postgres", `DROP DATABASE IF EXISTS outsider_db`, `DROP ROLE IF EXISTS outsider`)
	})
	p, _ := staleOnce(t, "outsider")
	before := testutil.ToFloat64(metrics.StaleAdminSessions)

	err := p.RestrictConnect(ctx, "outsider_db", "outsider")
	if postgres.ClassOf(err) != postgres.ClassPrivileges || !strings.Contains(err.Error(), "did not apply") {
		t.Fatalf("RestrictConnect on a database of a role the admin is no member of = %v; want InsufficientPrivileges saying it was not applied", err)
	}
	c, err := p.Observe(ctx, "outsider_db", "outsider")
	if err != nil || !c.PublicConnect {
		t.Fatalf("after the refused RestrictConnect: %+v, %v; want PUBLIC's CONNECT untouched", c, err)
	}
	err = p.CreateDatabase(ctx, "outsider_db2", "outsider")
	var pe *postgres.Error
	if !errors.As(err, &pe) || pe.SQLState != "42501" {
		t.Fatalf("CreateDatabase owned by a role the admin is no member of = %v; want SQLSTATE 42501", err)
	}
	if got := testutil.ToFloat64(metrics.StaleAdminSessions) - before; got != 0 {
		t.Errorf("%v sessions closed for a real lack of privileges, want 0", got)
	}
}
