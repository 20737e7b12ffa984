package database

import (
	"context"
	"maps"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// ownAnnotations are written by the managed reconciler about its own
// progress, and by this controller (the reclaim policy recorded when a
// deletion starts). Whoever writes them already requeues, so their watch
// events only start a second reconcile on a cache that has not yet seen the
// first one's status write (measured: a full Observe with a tenant login, a
// status write that conflicts, a duplicate Ready event, and a third
// reconcile).
var ownAnnotations = []string{
	meta.AnnotationKeyExternalCreatePending,
	meta.AnnotationKeyExternalCreateSucceeded,
	meta.AnnotationKeyExternalCreateFailed,
	AnnotationReclaimAtDeletion,
}

// desiredStateChanged is crossplane-runtime's DesiredStateChanged (labels,
// generation, annotations) with the reconciler's own annotation writes left
// out. Any other annotation change still starts a reconcile.
func desiredStateChanged() predicate.Predicate {
	return predicate.Or(
		predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			return annotationsChanged(e.ObjectOld, e.ObjectNew)
		}},
		predicate.LabelChangedPredicate{},
		predicate.GenerationChangedPredicate{},
	)
}

// annotationsChanged is true when before and after differ in an
// annotation that expresses desired state.
func annotationsChanged(before, after client.Object) bool {
	oa, na := maps.Clone(before.GetAnnotations()), maps.Clone(after.GetAnnotations())
	for _, k := range ownAnnotations {
		delete(oa, k)
		delete(na, k)
	}
	return !maps.Equal(oa, na)
}

// bindingChanged passes the DatabaseBinding events that can change a
// Database's binding phase: creation, deletion, the deletion timestamp
// being set, and the Database it records.
func bindingChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.DatabaseBinding)
		n, ok2 := e.ObjectNew.(*v1alpha1.DatabaseBinding)
		if !ok1 || !ok2 {
			return false
		}
		return (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) ||
			o.Status.AtProvider.DatabaseName != n.Status.AtProvider.DatabaseName
	}}
}

// databasesOfBinding names the Databases a DatabaseBinding may concern: the
// one it recorded, the one it names (static), or the one it provisions
// (dynamic: "tenant-<tenant uid>").
func databasesOfBinding(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*v1alpha1.DatabaseBinding)
	if !ok {
		return nil
	}
	names := map[string]bool{}
	if n := b.Status.AtProvider.DatabaseName; n != "" {
		names[n] = true
	}
	switch {
	case b.Spec.ForProvider.DatabaseRef != nil:
		names[*b.Spec.ForProvider.DatabaseRef] = true
	case b.Spec.ForProvider.Tenant.UID != "":
		names[tenancy.DynamicDatabaseName(b.Spec.ForProvider.Tenant.UID)] = true
	}
	out := make([]reconcile.Request, 0, len(names))
	for n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	return out
}
