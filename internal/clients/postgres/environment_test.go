package postgres_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestPGEnvironmentCannotRedirectOrChangeTheSession: with every PG*
// variable pgx reads set against it (a service file naming another server,
// PGOPTIONS='-c search_path=evil', PGTZ, PGTARGETSESSIONATTRS=standby,
// another user, database, port, no TLS), the provider's admin pool and a
// tenant connection built from it reach the configured server over TLS as
// the configured roles, with the provider's session settings only; nothing
// connects to the address the environment names.
func TestPGEnvironmentCannotRedirectOrChangeTheSession(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	elsewhere, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer elsewhere.Close() //nolint:errcheck // test
	var conns atomic.Int64
	go func() {
		for {
			c, err := elsewhere.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_ = c.Close()
		}
	}()
	caFile := bundle(t, env.CA.CertPEM) // before HOME moves
	pw := testenv.RandomSecret("envtenant-")
	postgres.HostilePGEnvironment(t, "127.0.0.1", elsewhere.Addr().(*net.TCPAddr).Port)

	m := postgres.NewManager(postgres.Options{CABundleFile: caFile})
	defer m.Close()
	p, _, err := m.Get("t/env", "uid-env", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatalf("Get in a hostile environment: %v", err)
	}
	got, err := p.SessionForTest(ctx)
	if err != nil {
		t.Fatalf("admin session in a hostile environment: %v", err)
	}
	want := postgres.Session{
		SearchPath: postgres.SafeSearchPath, TimeZone: got.TimeZone, ApplicationName: postgres.ApplicationName,
		StatementTimeout: "0", ClientEncoding: "UTF8", DateStyle: "ISO, MDY",
		User: env.Postgres.AdminUser, Database: "postgres", Port: env.Postgres.Port, SSL: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("admin session: -want +got:\n%s", diff)
	}
	if got.TimeZone == "Pacific/Chatham" {
		t.Error("the admin session took PGTZ")
	}

	createRoleAndDatabase(t, p, "envtenant", pw)
	if err := p.RestrictConnect(ctx, "envtenant", "envtenant"); err != nil {
		t.Fatalf("RestrictConnect: %v", err)
	}
	tc, err := p.ConnectAs(ctx, "envtenant", postgres.Credential{Username: "envtenant", Password: pw})
	if err != nil {
		t.Fatalf("ConnectAs in a hostile environment: %v", err)
	}
	defer tc.Close(ctx) //nolint:errcheck // test
	got, err = tc.SessionForTest(ctx)
	if err != nil {
		t.Fatalf("tenant session: %v", err)
	}
	want.SearchPath, want.TimeZone, want.User, want.Database = postgres.TenantSearchPath, got.TimeZone, "envtenant", "envtenant"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tenant session: -want +got:\n%s", diff)
	}
	if got.TimeZone == "Pacific/Chatham" {
		t.Error("the tenant session took PGTZ")
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections reached the address the environment names", n)
	}
}
