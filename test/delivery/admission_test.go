package delivery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// policyMessage is what the shipped admission policy
// (cluster/admission) answers a refused write with.
const policyMessage = "DatabaseBindings are written only by Crossplane from their Tenant and by the provider"

// appIdentity is a client authenticating with a TokenRequest token of the
// service account ns/app, bound to Crossplane's standard crossplane-edit
// ClusterRole in ns: what an app team's deployer usually is. It returns
// once that identity can read the Tenant's binding (the RBAC manager's
// roles for the provider's kinds are aggregated into crossplane-edit), so
// that what it is refused later is refused by admission, not by RBAC.
func appIdentity(ctx context.Context, t *testing.T, ns, tenant string) client.Client {
	t.Helper()
	if err := env.Kube.EnsureServiceAccount(ctx, ns, "app"); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-crossplane-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "crossplane-edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "app"}},
	}
	if err := env.Kube.Client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token, err := env.Kube.ServiceAccountToken(ctx, ns, "app")
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Kube.Config)
	cfg.BearerToken = token
	as, err := client.New(cfg, client.Options{Scheme: env.Kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var gerr error
	for {
		if _, gerr = tenantkit.Get(ctx, as, tenantAPI, "DatabaseBinding", ns, tenant); gerr == nil {
			return as
		}
		if ctx.Err() != nil {
			t.Fatalf("the app identity cannot read its Tenant's binding, so nothing below would be proven: %v", gerr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wantRefused asserts that err is an admission refusal whose message
// contains msg.
func wantRefused(t *testing.T, what string, err error, msg string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: accepted, want refused (%q)", what, msg)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		t.Errorf("%s: %v, want an admission refusal", what, err)
	case !strings.Contains(err.Error(), msg):
		t.Errorf("%s: refused without saying why (want %q): %v", what, msg, err)
	}
}

// An app namespace's own identity, with Crossplane's standard
// crossplane-edit role in its namespace (which grants every verb on
// DatabaseBindings), cannot keep the namespace's copy of the credential
// past the release: dropping Delete from the binding's managementPolicies
// (CEL), removing or replacing its finalizer, pausing it, forging its
// status and writing a binding of its own are all refused with a message
// saying who writes bindings (the shipped admission policy, loaded from
// cluster/admission). It may delete its Tenant, and the release then
// removes the delivery copy and leaves the Database Released.
func TestAppIdentityCannotSkipTheRelease(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "appid", "appid"
	tenantkit.NewTenant(ctx, t, env, tenantAPI, ns, name, "{instanceRef: shared}")
	db := databaseOf(ctx, t, tenantAPI, ns, name)
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v == 0 {
		t.Fatal("no delivery copy while the Tenant is Ready")
	}
	as := appIdentity(ctx, t, ns, name)
	b, err := tenantkit.Get(ctx, as, tenantAPI, "DatabaseBinding", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.GetFinalizers()) == 0 {
		t.Fatalf("the binding has no finalizer:\n%s", tenantkit.Describe(ctx, env, tenantAPI, ns, name))
	}

	patch := func(p string, opts ...client.PatchOption) error {
		return as.Patch(ctx, b.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p)), opts...)
	}
	wantRefused(t, "dropping Delete from spec.managementPolicies",
		patch(`{"spec":{"managementPolicies":["Observe","Create","Update","LateInitialize"]}}`), "its release would be skipped")
	wantRefused(t, "removing the finalizer", patch(`{"metadata":{"finalizers":null}}`), policyMessage)
	wantRefused(t, "replacing the finalizer", patch(`{"metadata":{"finalizers":["example.org/other"]}}`), policyMessage)
	wantRefused(t, "pausing the binding", patch(`{"metadata":{"annotations":{"crossplane.io/paused":"true"}}}`), policyMessage)
	wantRefused(t, "forging the binding's status",
		as.Status().Patch(ctx, b.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"atProvider":{"phase":"Released"}}}`))), policyMessage)
	own := tenantkit.MustUnstructured(fmt.Sprintf(`apiVersion: %s
kind: DatabaseBinding
metadata: {name: %s-own, namespace: %s}
spec:
  providerConfigRef: {kind: ClusterProviderConfig, name: shared}
  forProvider:
    tenant: {name: %s, uid: %s}
    database: %s_own
`, tenantAPI, name, ns, name, b.GetUID(), name))
	wantRefused(t, "creating a binding", as.Create(ctx, own), policyMessage)

	// Nothing changed.
	got, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "DatabaseBinding", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if mp, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "managementPolicies"); len(mp) != 1 || mp[0] != "*" {
		t.Errorf("the binding's managementPolicies are %v", mp)
	}
	if fmt.Sprint(got.GetFinalizers()) != fmt.Sprint(b.GetFinalizers()) {
		t.Errorf("the binding's finalizers are %v, were %v", got.GetFinalizers(), b.GetFinalizers())
	}
	if _, ok := got.GetAnnotations()["crossplane.io/paused"]; ok {
		t.Error("the binding is paused")
	}

	// The app deletes its Tenant: the release runs.
	tn, err := tenantkit.Get(ctx, as, tenantAPI, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Delete(ctx, tn); err != nil {
		t.Fatalf("the app identity cannot delete its Tenant: %v", err)
	}
	for {
		_, e1 := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", ns, name)
		_, e2 := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "DatabaseBinding", ns, name)
		if apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the Tenant is not gone (Tenant: %v, binding: %v):\n%s", e1, e2, tenantkit.Describe(context.Background(), env, tenantAPI, ns, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)); v != 0 {
		t.Errorf("the delivery copy survived the release (%d versions)", v)
	}
	u, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Database", "", db)
	if err != nil {
		t.Fatalf("the Database is gone: %v", err)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "status", "binding", "phase"); p != "Released" {
		t.Errorf("the Database is %q, want Released", p)
	}
}

// The shipped policy lets a cluster admin (system:masters) write bindings,
// and the garbage collector under its own service account (as
// kube-controller-manager runs it with --use-service-account-credentials)
// update one: it removes owner references when an owner is deleted with
// --cascade=orphan.
func TestAdminsAndTheGarbageCollectorWriteBindings(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "admin-writes"
	if err := env.Kube.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	b := tenantkit.MustUnstructured(fmt.Sprintf(`apiVersion: %s
kind: DatabaseBinding
metadata: {name: by-admin, namespace: %s}
spec:
  forProvider:
    tenant: {name: by-admin, uid: 00000000-0000-4000-8000-000000000001}
    databaseRef: nothing-here
`, tenantAPI, ns))
	if err := env.Kube.Client.Create(ctx, b); err != nil {
		t.Fatalf("a cluster admin's binding was refused: %v", err)
	}
	t.Cleanup(func() { _ = env.Kube.Client.Delete(context.Background(), b) })
	cfg := rest.CopyConfig(env.Kube.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:generic-garbage-collector"}
	gc, err := client.New(cfg, client.Options{Scheme: env.Kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	p := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`))
	if err := gc.Patch(ctx, b.DeepCopy(), p, client.DryRunAll); err != nil {
		t.Errorf("the garbage collector's patch was refused: %v", err)
	}
}
