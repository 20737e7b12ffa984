package monitoring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

var (
	env *testenv.Env
	// prov is the provider process, scraped by the tests.
	prov *testenv.Provider
)

// adminSecret holds the test server's admin credential.
const adminSecret = "monitoring-admin"

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Kube: true, Postgres: true, OpenBao: true, TenantCRDs: true}, &env, start)
}

func start(e *testenv.Env) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := testenv.BuildProvider(ctx, e.Dir)
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ProviderNamespace, Name: adminSecret},
		StringData: map[string]string{"username": e.Postgres.AdminUser, "password": e.Postgres.AdminPassword},
	}
	if err := e.Kube.Client.Create(ctx, s); err != nil {
		return nil, err
	}
	// The state gauges are taken every second, so an alert follows a
	// status change within a scrape or two.
	p, err := testenv.StartProvider(ctx, e, testenv.ProviderOptions{Bin: bin, Args: []string{"--poll-state-metric=1s"}})
	if err != nil {
		return nil, err
	}
	prov = p
	return p.Stop, nil
}

// createConfig registers the test server as name, on port (0: the
// server's own).
func createConfig(ctx context.Context, t *testing.T, name string, port int) *v1alpha1.ClusterProviderConfig {
	t.Helper()
	pg := env.Postgres
	if port == 0 {
		port = pg.Port
	}
	c := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: pg.Host, Hostaddr: pg.Hostaddr, Port: int32(port)}, //nolint:gosec // a TCP port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: adminSecret}},
		},
	}
	if err := env.Kube.Client.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Kube.Client.Delete(context.Background(), c) })
	return c
}

// createDatabase creates the Database name (database and role
// monitoring_<n>) on config; deleted, without waiting, when the test ends.
func createDatabase(ctx context.Context, t *testing.T, name, config string) {
	t.Helper()
	db := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, `
apiVersion: database.ayatori.ddupan.top/v1alpha1
kind: Database
metadata:
  name: %s
spec:
  providerConfigRef:
    name: %s
  forProvider:
    database: %s
`, name, config, strings.ReplaceAll(name, "-", "_")), &db.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Kube.Client.Delete(context.Background(), db) })
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	p, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// prometheus is a Prometheus server started by a test.
type prometheus struct {
	addr string
	done chan struct{}
}

// startPrometheus runs the Debian prometheus binary on a free loopback
// port with a temporary data directory, scraping the provider and
// evaluating the shipped rules every second, each `for` shortened to
// forDuration.
func startPrometheus(ctx context.Context, t *testing.T, forDuration string) *prometheus {
	t.Helper()
	bin := tool(t, "prometheus")
	d := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir(), rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	shortened := regexp.MustCompile(`(?m)^(\s+for:\s*).+$`).ReplaceAll(b, []byte("${1}"+forDuration))
	if err := os.WriteFile(filepath.Join(d, rulesFile), shortened, 0o600); err != nil { //nolint:gosec // the test's temporary directory and a fixed name
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
- %s
scrape_configs:
- job_name: provider-postgresql-tenant
  static_configs:
  - targets: [%q]
`, rulesFile, prov.Metrics)
	if err := os.WriteFile(filepath.Join(d, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &prometheus{addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	logf, err := os.Create(filepath.Join(d, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, //nolint:noctx // the test stops it
		"--config.file="+filepath.Join(d, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(d, "data"),
		"--web.listen-address="+p.addr,
		"--log.level=warn")
	cmd.Dir = d
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		testenv.Terminate(cmd.Process, p.done, 10*time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(d, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})
	if err := testenv.WaitFor(ctx, time.Minute, func(ctx context.Context) error {
		_, err := p.get(ctx, "/-/ready")
		return err
	}); err != nil {
		t.Fatalf("prometheus not ready: %v", err)
	}
	return p
}

func (p *prometheus) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	return b, err
}

// alert is one entry of /api/v1/alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// alerts are the pending and firing alerts Prometheus reports.
func (p *prometheus) alerts(ctx context.Context) ([]alert, error) {
	b, err := p.get(ctx, "/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("/api/v1/alerts: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("/api/v1/alerts: %s", b)
	}
	return r.Data.Alerts, nil
}

// query runs an instant query and returns the number of series.
func (p *prometheus) query(ctx context.Context, q string) (int, error) {
	b, err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("query %q: %w", q, err)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query %q: %s", q, b)
	}
	return len(r.Data.Result), nil
}

// find returns the alert named name whose labels include match.
func find(as []alert, name string, match map[string]string) *alert {
	for i, a := range as {
		if a.Labels["alertname"] != name {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && a.Labels[k] == v
		}
		if ok {
			return &as[i]
		}
	}
	return nil
}

// A real Prometheus scraping the provider fires PostgreSQLTenantServerNotReady
// for a ClusterProviderConfig pointed at a closed port, and only for it,
// and PostgreSQLTenantDatabaseNotReady for a Database on it; once the config
// points at the server, the config is Ready, the Database is made and both
// alerts resolve. Every dashboard query returns data at one of those
// moments.
func TestAlertFiresAndResolves(t *testing.T) {
	testenv.Need(t)
	ctx := ctxT(t)
	createConfig(ctx, t, "monitoring-healthy", 0)
	broken := createConfig(ctx, t, "monitoring-alert", closedPort(t))
	createDatabase(ctx, t, "monitoring-alert", broken.Name)
	p := startPrometheus(ctx, t, "3s")

	const serverNotReady, databaseNotReady = "PostgreSQLTenantServerNotReady", "PostgreSQLTenantDatabaseNotReady"
	t0 := time.Now()
	if err := testenv.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		as, err := p.alerts(ctx)
		if err != nil {
			return err
		}
		if a := find(as, serverNotReady, map[string]string{"config": "monitoring-healthy"}); a != nil {
			return testenv.Permanent(fmt.Errorf("%s is %s for the healthy config", serverNotReady, a.State))
		}
		if a := find(as, serverNotReady, map[string]string{"config": broken.Name, "severity": "critical"}); a == nil || a.State != "firing" {
			return fmt.Errorf("%s for %s not firing: %+v", serverNotReady, broken.Name, as)
		}
		if a := find(as, databaseNotReady, map[string]string{"reason": "InstanceNotReady", "severity": "warning"}); a == nil || a.State != "firing" {
			return fmt.Errorf("%s (InstanceNotReady) not firing: %+v", databaseNotReady, as)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s and %s fired %s after the config and the Database were created", serverNotReady, databaseNotReady, time.Since(t0).Round(time.Second))
	seen := map[string]bool{}
	for _, q := range dashboardQueries(t) {
		seen[q] = dashboardData(ctx, p, q, 5*time.Second) == nil
	}

	// Fixed: pointed at the server, the config becomes Ready, the Database
	// is made, and the alerts resolve.
	if err := env.Kube.Client.Patch(ctx, broken, client.RawPatch("application/merge-patch+json",
		fmt.Appendf(nil, `{"spec":{"endpoint":{"port":%d}}}`, env.Postgres.Port))); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	// The Database's retries after InstanceNotReady back off (up to a
	// minute) while the config is broken: allow for that on a busy machine.
	if err := testenv.WaitFor(ctx, 4*time.Minute, func(ctx context.Context) error {
		as, err := p.alerts(ctx)
		if err != nil {
			return err
		}
		if a := find(as, serverNotReady, map[string]string{"config": broken.Name}); a != nil {
			return fmt.Errorf("%s still %s: %v", serverNotReady, a.State, a.Labels)
		}
		// Counted over all Databases: no other test leaves one not Ready
		// before this one.
		for _, name := range []string{databaseNotReady, "PostgreSQLTenantProviderAbsent"} {
			if a := find(as, name, nil); a != nil {
				return fmt.Errorf("%s still %s: %v", name, a.State, a.Labels)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s and %s resolved %s after the config was fixed", serverNotReady, databaseNotReady, time.Since(t1).Round(time.Second))

	// ... and every dashboard query has returned data from the scraped
	// provider: the not-Ready panels while the alerts fired, the
	// time-to-Ready panel once a Database has become Ready.
	for _, q := range dashboardQueries(t) {
		if !seen[q] {
			if err := dashboardData(ctx, p, q, 30*time.Second); err != nil {
				t.Errorf("dashboard query %q: %v", q, err)
			}
		}
	}
}

// Every metric the alert rules and the dashboard read is one the running
// provider exports (a histogram's _bucket as such): with a server
// registered that it cannot reach and a Database on it, so that the
// failure counter and the not-Ready gauge have series too. It runs after
// TestAlertFiresAndResolves, which needs every Database Ready at its end.
func TestEveryMetricReadIsExported(t *testing.T) {
	testenv.Need(t)
	ctx := ctxT(t)
	createConfig(ctx, t, "monitoring-names", closedPort(t))
	createDatabase(ctx, t, "monitoring-names", "monitoring-names")
	used := usedMetrics(t)
	var gaps []string
	err := testenv.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		page, err := prov.Scrape(ctx)
		if err != nil {
			return err
		}
		if gaps = missing(used, page); len(gaps) > 0 {
			return fmt.Errorf("%d metric(s) not exported", len(gaps))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v; the provider does not export:\n  %s", err, strings.Join(gaps, "\n  "))
	}
	t.Logf("%d metric names read by the rules and the dashboard, all exported", len(used))
}

// dashboardData waits up to timeout for the dashboard query q (Grafana's
// variables replaced) to return a series; a Grafana variable query counts
// as data (its metric is checked by TestEveryMetricReadIsExported).
func dashboardData(ctx context.Context, p *prometheus, q string, timeout time.Duration) error {
	q = strings.NewReplacer("$__rate_interval", "1m", "$job", ".*").Replace(q)
	if strings.HasPrefix(q, "label_values(") {
		return nil
	}
	return testenv.WaitFor(ctx, timeout, func(ctx context.Context) error {
		n, err := p.query(ctx, q)
		if err == nil && n == 0 {
			err = errors.New("no series")
		}
		return err
	})
}
