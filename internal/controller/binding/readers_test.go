package binding

import (
	"context"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func TestReadsAny(t *testing.T) {
	es := func(y string) map[string]any {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(y), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	paths := []string{"tenants/shop/web", ""}
	cases := map[string]struct {
		es   map[string]any
		want bool
	}{
		"Extract":        {es: es("spec: {dataFrom: [{extract: {key: tenants/shop/web}}]}"), want: true},
		"RemoteRef":      {es: es("spec: {data: [{secretKey: p, remoteRef: {key: other}}, {secretKey: q, remoteRef: {key: tenants/shop/web}}]}"), want: true},
		"AnotherPath":    {es: es("spec: {dataFrom: [{extract: {key: tenants/shop/webx}}], data: [{remoteRef: {key: tenants/shop}}]}")},
		"AFindOnly":      {es: es("spec: {dataFrom: [{find: {path: tenants/shop/web}}]}")},
		"NoKeyIsNoMatch": {es: es("spec: {dataFrom: [{extract: {}}]}")},
		"NoSpec":         {es: map[string]any{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := readsAny(tc.es, paths); got != tc.want {
				t.Errorf("readsAny = %v, want %v", got, tc.want)
			}
		})
	}
}

// externalSecret makes an ExternalSecret in ns reading key, held by a
// finalizer so that the test decides when it is gone.
func externalSecret(t *testing.T, ns, name, key string) *unstructured.Unstructured {
	t.Helper()
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": name, "namespace": ns, "finalizers": []any{"test.example/hold"}},
		"spec": map[string]any{
			"secretStoreRef": map[string]any{"kind": "ClusterSecretStore", "name": "openbao-tenants"},
			"target":         map[string]any{"name": name},
			"dataFrom":       []any{map[string]any{"extract": map[string]any{"key": key}}},
		},
	}}
	if err := env.Kube.Client.Create(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	return es
}

func release(t *testing.T, es *unstructured.Unstructured) {
	t.Helper()
	testenv.Edit(t, env.Kube.Client, es, func(es *unstructured.Unstructured) { es.SetFinalizers(nil) })
}

// A deleted binding releases nothing, and keeps its delivery copy, while an
// ExternalSecret of its namespace reads that copy; it says which one in its
// Synced condition. Once that ExternalSecret is gone it releases and goes.
// An ExternalSecret reading another path does not hold it.
func TestReleaseWaitsForTheExternalSecret(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns, db, b, tenantUID := availableStatic(t, "shop", "readers-secret")
	cp := copyPath(ns, "shop")
	reader := externalSecret(t, ns, "shop-postgresql", cp)
	other := externalSecret(t, ns, "unrelated", cp+"-other")
	defer release(t, other)

	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	awaitBinding(t, b, "the binding waits for the ExternalSecret", func(b *v1alpha1.DatabaseBinding) bool {
		c := b.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "waiting for ExternalSecret shop-postgresql of this namespace")
	})
	if c := b.GetCondition(xpv2.TypeSynced); strings.Contains(c.Message, "unrelated") {
		t.Errorf("the wait names an ExternalSecret that reads another path: %q", c.Message)
	}
	// Give a release every chance to happen.
	time.Sleep(3 * time.Second)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if db.Status.Binding.Phase == v1alpha1.BindingReleased {
		t.Fatalf("the Database was released while an ExternalSecret still read the copy: %+v", db.Status.Binding)
	}
	if rec := readKV(t, cp); rec == nil {
		t.Fatal("the delivery copy was removed while an ExternalSecret still read it")
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatalf("the binding went while an ExternalSecret still read its copy: %v", err)
	}

	if err := env.Kube.Client.Delete(ctx, reader); err != nil {
		t.Fatal(err)
	}
	release(t, reader)
	awaitGone(t, b, "the binding")
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	claim := tenancy.ReleasedStatus(v1alpha1.ClaimReference{Namespace: ns, Name: "shop", UID: tenantUID})
	if db.Status.Binding.Phase != claim.Phase {
		t.Errorf("the Database is %q after the ExternalSecret went, want %s", db.Status.Binding.Phase, claim.Phase)
	}
	if rec := readKV(t, cp); rec != nil {
		t.Errorf("the copy survived the binding: %s", ownerOnly(rec))
	}
}

// A Tenant deleted with its dependents orphaned (or deleted before the
// garbage collector reaches its binding) leaves a binding whose Tenant is
// gone: it releases as its deletion would, so it too waits while an
// ExternalSecret of its namespace reads the copy, even with reclaimPolicy
// Delete, and says which one. Once that ExternalSecret is gone the
// Database is deleted.
func TestOrphanWaitsForTheExternalSecret(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	db := database(t, inst, nil, v1alpha1.ReclaimDelete, "orphan-reader-secret")
	uid := tenant(t, ns, "app", "app-db")
	b := staticBinding(ns, "app", uid, inst, db.GetName())
	create(t, b)
	awaitBinding(t, b, "the binding is Available", available)
	reader := externalSecret(t, ns, "app-postgresql", copyPath(ns, "app"))
	orphan(ctx, t, ns, "app", b)
	awaitBinding(t, b, "the orphan waits for the ExternalSecret", func(b *v1alpha1.DatabaseBinding) bool {
		c := b.GetCondition(xpv2.TypeReady)
		return string(c.Reason) == tenancy.ReasonWaitingForExternalSecret && strings.Contains(c.Message, "waiting for ExternalSecret app-postgresql of this namespace")
	})
	// Give a release every chance to happen (several polls).
	time.Sleep(3 * time.Second)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatalf("the Database went while an ExternalSecret still read the copy: %v", err)
	}
	if db.GetDeletionTimestamp() != nil {
		t.Fatal("the Database is being deleted while an ExternalSecret still reads the copy")
	}
	if rec := readKV(t, copyPath(ns, "app")); rec == nil {
		t.Fatal("the delivery copy was removed while an ExternalSecret still read it")
	}

	if err := env.Kube.Client.Delete(ctx, reader); err != nil {
		t.Fatal(err)
	}
	release(t, reader)
	awaitGone(t, db, "the Database (reclaimPolicy Delete)")
}
