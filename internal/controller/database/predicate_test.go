package database

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestDesiredStateChanged(t *testing.T) {
	db := func(gen int64, dbName *string, labels map[string]string, ann map[string]string, fin ...string) *v1alpha1.Database {
		d := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "wiki", Generation: gen, Labels: labels, Annotations: ann, Finalizers: fin}}
		d.Spec.ForProvider.Database = dbName
		return d
	}
	ext := func(v string) map[string]string { return map[string]string{meta.AnnotationKeyExternalName: v} }
	with := func(a map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range a {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := map[string]struct {
		old, new *v1alpha1.Database
		want     bool
	}{
		"StatusOnly":              {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, nil, ext("wiki")), want: false},
		"OwnFinalizer":            {old: db(1, nil, nil, nil), new: db(1, nil, nil, nil, "finalizer.managedresource.crossplane.io"), want: false},
		"InitializerSetsName":     {old: db(1, nil, nil, nil), new: db(1, nil, nil, ext("wiki")), want: false},
		"InitializerSetsSpecName": {old: db(1, ptr.To("wiki_db"), nil, nil), new: db(1, ptr.To("wiki_db"), nil, ext("wiki_db")), want: false},
		"CreatePending":           {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, nil, with(ext("wiki"), meta.AnnotationKeyExternalCreatePending, "t")), want: false},
		"CreateSucceeded":         {old: db(1, nil, nil, with(ext("wiki"), meta.AnnotationKeyExternalCreatePending, "t")), new: db(1, nil, nil, with(ext("wiki"), meta.AnnotationKeyExternalCreateSucceeded, "t")), want: false},
		"CreateFailed":            {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, nil, with(ext("wiki"), meta.AnnotationKeyExternalCreateFailed, "t")), want: false},
		"SpecChanged":             {old: db(1, nil, nil, ext("wiki")), new: db(2, nil, nil, ext("wiki")), want: true},
		"LabelChanged":            {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, map[string]string{"team": "a"}, ext("wiki")), want: true},
		"PersonSetsOtherName":     {old: db(1, nil, nil, nil), new: db(1, nil, nil, ext("other")), want: true},
		"PersonChangesName":       {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, nil, ext("other")), want: true},
		"PersonRemovesName":       {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, nil, nil), want: true},
		"Paused":                  {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, nil, with(ext("wiki"), meta.AnnotationKeyReconciliationPaused, "true")), want: true},
		"NameAndPausedTogether":   {old: db(1, nil, nil, nil), new: db(1, nil, nil, with(ext("wiki"), meta.AnnotationKeyReconciliationPaused, "true")), want: true},
		"OtherAnnotationWithOwn":  {old: db(1, nil, nil, ext("wiki")), new: db(1, nil, nil, with(ext("wiki"), meta.AnnotationKeyExternalCreateSucceeded, "t", "note", "x")), want: true},
	}
	p := desiredStateChanged()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update(...) = %v, want %v", got, tc.want)
			}
		})
	}
	if !p.Create(event.CreateEvent{Object: db(1, nil, nil, nil)}) || !p.Delete(event.DeleteEvent{Object: db(1, nil, nil, nil)}) {
		t.Error("create and delete events must always start a reconcile")
	}
}
