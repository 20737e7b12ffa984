package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// A working server stays Ready while OpenBao and ESO are down: its config
// keeps phase Ready, its Ready condition and its generation, while a Tenant
// being provisioned on it shows that a dependency is unavailable and is not
// Ready; once both are back, the Tenant is Ready and its Secret logs in.
func TestServerStaysReadyWhileOpenBaoAndESOAreDown(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "outage", "outage"
	cfg := &v1alpha1.ClusterProviderConfig{}
	if err := testenv.WaitFor(ctx, time.Minute, func(ctx context.Context) error {
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: tenantkit.Instance}, cfg); err != nil {
			return err
		}
		if cfg.Status.Phase != v1alpha1.ConfigPhaseReady {
			return fmt.Errorf("the config is %q before the outage", cfg.Status.Phase)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	generation := cfg.GetGeneration()
	if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
		t.Fatal(err)
	}

	if err := env.OpenBao.Pause(); err != nil {
		t.Fatal(err)
	}
	env.ESO.Stop()
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		if err := env.OpenBao.Resume(); err != nil {
			t.Error(err)
		}
		if err := env.ESO.Start(); err != nil {
			t.Error(err)
		}
	}
	defer restore()

	tenantkit.CreateTenant(ctx, t, env, tenantAPI, ns, name, "{instanceRef: "+tenantkit.Instance+"}")
	// The Tenant's Database waits on OpenBao and says so.
	if err := testenv.WaitFor(ctx, 90*time.Second, func(ctx context.Context) error {
		tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
		if err != nil {
			return err
		}
		if tenantkit.Ready(tn) == "True" {
			return testenv.Permanent(fmt.Errorf("the Tenant is Ready while OpenBao and ESO are down"))
		}
		db, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", "tenant-"+string(tn.GetUID()))
		if err != nil {
			return err
		}
		if st, reason, _ := tenantkit.Condition(db, "Ready"); st != "False" || reason != "DependencyUnavailable" {
			return fmt.Errorf("the Database is Ready=%s %s", st, reason)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, tenantkit.Describe(context.Background(), env, tenantAPI, ns, name))
	}
	// Meanwhile, and for a while longer, the server's config is untouched.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Status.Phase != v1alpha1.ConfigPhaseReady || cfg.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue || cfg.GetGeneration() != generation {
			t.Fatalf("during the outage the config is %s, Ready %s (%s), generation %d (was %d)", cfg.Status.Phase,
				cfg.GetCondition(xpv2.TypeReady).Status, cfg.GetCondition(xpv2.TypeReady).Reason, cfg.GetGeneration(), generation)
		}
	}

	restore()
	tenantkit.WaitTenantReady(ctx, t, env, tenantAPI, ns, name)
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.SecretName(name))
	tenantkit.DeleteTenant(ctx, t, env, tenantAPI, ns, name)
}
