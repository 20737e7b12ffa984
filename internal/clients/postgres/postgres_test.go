package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// These tests talk to a real PostgreSQL server that accepts only TLS.

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{Postgres: true}, &env) }

func bundle(t testing.TB, pem []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func target(host string, mode postgres.SSLMode) postgres.Target {
	pg := env.Postgres
	return postgres.Target{Host: host, Hostaddr: pg.Hostaddr, Port: pg.Port, Database: "postgres", SSLMode: mode}
}

func admin() postgres.Credential {
	return postgres.Credential{Username: env.Postgres.AdminUser, Password: env.Postgres.AdminPassword}
}

// sslOf returns whether the provider's session of the admin role is
// encrypted, as the server sees it.
func sslOf(t *testing.T) bool {
	t.Helper()
	ctx := context.Background()
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test
	var ssl bool
	err = c.QueryRow(ctx, `SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
		WHERE a.usename = $1 AND a.application_name = $2`, env.Postgres.AdminUser, postgres.ApplicationName).Scan(&ssl)
	if err != nil {
		t.Fatal(err)
	}
	return ssl
}

func TestSSLModes(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	right, other := env.CA.CertPEM, env.OtherCA.CertPEM
	cases := map[string]struct {
		host       string
		noHostaddr bool
		mode       postgres.SSLMode
		ca         []byte
		class      postgres.Class // "" = must succeed
		message    string
	}{
		"VerifyFullByName":         {host: pg.Host, mode: postgres.SSLVerifyFull, ca: right},
		"VerifyFullByAddress":      {host: pg.Hostaddr, mode: postgres.SSLVerifyFull, ca: right},
		"VerifyFullNoHostaddr":     {host: pg.Host, noHostaddr: true, mode: postgres.SSLVerifyFull, ca: right},
		"VerifyFullWrongName":      {host: "db.example.org", mode: postgres.SSLVerifyFull, ca: right, class: postgres.ClassAuthentication, message: `does not name host "db.example.org"`},
		"VerifyFullOtherCA":        {host: pg.Host, mode: postgres.SSLVerifyFull, ca: other, class: postgres.ClassAuthentication, message: "unknown authority"},
		"VerifyCAIgnoresName":      {host: "db.example.org", mode: postgres.SSLVerifyCA, ca: right},
		"VerifyCAOtherCA":          {host: pg.Host, mode: postgres.SSLVerifyCA, ca: other, class: postgres.ClassAuthentication, message: "unknown authority"},
		"RequireVerifiesNothing":   {host: "db.example.org", mode: postgres.SSLRequire, ca: other},
		"DisableIsRefusedNotRetry": {host: pg.Host, mode: postgres.SSLDisable, ca: right, class: postgres.ClassAuthentication, message: "no encryption"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, tc.ca), ConnectTimeout: 5 * time.Second})
			defer m.Close()
			tgt := target(tc.host, tc.mode)
			if tc.noHostaddr {
				// The provider resolves host itself; the name is verified.
				tgt.Hostaddr = ""
			}
			p, _, err := m.Get("t/"+name, "uid", tgt, admin())
			if err != nil {
				t.Fatal(err)
			}
			h, err := p.Check(context.Background())
			if tc.class == "" {
				if err != nil {
					t.Fatalf("Check() = %v, want success", err)
				}
				if !h.CreateDB || !h.CreateRole || h.Superuser || !strings.HasPrefix(h.Version, pg.Version+".") {
					t.Errorf("health %+v", h)
				}
				if !sslOf(t) {
					t.Error("the session is not encrypted")
				}
				return
			}
			if err == nil {
				t.Fatalf("Check() succeeded, want %s", tc.class)
			}
			if got := postgres.ClassOf(err); got != tc.class || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("Check() = %s %q, want %s containing %q", got, err, tc.class, tc.message)
			}
			if strings.Contains(err.Error(), pg.AdminUser) || strings.Contains(err.Error(), pg.AdminPassword) {
				t.Errorf("error carries the credential: %q", err)
			}
		})
	}
}

func TestVerifyModesNeedABundle(t *testing.T) {
	testenv.Need(t)
	m := postgres.NewManager(postgres.Options{})
	defer m.Close()
	_, _, err := m.Get("t/nobundle", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if postgres.ClassOf(err) != postgres.ClassInvalid || !strings.Contains(err.Error(), "needs a CA bundle") {
		t.Errorf("Get() = %v, want InvalidSpec naming the missing CA bundle", err)
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	testenv.Need(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM), ConnectTimeout: 2 * time.Second})
	defer m.Close()
	tg := target(env.Postgres.Host, postgres.SSLVerifyFull)
	tg.Port = port
	p, _, err := m.Get("t/down", "uid", tg, admin())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Check(context.Background())
	if postgres.ClassOf(err) != postgres.ClassUnavailable || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Check() = %v, want DependencyUnavailable naming the refused connection", err)
	}
}

func TestPoolIdentity(t *testing.T) {
	testenv.Need(t)
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM)})
	defer m.Close()
	tg := target(env.Postgres.Host, postgres.SSLVerifyFull)
	p1, rebuilt, err := m.Get("t/id", "uid-1", tg, admin())
	if err != nil || !rebuilt {
		t.Fatalf("first Get: %v rebuilt=%v", err, rebuilt)
	}
	p2, rebuilt, _ := m.Get("t/id", "uid-1", tg, admin())
	if p2 != p1 || rebuilt {
		t.Error("the same inputs gave another pool")
	}
	for name, change := range map[string]func() (postgres.Target, postgres.Credential, string){
		"UID": func() (postgres.Target, postgres.Credential, string) { return tg, admin(), "uid-2" },
		"Password": func() (postgres.Target, postgres.Credential, string) {
			c := admin()
			c.Password += "x"
			return tg, c, "uid-1"
		},
		"Port": func() (postgres.Target, postgres.Credential, string) {
			t2 := tg
			t2.Port++
			return t2, admin(), "uid-1"
		},
		"SSLMode": func() (postgres.Target, postgres.Credential, string) {
			t2 := tg
			t2.SSLMode = postgres.SSLVerifyCA
			return t2, admin(), "uid-1"
		},
	} {
		closed := m.Closed()
		t2, c2, uid := change()
		p, rebuilt, err := m.Get("t/id", k8stypes.UID(uid), t2, c2)
		if err != nil || !rebuilt || p == p1 || m.Closed() != closed+1 {
			t.Errorf("%s change: err %v rebuilt %v closed %d→%d, want a new pool and the old closed", name, err, rebuilt, closed, m.Closed())
		}
		p1 = p
	}
	if _, ok := m.Lookup("t/id", "uid-other"); ok {
		t.Error("Lookup returned a pool built for another UID")
	}
	m.Remove("t/id")
	if _, ok := m.Lookup("t/id", "uid-1"); ok {
		t.Error("Lookup returned a removed pool")
	}
}

// 100 consecutive health checks of one config open at most one connection,
// counted both by the pool and by the server's connection log.
func TestHundredHealthChecksOpenOneConnection(t *testing.T) {
	testenv.Need(t)
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM)})
	defer m.Close()
	p, _, err := m.Get("t/hundred", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatal(err)
	}
	before := serverConnections(t)
	for i := 0; i < 100; i++ {
		if _, err := p.Check(context.Background()); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	if got := p.Stats().NewConns; got != 1 {
		t.Errorf("the pool opened %d connections for 100 checks, want 1", got)
	}
	if got := serverConnections(t) - before; got != 1 {
		t.Errorf("the server logged %d new provider connections for 100 checks, want 1", got)
	}
}

// serverConnections counts the provider's authorized connections in the
// server log (log_connections is on in the test server).
func serverConnections(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(env.Postgres.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "connection authorized") && strings.Contains(l, "application_name="+postgres.ApplicationName) {
			n++
		}
	}
	return n
}

// BenchmarkHealthCheck reports the cost of one health check over a warm
// pool and how many connections the run opened (conns/op stays ~0).
func BenchmarkHealthCheck(b *testing.B) {
	testenv.Need(b)
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(b, env.CA.CertPEM)})
	defer m.Close()
	p, _, err := m.Get("b/health", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	before := serverConnections(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Check(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(serverConnections(b)-before)/float64(b.N), "conns/op")
	b.ReportMetric(float64(p.Stats().NewConns), "conns-total")
}
