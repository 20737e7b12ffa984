package database

import (
	"maps"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// progressAnnotations are written by the managed reconciler about its own
// progress. It already requeues after writing them, so their watch events
// only start a second reconcile on a cache that has not yet seen the first
// one's status write (measured: a full Observe with a tenant login, a status
// write that conflicts, a duplicate Ready event, and a third reconcile).
var progressAnnotations = []string{
	meta.AnnotationKeyExternalCreatePending,
	meta.AnnotationKeyExternalCreateSucceeded,
	meta.AnnotationKeyExternalCreateFailed,
}

// desiredStateChanged is crossplane-runtime's DesiredStateChanged (labels,
// generation, annotations) with the reconciler's own writes left out: the
// progress annotations, and the external-name annotation when it is first
// set to exactly the name the spec gives (what externalNameInitializer
// writes). Any other annotation change, and any external-name a person
// sets or changes, still starts a reconcile.
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

// annotationsChanged is true when old and new differ in an annotation
// that expresses desired state.
func annotationsChanged(old, new client.Object) bool {
	oa, na := maps.Clone(old.GetAnnotations()), maps.Clone(new.GetAnnotations())
	for _, k := range progressAnnotations {
		delete(oa, k)
		delete(na, k)
	}
	if _, had := oa[meta.AnnotationKeyExternalName]; !had {
		if db, ok := new.(*v1alpha1.Database); ok && na[meta.AnnotationKeyExternalName] == effectiveDatabaseName(db) {
			delete(na, meta.AnnotationKeyExternalName)
		}
	}
	return !maps.Equal(oa, na)
}

// effectiveDatabaseName is the name externalNameInitializer records:
// spec.forProvider.database, else metadata.name.
func effectiveDatabaseName(db *v1alpha1.Database) string {
	if p := db.Spec.ForProvider.Database; p != nil {
		return *p
	}
	return db.GetName()
}
