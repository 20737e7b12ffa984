package v1alpha1_test

import (
	"testing"

	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func limitsAll() *v1alpha1.TenantLimits {
	return &v1alpha1.TenantLimits{
		ConnectionLimit: ptr.To[int32](10), StatementTimeout: ptr.To("30s"), LockTimeout: ptr.To("5000"),
		IdleInTransactionSessionTimeout: ptr.To("10min"), IdleSessionTimeout: ptr.To("0"), WorkMem: ptr.To("4MB"),
	}
}

// Limits are accepted on the config (defaults) and on a Database
// (overrides), and refused at admission when the server could not take
// them or they would lock the role out.
func TestTenantLimitsAdmission(t *testing.T) {
	testenv.Need(t)
	t.Run("Valid", func(t *testing.T) {
		ctx, c := setup(t)
		if err := c.Create(ctx, cpc(func(c *v1alpha1.ClusterProviderConfig) { c.Spec.TenantLimits = limitsAll() })); err != nil {
			t.Errorf("config with every limit: %v", err)
		}
		if err := c.Create(ctx, db(func(d *v1alpha1.Database) {
			d.Spec.ForProvider.Limits = &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](-1), StatementTimeout: ptr.To("0")}
		})); err != nil {
			t.Errorf("Database lifting the limits: %v", err)
		}
	})
	cases := map[string]struct {
		l     v1alpha1.TenantLimits
		field string
		msgs  []string
	}{
		"ConnectionLimitZero":  {l: v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](0)}, field: "connectionLimit", msgs: []string{"would refuse every login"}},
		"ConnectionLimitBelow": {l: v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](-2)}, field: "connectionLimit", msgs: []string{"greater than or equal to -1"}},
		"TimeoutWithSpace":     {l: v1alpha1.TenantLimits{StatementTimeout: ptr.To("30 s")}, field: "statementTimeout", msgs: []string{"should match"}},
		"TimeoutInjected":      {l: v1alpha1.TenantLimits{LockTimeout: ptr.To("1s';--")}, field: "lockTimeout", msgs: []string{"should match"}},
		"TimeoutUnknownUnit":   {l: v1alpha1.TenantLimits{IdleSessionTimeout: ptr.To("1w")}, field: "idleSessionTimeout", msgs: []string{"should match"}},
		"WorkMemLowercaseUnit": {l: v1alpha1.TenantLimits{WorkMem: ptr.To("4mb")}, field: "workMem", msgs: []string{"should match"}},
		"WorkMemZero":          {l: v1alpha1.TenantLimits{WorkMem: ptr.To("0")}, field: "workMem", msgs: []string{"should match"}},
	}
	for name, tc := range cases {
		t.Run("Config"+name, func(t *testing.T) {
			ctx, c := setup(t)
			l := tc.l
			wantRejected(t, c.Create(ctx, cpc(func(c *v1alpha1.ClusterProviderConfig) { c.Spec.TenantLimits = &l })), "spec.tenantLimits."+tc.field, tc.msgs...)
		})
		t.Run("Database"+name, func(t *testing.T) {
			ctx, c := setup(t)
			l := tc.l
			wantRejected(t, c.Create(ctx, db(func(d *v1alpha1.Database) { d.Spec.ForProvider.Limits = &l })), "spec.forProvider.limits."+tc.field, tc.msgs...)
		})
	}
}
