package postgres_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func TestParseMajorAndSupported(t *testing.T) {
	for v, want := range map[string]int{"17.10": 17, "15.18 (Debian 15.18-0+deb12u1)": 15, "18beta1": 18, "9.6.24": 9, "": 0, "x": 0} {
		got, ok := postgres.ParseMajor(v)
		if got != want || ok != (want > 0) {
			t.Errorf("ParseMajor(%q) = %d, %v; want %d", v, got, ok, want)
		}
	}
	for major, ok := range map[int]bool{9: false, 13: false, 14: true, 18: true, 19: true} {
		err := postgres.Supported(strconv.Itoa(major)+".1", major)
		if (err == nil) != ok {
			t.Errorf("Supported(%d) = %v", major, err)
		}
		if err != nil && (postgres.ClassOf(err) != postgres.ClassUnsupported || !strings.Contains(err.Error(), "supports PostgreSQL 14 to 18")) {
			t.Errorf("Supported(%d) = %v (%s)", major, err, postgres.ClassOf(err))
		}
	}
}

func TestPrivilegesByMajor(t *testing.T) {
	base := postgres.Health{CreateDB: true, CreateRole: true, Inherit: true, SelfGrant: true}
	cases := map[string]struct {
		h    func(postgres.Health) postgres.Health
		want string // "" = passes
	}{
		"AllThere15":        {h: func(h postgres.Health) postgres.Health { h.Major = 15; return h }},
		"NoInherit15":       {h: func(h postgres.Health) postgres.Health { h.Major, h.Inherit = 15, false; return h }, want: "lacks INHERIT"},
		"NoInherit16IsFine": {h: func(h postgres.Health) postgres.Health { h.Major, h.Inherit = 16, false; return h }},
		"NoCreateRole":      {h: func(h postgres.Health) postgres.Health { h.Major, h.CreateRole = 17, false; return h }, want: "lacks CREATEROLE"},
		"NoSelfGrant17": {h: func(h postgres.Health) postgres.Health {
			h.Major, h.SelfGrant, h.SelfGrantProblem = 17, false, "GRANT failed"
			return h
		}, want: "WITH INHERIT TRUE and SET TRUE"},
		"Superuser": {h: func(postgres.Health) postgres.Health {
			return postgres.Health{Major: 17, Superuser: true}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.h(base).Privileges()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Privileges() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHealthOnThisServer: the check on the real server reads its major, the
// pinned search_path, and passes for the test's CREATEDB CREATEROLE admin.
func TestHealthOnThisServer(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	h, err := adminPool(t).Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(h.Major) != env.Postgres.Version || h.SearchPath != postgres.SafeSearchPath || !h.Inherit || !h.SelfGrant {
		t.Errorf("Check() = %+v on PostgreSQL %s", h, env.Postgres.Version)
	}
	if err := h.Privileges(); err != nil {
		t.Errorf("Privileges() = %v", err)
	}
}

// TestAdminPreflightOnThisServer runs the health check as admins that lack
// something, on the real server: NOINHERIT (refused before 16, where it is
// needed; provisioning works from 16 on, where each grant carries INHERIT)
// and no CREATEROLE (the 16+ probe fails and says why).
func TestAdminPreflightOnThisServer(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	pg := env.Postgres
	major, _ := strconv.Atoi(pg.Version)
	pool := func(t *testing.T, user, pw string) *postgres.Pool {
		m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM)})
		t.Cleanup(m.Close)
		p, _, err := m.Get("t/"+user, "uid", target(pg.Host, postgres.SSLVerifyFull), postgres.Credential{Username: user, Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("NoInherit", func(t *testing.T) {
		pw := testenv.RandomSecret("ni-")
		if err := pg.CreateRole(ctx, "admin_noinherit", pw, "NOSUPERUSER CREATEDB CREATEROLE NOINHERIT"); err != nil {
			t.Fatal(err)
		}
		p := pool(t, "admin_noinherit", pw)
		h, err := p.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = h.Privileges()
		if major < 16 {
			if err == nil || !strings.Contains(err.Error(), "INHERIT") || strings.Contains(err.Error(), "admin_noinherit") {
				t.Fatalf("Privileges() on %d = %v, want INHERIT named and the admin role not", major, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Privileges() on %d = %v", major, err)
		}
		// From 16 on, the whole lifecycle works for a NOINHERIT admin.
		name := "noinherit_tenant"
		provision(t, p, name, testenv.RandomSecret("nt-"))
		c, err := p.Observe(ctx, name, name)
		if err != nil || !c.AdminMember || !c.AdminCanAdmin {
			t.Fatalf("Observe = %+v, %v", c, err)
		}
		if _, err := p.TerminateSessions(ctx, name, name); err != nil {
			t.Fatal(err)
		}
		if err := p.DropDatabase(ctx, name, name); err != nil {
			t.Fatal(err)
		}
		if c, _ := p.Observe(ctx, name, name); c.DatabaseExists {
			t.Fatal("DROP DATABASE as a NOINHERIT admin changed nothing")
		}
		if err := p.DropRole(ctx, name); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NoCreateRole", func(t *testing.T) {
		pw := testenv.RandomSecret("ncr-")
		if err := pg.CreateRole(ctx, "admin_nocreaterole", pw, "NOSUPERUSER CREATEDB"); err != nil {
			t.Fatal(err)
		}
		h, err := pool(t, "admin_nocreaterole", pw).Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = h.Privileges()
		if err == nil || !strings.Contains(err.Error(), "CREATEROLE") {
			t.Fatalf("Privileges() = %v", err)
		}
		if major >= 16 && (h.SelfGrant || !strings.Contains(h.SelfGrantProblem, "permission denied")) {
			t.Errorf("the 16+ probe passed for an admin without CREATEROLE: %+v", h)
		}
	})
}
