package delivery

import (
	"context"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// TestZZCanary runs last: no credential of the run appears in any log,
// Event or object (tenantkit.Canary), including the in-process provider's
// log.
func TestZZCanary(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenantkit.Canary(ctx, t, env, 2, map[string]string{"provider log": providerLogs.String()}, "shared-shop-postgresql")
}
