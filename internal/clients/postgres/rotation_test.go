package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func answers(c *pgx.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Exec(ctx, "SELECT 1")
	return err == nil
}

// TestRotationStatements: the non-superuser admin replaces a tenant role's
// password with a verifier (never a clear-text password), which ends no
// session by itself; ending the role's sessions ends exactly those.
func TestRotationStatements(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	oldPW, newPW := testenv.RandomSecret("o-"), testenv.RandomSecret("n-")
	provision(t, p, "rot_stmt", oldPW)
	app, err := appConn(t, "rot_stmt", oldPW, "rot_stmt")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // ended by the server

	if err := p.SetRolePassword(ctx, "rot_stmt", newPW); err == nil || !strings.Contains(err.Error(), "not a SCRAM-SHA-256 verifier") {
		t.Fatalf("SetRolePassword with a clear-text password = %v, want a refusal", err)
	}
	if c, err := appConn(t, "rot_stmt", newPW, "rot_stmt"); err == nil {
		_ = c.Close(ctx)
		t.Fatal("a refused clear-text password logs in")
	}
	v, _ := scram.Verifier(newPW)
	if err := p.SetRolePassword(ctx, "rot_stmt", v); err != nil {
		t.Fatal(err)
	}
	if c, err := appConn(t, "rot_stmt", oldPW, "rot_stmt"); err == nil {
		_ = c.Close(ctx)
		t.Error("the old password still logs in")
	}
	c, err := appConn(t, "rot_stmt", newPW, "rot_stmt")
	if err != nil {
		t.Fatalf("the new password does not log in: %v", err)
	}
	defer c.Close(ctx) //nolint:errcheck // ended by the server
	if !answers(app) {
		t.Fatal("setting the password ended the old session")
	}
	// The role's sessions that ended a moment ago (provisioning's proof,
	// the two refused logins) stay listed until their backends exit: wait
	// until the two open ones are all, so that the count is theirs.
	testenv.AwaitSessions(t, env.Postgres.SuperConnT(t, "postgres"), "", "rot_stmt", 2, 10*time.Second)
	n, err := p.TerminateRoleSessions(ctx, "rot_stmt")
	if err != nil || n != 2 {
		t.Fatalf("TerminateRoleSessions = %d, %v; want the 2 sessions of the role", n, err)
	}
	if answers(app) || answers(c) {
		t.Error("a session of the role survived")
	}
	// The admin's own sessions are never counted nor ended.
	if _, err := p.Observe(ctx, "rot_stmt", "rot_stmt"); err != nil {
		t.Errorf("the admin pool after ending the role's sessions: %v", err)
	}
}

// TestTerminateRefusedWithoutTheRolesPrivileges: without membership in the
// role (nor pg_signal_backend) the server refuses, classified so that the
// reason names the missing privilege, and the session stays.
func TestTerminateRefusedWithoutTheRolesPrivileges(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	pw := testenv.RandomSecret("f-")
	if err := env.Postgres.CreateRole(ctx, "rot_foreign", pw, ""); err != nil {
		t.Fatal(err)
	}
	s, err := appConn(t, "rot_foreign", pw, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx) //nolint:errcheck // test
	_, err = p.TerminateRoleSessions(ctx, "rot_foreign")
	if postgres.ClassOf(err) != postgres.ClassPrivileges {
		t.Fatalf("TerminateRoleSessions without the role's privileges = %v (class %q), want InsufficientPrivileges", err, postgres.ClassOf(err))
	}
	if !answers(s) {
		t.Error("the session was ended although the server refused")
	}
}

// TestTerminateSparesTheCallersSession: asked to end the sessions of the
// role it runs as, the admin ends the others and never its own backend.
func TestTerminateSparesTheCallersSession(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	other, err := appConn(t, env.Postgres.AdminUser, env.Postgres.AdminPassword, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx) //nolint:errcheck // ended by the server
	n, err := p.TerminateRoleSessions(ctx, env.Postgres.AdminUser)
	if err != nil || n < 1 {
		t.Fatalf("TerminateRoleSessions of the caller's own role = %d, %v; want the other session ended and no error", n, err)
	}
	if answers(other) {
		t.Error("the other session of the role survived")
	}
}

// TestLimitAfterAuthentication: a login refused by the role's or the
// database's full connection limit is told apart from one refused before
// authentication (a wrong password), by the server function that raised
// it, on every major; the password is proven only in the first case.
func TestLimitAfterAuthentication(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	pw := testenv.RandomSecret("l-")
	provision(t, p, "rot_limit", pw)
	su := env.Postgres.SuperConnT(t, "postgres")
	// A session of the role closed a moment ago (provisioning's own proof)
	// is counted until its backend has exited: wait for none, so that the
	// limit of 1 is the app's.
	testenv.AwaitSessions(t, su, "", "rot_limit", 0, 10*time.Second)
	if _, err := su.Exec(ctx, "ALTER ROLE rot_limit CONNECTION LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	app, err := appConn(t, "rot_limit", pw, "rot_limit")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // test
	connect := func(password string) error {
		c, err := p.ConnectAs(ctx, "rot_limit", postgres.Credential{Username: "rot_limit", Password: password})
		if err == nil {
			_ = c.Close(ctx)
		}
		return err
	}
	if err := connect(pw); !postgres.LimitAfterAuthentication(err) {
		t.Errorf("the role's limit full: %v, want a refusal after authentication", err)
	}
	if err := connect("wrong-" + pw); err == nil || postgres.LimitAfterAuthentication(err) {
		t.Errorf("a wrong password with the role's limit full: %v, want a refusal before authentication", err)
	}
	if _, err := su.Exec(ctx, "ALTER ROLE rot_limit CONNECTION LIMIT -1"); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "ALTER DATABASE rot_limit CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	if err := connect(pw); !postgres.LimitAfterAuthentication(err) {
		t.Errorf("the database's limit 0: %v, want a refusal after authentication", err)
	}

	// SetRolePasswordEndingSessions ends the role's sessions with the new
	// password in place.
	if _, err := su.Exec(ctx, "ALTER DATABASE rot_limit CONNECTION LIMIT -1"); err != nil {
		t.Fatal(err)
	}
	newPW := testenv.RandomSecret("n-")
	v, _ := scram.Verifier(newPW)
	// The refused logins' backends stay listed until they exit: wait until
	// the app's session is the role's only one, so that the count is its.
	testenv.AwaitSessions(t, su, "", "rot_limit", 1, 10*time.Second)
	n, err := p.SetRolePasswordEndingSessions(ctx, "rot_limit", v)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || answers(app) {
		t.Errorf("%d sessions ended, the old session answers: %v", n, answers(app))
	}
	if err := connect(newPW); err != nil {
		t.Errorf("the new password: %v", err)
	}
	if err := connect(pw); err == nil {
		t.Error("the old password still logs in")
	}
}

// TestTooManyClientsIsNotAfterAuthentication: the server's own limit
// (max_connections, SQLSTATE 53300 too) is raised before authentication
// and proves nothing.
func TestTooManyClientsIsNotAfterAuthentication(t *testing.T) {
	for routine, want := range map[string]bool{"InitializeSessionUserId": true, "CheckMyDatabase": true, "InitProcess": false, "BackendStartup": false, "": false} {
		err := postgres.Classify(&pgconn.PgError{Code: "53300", Message: "too many", Routine: routine})
		if got := postgres.LimitAfterAuthentication(err); got != want {
			t.Errorf("53300 raised by %q: after authentication %v, want %v", routine, got, want)
		}
	}
	if postgres.LimitAfterAuthentication(postgres.Classify(&pgconn.PgError{Code: "28P01", Routine: "InitializeSessionUserId"})) {
		t.Error("a refused password counts as a full connection limit")
	}
}
