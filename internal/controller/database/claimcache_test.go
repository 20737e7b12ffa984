package database_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// emptyTenants is a Tenant cache that has not heard of any Tenant yet
// (fault injection): every Tenant it is asked for is not found.
type emptyTenants struct{}

func (emptyTenants) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return kerrors.NewNotFound(schema.GroupResource{Group: v1alpha1.Group, Resource: "tenants"}, key.Name)
}

func (emptyTenants) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return kerrors.NewNotFound(schema.GroupResource{Group: v1alpha1.Group, Resource: "tenants"}, "")
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestClaimancyFromACacheBehind: whether a Database's claim is held is
// taken from the Tenant cache only when that changes nothing. A cache that
// has not heard of the claim's Tenant never makes a Database being
// deleted look unclaimed (its deletion would drop what a live Tenant
// uses), even when the binding status shown is stale, and never moves the
// binding status shown; an up-to-date cache answers a Database whose
// status already says Bound without reading the API server.
func TestClaimancyFromACacheBehind(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	b := binding(t, "claims-cache", "cached", "claim-cache-db")
	claim := &v1alpha1.ClaimReference{Namespace: "claims-cache", Name: "cached", UID: b.Spec.ForProvider.Tenant.UID}
	bound := tenancy.BindingOf(claim, v1alpha1.BindingStatus{}, true)
	// A status behind the claim: Available, as before the claim was
	// bound. (A status that records this very claim Released is not
	// behind: no binding holds a released claim again.)
	unbound := v1alpha1.BindingStatus{Phase: v1alpha1.BindingAvailable}
	if bound == unbound {
		t.Fatal("the bound and unbound status are the same: the test would prove nothing")
	}
	cases := map[string]struct {
		deleting  bool
		shown     v1alpha1.BindingStatus
		cache     client.Reader
		wantReads bool
	}{
		"DeletedWithAStaleStatusReadsTheAPIServer": {deleting: true, shown: unbound, cache: emptyTenants{}, wantReads: true},
		"AChangeOfStatusReadsTheAPIServer":         {shown: bound, cache: emptyTenants{}, wantReads: true},
		"NoChangeIsAnsweredByTheCache":             {shown: bound, cache: env.Kube.Client, wantReads: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "claim-cache-db"}}
			db.Spec.ClaimRef = claim
			db.Status.Binding = tc.shown
			if tc.deleting {
				now := metav1.NewTime(time.Now())
				db.SetDeletionTimestamp(&now)
			}
			reader := &countingReader{Reader: env.Kube.Client}
			got, err := database.ClaimancyWith(ctx, env.Kube.Client, reader, tc.cache, db)
			if err != nil {
				t.Fatal(err)
			}
			if got != tenancy.ClaimLive {
				t.Errorf("claimancy %q, want %q: the claim's Tenant and its binding exist", got, tenancy.ClaimLive)
			}
			if n := reader.gets.Load(); (n > 0) != tc.wantReads {
				t.Errorf("%d reads of the API server, want reads: %v", n, tc.wantReads)
			}
		})
	}
}
