package postgres_test

import (
	"context"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestSystemIdentifierOnThisServer: the non-superuser admin reads the
// server's system identifier (PUBLIC may execute pg_control_system() by
// default on every supported major), the same one the superuser reads; when
// EXECUTE is revoked from PUBLIC, the identity is empty and no error.
func TestSystemIdentifierOnThisServer(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	got, err := p.SystemIdentifier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	su := env.Postgres.SuperConnT(t, "postgres")
	var want string
	if err := su.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got == "" || got != want {
		t.Fatalf("SystemIdentifier() = %q, want the superuser's %q", got, want)
	}

	if _, err := su.Exec(ctx, "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_control_system() FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = su.Exec(context.Background(), "GRANT EXECUTE ON FUNCTION pg_catalog.pg_control_system() TO PUBLIC")
	})
	got, err = p.SystemIdentifier(ctx)
	if err != nil || got != "" {
		t.Errorf("without EXECUTE: SystemIdentifier() = %q, %v; want \"\" and no error", got, err)
	}
}
