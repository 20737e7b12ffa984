package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// A server that serves only labelled namespaces, one database each, with
// the provider as its Pod (its RBAC as the docs grant it) and Tenants
// written by each namespace's own identity: a Tenant in
// another namespace is told NamespaceNotAllowed and nothing is created; in
// a served namespace the first Tenant is Ready and the second is told
// NamespaceLimitReached; a ResourceQuota on Tenants refuses a third at
// admission; narrowing the selector leaves the bound Tenant Ready.
func TestNamespacePolicyAndQuota(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const inst, in, out, label = "policy", "policy-in", "policy-out", "e2e.example/postgres"
	shared := &v1alpha1.ClusterProviderConfig{}
	if err := env.Kube.Client.Get(ctx, types.NamespacedName{Name: tenantkit.Instance}, shared); err != nil {
		t.Fatal(err)
	}
	cfg := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: inst}, Spec: *shared.Spec.DeepCopy()}
	cfg.Spec.Namespaces = &v1alpha1.NamespacePolicy{
		Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}},
		MaxTenants: ptr.To[int32](1),
	}
	if err := env.Kube.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for ns, labels := range map[string]map[string]string{in: {label: "yes"}, out: nil} {
		if err := env.Kube.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	asIn, asOut := appIdentity(ctx, t, in), appIdentity(ctx, t, out)
	// Kubernetes' own count of Tenants in the namespace, across servers.
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: in, Name: "tenants"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/tenants.database.ayatori.ddupan.top": resource.MustParse("2")}},
	}
	if err := env.Kube.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the quota controller counts the namespace's Tenants", func() bool {
		err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: in, Name: "tenants"}, quota)
		_, ok := quota.Status.Used["count/tenants.database.ayatori.ddupan.top"]
		return err == nil && ok
	}, func() string { return "" })

	spec := "{instanceRef: " + inst + "}"
	reason := func(ns, name, want string) func() bool {
		return func() bool {
			tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
			return err == nil && str(tn, "status", "reason") == want
		}
	}
	describe := func(ns, name string) func() string {
		return func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) }
	}

	createAs(ctx, t, asOut, out, "elsewhere", spec)
	waitFor(ctx, t, "NamespaceNotAllowed on the Tenant outside the selector", reason(out, "elsewhere", "NamespaceNotAllowed"), describe(out, "elsewhere"))
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", out, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if m := str(tn, "status", "message"); !strings.Contains(m, "does not serve namespace "+out) || strings.Contains(m, label) {
		t.Errorf("the Tenant's message %q: want the namespace named and the selector not", m)
	}

	createAs(ctx, t, asIn, in, "first", spec)
	tenantkit.WaitTenantReady(ctx, t, env, api, in, "first")
	tenantkit.CheckSecretLogsIn(ctx, t, env, in, tenantkit.InstanceSecretName(inst, "first"))
	createAs(ctx, t, asIn, in, "second", spec)
	waitFor(ctx, t, "NamespaceLimitReached on the second Tenant", reason(in, "second", "NamespaceLimitReached"), describe(in, "second"))
	waitFor(ctx, t, "the quota counts both Tenants", func() bool {
		err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: in, Name: "tenants"}, quota)
		u := quota.Status.Used["count/tenants.database.ayatori.ddupan.top"]
		return err == nil && u.Value() == 2
	}, func() string { return "" })
	third := tenantkit.MustUnstructured("apiVersion: " + api + "\nkind: Tenant\nmetadata: {name: third, namespace: " + in + "}\nspec: " + spec + "\n")
	if err := asIn.Create(ctx, third); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("a third Tenant past the namespace's ResourceQuota: %v; want Forbidden, exceeded quota", err)
	}

	// Nothing was created for the refused Tenants: their namespaces hold
	// one Database on the server, the first's.
	dbs := &v1alpha1.DatabaseList{}
	if err := env.Kube.Client.List(ctx, dbs); err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, d := range dbs.Items {
		if c := d.Spec.ClaimRef; c != nil && (c.Namespace == in || c.Namespace == out) {
			held = append(held, c.Namespace+"/"+c.Name)
		}
	}
	if len(held) != 1 || held[0] != in+"/first" {
		t.Errorf("Databases claimed by the two namespaces: %v; want only %s/first", held, in)
	}

	// The admin narrows the selector: the bound Tenant stays Ready.
	testenv.Edit(t, env.Kube.Client, cfg, func(cfg *v1alpha1.ClusterProviderConfig) { cfg.Spec.Namespaces.Selector.MatchLabels[label] = "no" })
	waitFor(ctx, t, "the waiting Tenant is now outside the selector", reason(in, "second", "NamespaceNotAllowed"), describe(in, "second"))
	time.Sleep(5 * time.Second) // more than two polls
	if tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", in, "first"); err != nil || tenantkit.Ready(tn) != "True" || str(tn, "status", "reason") != "" {
		t.Errorf("the bound Tenant after the selector changed: %v\n%s", err, describe(in, "first")())
	}
	tenantkit.CheckSecretLogsIn(ctx, t, env, in, tenantkit.InstanceSecretName(inst, "first"))

	for _, x := range []struct{ ns, name string }{{out, "elsewhere"}, {in, "second"}, {in, "first"}} {
		tenantkit.DeleteTenant(ctx, t, env, api, x.ns, x.name)
	}
}
