package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// TestZZCanary runs last: no credential of the whole run appears in any log
// (every run of the provider's container included, and the node's: the
// kubelet's, containerd's, the function Pod's), Event, object, or the
// provider's metrics scrape; and the scrape shows the failure classes the
// suite caused.
func TestZZCanary(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scrape, err := prov.scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(scrape, "provider_postgresql_tenant_failures_total") {
		t.Error("the metrics scrape lacks the failure-class counter: the check would prove little")
	}
	// The provider's log (testenv.ProviderPodControl copies every run of
	// its container there, in the run's directory, which Canary reads)
	// must hold the runs the suite made, the killed ones included.
	prov.SyncLogs()
	b, err := os.ReadFile(prov.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if runs := strings.Count(string(b), `"Starting"`); runs < 10 || !strings.Contains(string(b), "FAULT INJECTION ENABLED") {
		t.Errorf("the provider's log holds %d starts (fault injection: %v): want every run of the suite's, the killed ones included: the check would prove little",
			runs, strings.Contains(string(b), "FAULT INJECTION ENABLED"))
	}
	extra := map[string]string{"provider metrics": scrape}
	for _, dir := range []string{env.Node.PodLogs, filepath.Join(env.Node.Dir, "logs")} {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, err := os.ReadFile(p); err == nil { //nolint:gosec // the run's own logs
					extra[p] = string(b)
				}
			}
			return nil
		})
	}
	tenantkit.Canary(ctx, t, env, 8, extra, "ExternalSecret")
}
