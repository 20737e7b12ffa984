package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RunSQL runs each statement on c, the session of who, and fails the test
// at the first error.
func RunSQL(t testing.TB, c *pgx.Conn, who string, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.Exec(context.Background(), s); err != nil {
			t.Fatalf("as %s: %s: %v", who, s, err)
		}
	}
}

// RefusedSQL runs each statement on c, the session of who, and fails the
// test unless the server refuses it for lack of privileges (SQLSTATE
// 42501): an error of any other kind (a typo, a missing table) proves
// nothing about privileges.
func RefusedSQL(t testing.TB, c *pgx.Conn, who string, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		_, err := c.Exec(context.Background(), s)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("as %s: %s: %v, want a refusal for lack of privileges (42501)", who, s, err)
		}
	}
}
