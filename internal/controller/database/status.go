package database

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// The managed reconciler writes a managed resource's status at the end of
// every reconcile, also when nothing changed: one PUT per Database per
// poll, which at ten thousand Databases is the apiserver's busiest client
// for no information. quietStatus drops a Database's status update whose
// status equals the cached copy of the same resourceVersion; every other
// write goes through. The cache is the one the reconcile read the object
// from, so an update it drops is one the apiserver would have taken as a
// no-op.

// quietStatusManager is the manager as the managed reconciler sees it:
// its client skips Database status updates that change nothing.
type quietStatusManager struct {
	ctrl.Manager
}

func (m quietStatusManager) GetClient() client.Client {
	return quietStatus{Client: m.Manager.GetClient(), cache: m.GetCache()}
}

type quietStatus struct {
	client.Client
	cache client.Reader
}

func (c quietStatus) Status() client.SubResourceWriter {
	return quietStatusWriter{SubResourceWriter: c.Client.Status(), cache: c.cache}
}

type quietStatusWriter struct {
	client.SubResourceWriter
	cache client.Reader
}

func (w quietStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && unchangedStatus(ctx, w.cache, obj) {
		return nil
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// unchangedStatus reports whether obj is a Database whose status equals
// that of the cached copy with the same resourceVersion.
func unchangedStatus(ctx context.Context, cache client.Reader, obj client.Object) bool {
	db, ok := obj.(*v1alpha1.Database)
	if !ok || db.GetResourceVersion() == "" {
		return false
	}
	cached := &v1alpha1.Database{}
	if err := cache.Get(ctx, client.ObjectKeyFromObject(db), cached); err != nil {
		return false
	}
	return cached.GetResourceVersion() == db.GetResourceVersion() && equality.Semantic.DeepEqual(cached.Status, db.Status)
}
