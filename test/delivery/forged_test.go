package delivery

import (
	"context"
	"fmt"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// Status is a report, never an input: a Tenant on a server the provider
// cannot reach, with the server's config and the Tenant both forged Ready
// in their status, gets no ExternalSecret, no Database and no Secret; the
// provider and Crossplane write the real state back.
func TestForgedPhasesSkipNothing(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "forged", "forged"
	port, err := testenv.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	cfg := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "forged-unreachable"},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: env.Postgres.Host, Hostaddr: env.Postgres.Hostaddr, Port: int32(port)}, //nolint:gosec // a loopback port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
		},
	}
	if err := env.Kube.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Kube.Client.Delete(context.Background(), cfg) }()
	if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
		t.Fatal(err)
	}
	tenantkit.CreateTenant(ctx, t, env, tenantAPI, ns, name, "{instanceRef: "+cfg.Name+"}")

	// Both shown Ready by someone who may write status. The config and
	// Tenant controllers write them back meanwhile: a forgery is read and
	// made again on a conflict, and one that still loses is made again in
	// the next round.
	forge := func() {
		t.Helper()
		if err := testenv.EditStatusE(ctx, env.Kube.Client, cfg, func(cfg *v1alpha1.ClusterProviderConfig) {
			cfg.Status.Phase = v1alpha1.ConfigPhaseReady
			cfg.SetConditions(xpv2.Available().WithMessage("forged"))
		}); err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
		if err := testenv.EditStatusE(ctx, env.Kube.Client, tenantkit.Ref(tenantAPI, "Tenant", ns, name), func(tn *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(tn.Object, "Ready", "status", "phase")
		}); err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		forge()
		if _, err := tenantkit.Get(ctx, env.Kube.Client, "external-secrets.io/v1", "ExternalSecret", ns, tenantkit.InstanceSecretName(cfg.Name, name)); !apierrors.IsNotFound(err) {
			t.Fatalf("an ExternalSecret was composed for a Tenant whose binding is not Ready (%v)", err)
		}
	}
	// The real state comes back, and nothing was made.
	if err := testenv.WaitFor(ctx, time.Minute, func(ctx context.Context) error {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return err
		}
		tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
		if err != nil {
			return err
		}
		if cfg.Status.Phase == v1alpha1.ConfigPhaseReady || cfg.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
			return fmt.Errorf("the config still shows Ready: %s", cfg.Status.Phase)
		}
		if p := tenantkit.Phase(tn); p == "Ready" || tenantkit.Ready(tn) == "True" {
			return fmt.Errorf("the Tenant still shows phase %s, Ready %s", p, tenantkit.Ready(tn))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenantkit.InstanceSecretName(cfg.Name, name)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret exists for the forged Tenant (%v)", err)
	}
	if db, role := tenantkit.ServerHas(ctx, t, env, name, name); db || role {
		t.Errorf("database %v, role %v made for a server that is not Ready", db, role)
	}
	tenantkit.DeleteTenant(ctx, t, env, tenantAPI, ns, name)
}
