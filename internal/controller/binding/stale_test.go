package binding

import (
	"context"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/tenants"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// frozenTenants is a Tenant cache that stopped hearing from the API server:
// it holds one Tenant as it was when taken (fault injection).
type frozenTenants struct{ tenant *unstructured.Unstructured }

func (f frozenTenants) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind() != schema.FromAPIVersionAndKind(tenancy.TenantAPIVersion, tenancy.TenantKind) {
		return tenants.ErrNotCached
	}
	if key != client.ObjectKeyFromObject(f.tenant) {
		return kerrors.NewNotFound(schema.GroupResource{Group: u.GroupVersionKind().Group, Resource: "tenants"}, key.Name)
	}
	f.tenant.DeepCopyInto(u)
	return nil
}

func (frozenTenants) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return tenants.ErrNotCached
}

// drive drives e as the managed reconciler would: Observe, then
// Create, Update or Delete as the observation asks.
func drive(t *testing.T, e *external, b *v1alpha1.DatabaseBinding) {
	t.Helper()
	ctx := context.Background()
	o, err := e.Observe(ctx, b)
	if err != nil {
		t.Logf("observe: %v", err)
		return
	}
	switch {
	case b.GetDeletionTimestamp() != nil && o.ResourceExists:
		_, err = e.Delete(ctx, b)
	case !o.ResourceExists:
		_, err = e.Create(ctx, b)
	case !o.ResourceUpToDate:
		// unguarded-update: the binder's own external-client step, driven as the managed reconciler drives it, not a test's read-then-update
		_, err = e.Update(ctx, b)
	}
	if err != nil {
		t.Logf("act: %v", err)
	}
}

// A Tenant cache that still says a binding stands after its Tenant was
// replaced (deleted and made again: another UID) never lets the binder
// act on that: neither a claim of an unclaimed Database nor a delivery of
// a Database claimed for the earlier Tenant. The API server is asked
// before anything is acted on, and says the binding's Tenant is gone.
func TestStaleTenantCacheNeverActs(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		claimed bool
	}{
		"NoClaimOfAnUnclaimedDatabase":       {claimed: false},
		"NoDeliveryOfTheEarlierTenantsClaim": {claimed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			inst := instance(t, v1alpha1.ReclaimRetain)
			oldUID := tenant(t, ns, "app", "app-db")
			snapshot := &unstructured.Unstructured{}
			snapshot.SetAPIVersion(tenancy.TenantAPIVersion)
			snapshot.SetKind(tenancy.TenantKind)
			if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, snapshot); err != nil {
				t.Fatal(err)
			}
			var claim *v1alpha1.ClaimReference
			if tc.claimed {
				claim = &v1alpha1.ClaimReference{Namespace: ns, Name: "app", UID: oldUID}
			}
			db := database(t, inst, claim, v1alpha1.ReclaimRetain, "stale-secret")
			// The Tenant is replaced; the cache does not hear of it.
			if err := env.Kube.Client.Delete(ctx, snapshot.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if newUID := tenant(t, ns, "app", "app-db"); newUID == oldUID {
				t.Fatal("the Tenant kept its UID")
			}
			// The binding as the earlier Tenant's Composition wrote it (not
			// made in the API server: only this test's binder sees it).
			b := staticBinding(ns, "app", oldUID, inst, db.GetName())
			b.SetUID("stale-binding-uid")
			if tc.claimed {
				b.Status.AtProvider.DatabaseName, b.Status.AtProvider.DatabaseUID = db.GetName(), string(db.GetUID())
			}
			cached := frozenTenants{tenant: snapshot}
			if v, err := tenants.Standing(ctx, cached, b); err != nil || v.Standing != tenancy.StandingTenants {
				t.Fatalf("the frozen cache says %+v (%v), want that the binding stands: the test would prove nothing", v, err)
			}
			e := &external{
				log: logging.NewNopLogger(), kube: env.Kube.Client, reader: env.Kube.Client, tenants: cached,
				kv: binderKV, opts: opts, spec: specOf(b), uid: b.GetUID(),
			}
			for range 3 {
				drive(t, e, b)
			}
			if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
				t.Fatal(err)
			}
			if !tc.claimed && db.Spec.ClaimRef != nil {
				t.Errorf("the binder claimed Database %s on a stale cache: claimRef %+v", db.GetName(), *db.Spec.ClaimRef)
			}
			if rec := readKV(t, copyPath(ns, "app")); rec != nil {
				t.Errorf("the binder delivered on a stale cache: %s", ownerOnly(rec))
			}
			if r := b.GetCondition("Ready").Reason; string(r) != tenancy.ReasonTenantGone {
				t.Errorf("Ready reason %q, want %s", r, tenancy.ReasonTenantGone)
			}
		})
	}
}
