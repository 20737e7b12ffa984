package postgres_test

import (
	"context"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// Where the admin may read pg_authid (a superuser), the catalog query
// carries a digest of the role's password verifier, which changes when the
// role sets its own password: the provider sees the change without logging
// in. A non-superuser admin (and every managed service) cannot read it and
// gets none, and the query still works.
func TestObserveSeesAPasswordChangeWhereTheAdminMayReadIt(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	provision(t, p, "digest", "first-password-7f3")

	c, err := p.Observe(ctx, "digest", "digest")
	if err != nil {
		t.Fatal(err)
	}
	if c.VerifierDigest != "" {
		t.Errorf("the non-superuser admin got a verifier digest %q, want none (it may not read pg_authid)", c.VerifierDigest)
	}

	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM)})
	t.Cleanup(m.Close)
	su, _, err := m.Get("t/super", "uid-super", target(env.Postgres.Host, postgres.SSLVerifyFull),
		postgres.Credential{Username: env.Postgres.SuperUser, Password: env.Postgres.SuperPassword})
	if err != nil {
		t.Fatal(err)
	}
	before, err := su.Observe(ctx, "digest", "digest")
	if err != nil {
		t.Fatal(err)
	}
	if before.VerifierDigest == "" {
		t.Fatal("a superuser admin got no verifier digest")
	}
	if len(before.VerifierDigest) != 64 {
		t.Errorf("the digest is %d hex characters, want a SHA-256 (64): the verifier itself must not leave the server", len(before.VerifierDigest))
	}

	// The tenant changes its own password behind the provider's back.
	tc, err := appConn(t, "digest", "first-password-7f3", "digest")
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close(ctx) //nolint:errcheck // test
	if _, err := tc.Exec(ctx, "ALTER ROLE digest PASSWORD 'second-password-2c9'"); err != nil {
		t.Fatal(err)
	}
	after, err := su.Observe(ctx, "digest", "digest")
	if err != nil {
		t.Fatal(err)
	}
	if after.VerifierDigest == before.VerifierDigest {
		t.Error("the verifier digest did not change with the password")
	}
	if after.LoginFingerprint() == before.LoginFingerprint() {
		t.Error("the login fingerprint did not change with the password")
	}
}
