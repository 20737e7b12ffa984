package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// appIdentity is a client acting as namespace ns's own deployer: a
// service account that may write Tenants in ns and nothing else (it
// cannot even read which servers exist).
func appIdentity(ctx context.Context, t *testing.T, ns string) client.Client {
	t.Helper()
	if err := env.Kube.EnsureServiceAccount(ctx, ns, "deployer"); err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{
		fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: tenant-writer, namespace: %s}
rules:
- apiGroups: [database.ayatori.ddupan.top]
  resources: [tenants]
  verbs: [get, list, watch, create, update, patch, delete]
`, ns),
		fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deployer-tenant-writer, namespace: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: tenant-writer}
subjects: [{kind: ServiceAccount, name: deployer, namespace: %s}]
`, ns, ns),
	} {
		if err := env.Kube.Client.Create(ctx, tenantkit.MustUnstructured(y)); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	as := asServiceAccount(t, ns, "deployer")
	if err := as.List(ctx, &v1alpha1.ClusterProviderConfigList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the app identity lists servers (%v): it is not the narrow identity this test means", err)
	}
	return as
}

// asServiceAccount is a client acting as the service account ns/name.
func asServiceAccount(t *testing.T, ns, name string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Kube.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	as, err := client.New(cfg, client.Options{Scheme: env.Kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// createAs creates a Tenant as the identity as, with the reader service
// account of its namespace (what ESO logs in to OpenBao as).
func createAs(ctx context.Context, t *testing.T, as client.Client, ns, name, spec string) {
	t.Helper()
	if err := env.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
		t.Fatal(err)
	}
	tn := tenantkit.MustUnstructured("apiVersion: " + api + "\nkind: Tenant\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec: " + spec + "\n")
	if err := as.Create(ctx, tn); err != nil {
		t.Fatalf("the namespace's identity creates Tenant %s/%s: %v", ns, name, err)
	}
}

// The default server, with the provider as its Pod and Tenants written by
// each namespace's own identity: a Tenant naming no server lands on the
// one default serving its namespace, shows it in status.instance and logs
// in with <name>-postgresql; where two defaults serve a namespace, a
// Tenant there is refused (both named, nothing created) until the admin
// keeps one; the first Tenant stays where it landed when the default
// moves; and a namespace no default serves is told NoDefaultServer.
func TestDefaultServer(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const small, prod, label = "dflt-small", "dflt-prod", "e2e.example/tier"
	const plain, critical = "dflt-app", "dflt-critical"
	shared := &v1alpha1.ClusterProviderConfig{}
	if err := env.Kube.Client.Get(ctx, types.NamespacedName{Name: tenantkit.Instance}, shared); err != nil {
		t.Fatal(err)
	}
	mark := func(name string, p *v1alpha1.NamespacePolicy) {
		cfg := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
		err := testenv.EditE(ctx, env.Kube.Client, cfg, func(cfg *v1alpha1.ClusterProviderConfig) { cfg.Spec.Namespaces = p })
		if apierrors.IsNotFound(err) {
			cfg = &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *shared.Spec.DeepCopy()}
			cfg.Spec.Namespaces = p
			err = env.Kube.Client.Create(ctx, cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// No other test's Tenant names no server; none is left a default.
	t.Cleanup(func() {
		for _, name := range []string{small, prod} {
			cfg := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
			_ = testenv.EditE(context.Background(), env.Kube.Client, cfg, func(cfg *v1alpha1.ClusterProviderConfig) {
				if cfg.Spec.Namespaces != nil {
					cfg.Spec.Namespaces.Default = false
				}
			})
		}
	})
	mark(small, &v1alpha1.NamespacePolicy{Default: true})
	for ns, labels := range map[string]map[string]string{plain: nil, critical: {label: "prod"}} {
		if err := env.Kube.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	asPlain, asCritical := appIdentity(ctx, t, plain), appIdentity(ctx, t, critical)
	create := func(as client.Client, ns, name string) { createAs(ctx, t, as, ns, name, "{}") }
	describe := func(ns, name string) func() string {
		return func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) }
	}
	reason := func(ns, name, want string) func() bool {
		return func() bool {
			tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
			return err == nil && str(tn, "status", "reason") == want
		}
	}
	landedOn := func(ns, name, want string) {
		t.Helper()
		tn := tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
		if got := str(tn, "status", "instance"); got != want {
			t.Errorf("Tenant %s/%s shows status.instance %q, want %q", ns, name, got, want)
		}
		if got := str(tenantkit.BoundDatabase(ctx, t, env, ns, name), "spec", "providerConfigRef", "name"); got != want {
			t.Errorf("Tenant %s/%s's Database is on %q, want %q", ns, name, got, want)
		}
		tenantkit.CheckSecretLogsIn(ctx, t, env, ns, tenantkit.StaticSecretName(name))
	}

	// One default serving every namespace.
	create(asPlain, plain, "dflt-landed")
	landedOn(plain, "dflt-landed", small)

	// A second default, for labelled namespaces: both serve critical.
	mark(prod, &v1alpha1.NamespacePolicy{Default: true, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "prod"}}})
	create(asCritical, critical, "dflt-contested")
	waitFor(ctx, t, "DefaultServerAmbiguous on the Tenant two defaults serve", reason(critical, "dflt-contested", "DefaultServerAmbiguous"), describe(critical, "dflt-contested"))
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", critical, "dflt-contested")
	if err != nil {
		t.Fatal(err)
	}
	if m := str(tn, "status", "message"); !strings.Contains(m, prod+", "+small) || strings.Contains(m, label) {
		t.Errorf("the Tenant's message %q: want both defaults named and the selector not", m)
	}
	if n := tenantkit.DatabaseName(ctx, env, critical, "dflt-contested"); n != "" {
		t.Errorf("the refused Tenant's binding names Database %s", n)
	}

	// The admin keeps one default for critical: small serves only
	// unlabelled namespaces from now on. The contested Tenant lands on
	// prod; the first stays on small.
	mark(small, &v1alpha1.NamespacePolicy{Default: true, Selector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: label, Operator: metav1.LabelSelectorOpDoesNotExist}},
	}})
	landedOn(critical, "dflt-contested", prod)

	// The default moves off small altogether: the Tenant on it stays, a
	// new one in that namespace has no default.
	mark(small, nil)
	create(asPlain, plain, "dflt-stranded")
	waitFor(ctx, t, "NoDefaultServer on a Tenant no default serves", reason(plain, "dflt-stranded", "NoDefaultServer"), describe(plain, "dflt-stranded"))
	time.Sleep(5 * time.Second) // more than two polls
	landedOn(plain, "dflt-landed", small)

	for _, x := range []struct{ ns, name string }{{plain, "dflt-stranded"}, {critical, "dflt-contested"}, {plain, "dflt-landed"}} {
		tenantkit.DeleteTenant(ctx, t, env, api, x.ns, x.name)
	}
	// Nothing was ever created for the refused Tenants.
	dbs := &v1alpha1.DatabaseList{}
	if err := env.Kube.Client.List(ctx, dbs); err != nil {
		t.Fatal(err)
	}
	for _, d := range dbs.Items {
		if c := d.Spec.ClaimRef; c != nil && c.Name == "dflt-stranded" {
			t.Errorf("Database %s was made for the Tenant no default serves", d.Name)
		}
	}
}
