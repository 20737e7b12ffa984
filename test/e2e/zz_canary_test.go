package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// TestZZCanary runs last: no credential of the whole run appears in any log
// (the provider process's included), Event, object, or the provider's
// metrics scrape; and the scrape shows the failure classes the suite caused.
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
	tenantkit.Canary(ctx, t, env, 8, map[string]string{"provider metrics": scrape}, "ExternalSecret")
}
