package database

import (
	"context"
	"sort"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestDesiredStateChanged(t *testing.T) {
	db := func(gen int64, labels map[string]string, ann map[string]string, fin ...string) *v1alpha1.Database {
		return &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "wiki", Generation: gen, Labels: labels, Annotations: ann, Finalizers: fin}}
	}
	a := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := map[string]struct {
		old, new *v1alpha1.Database
		want     bool
	}{
		"StatusOnly":             {old: db(1, nil, nil), new: db(1, nil, nil), want: false},
		"OwnFinalizer":           {old: db(1, nil, nil), new: db(1, nil, nil, "finalizer.managedresource.crossplane.io"), want: false},
		"CreatePending":          {old: db(1, nil, nil), new: db(1, nil, a(meta.AnnotationKeyExternalCreatePending, "t")), want: false},
		"CreateSucceeded":        {old: db(1, nil, a(meta.AnnotationKeyExternalCreatePending, "t")), new: db(1, nil, a(meta.AnnotationKeyExternalCreateSucceeded, "t")), want: false},
		"CreateFailed":           {old: db(1, nil, nil), new: db(1, nil, a(meta.AnnotationKeyExternalCreateFailed, "t")), want: false},
		"ReclaimRecorded":        {old: db(2, nil, nil), new: db(2, nil, a(AnnotationReclaimAtDeletion, "Retain")), want: false},
		"SpecChanged":            {old: db(1, nil, nil), new: db(2, nil, nil), want: true},
		"LabelChanged":           {old: db(1, nil, nil), new: db(1, map[string]string{"team": "a"}, nil), want: true},
		"PersonSetsExternalName": {old: db(1, nil, nil), new: db(1, nil, a(meta.AnnotationKeyExternalName, "other")), want: true},
		"Paused":                 {old: db(1, nil, nil), new: db(1, nil, a(meta.AnnotationKeyReconciliationPaused, "true")), want: true},
		"OtherAnnotationWithOwn": {old: db(1, nil, nil), new: db(1, nil, a(meta.AnnotationKeyExternalCreateSucceeded, "t", "note", "x")), want: true},
	}
	p := desiredStateChanged()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update(...) = %v, want %v", got, tc.want)
			}
		})
	}
	if !p.Create(event.CreateEvent{Object: db(1, nil, nil)}) || !p.Delete(event.DeleteEvent{Object: db(1, nil, nil)}) {
		t.Error("create and delete events must always start a reconcile")
	}
}

func TestBindingEvents(t *testing.T) {
	now := metav1.Now()
	b := func(mut func(*v1alpha1.DatabaseBinding)) *v1alpha1.DatabaseBinding {
		x := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db", Generation: 1}}
		x.Spec.ForProvider.Tenant = v1alpha1.TenantReference{Name: "t", UID: "u1"}
		if mut != nil {
			mut(x)
		}
		return x
	}
	p := bindingChanged()
	for name, tc := range map[string]struct {
		old, new *v1alpha1.DatabaseBinding
		want     bool
	}{
		"Nothing":          {old: b(nil), new: b(nil), want: false},
		"PhaseOnly":        {old: b(nil), new: b(func(x *v1alpha1.DatabaseBinding) { x.Status.AtProvider.Phase = v1alpha1.BindingPhaseReady }), want: false},
		"DatabaseRecorded": {old: b(nil), new: b(func(x *v1alpha1.DatabaseBinding) { x.Status.AtProvider.DatabaseName = "tenant-u1" }), want: true},
		"Deleting":         {old: b(nil), new: b(func(x *v1alpha1.DatabaseBinding) { x.DeletionTimestamp = &now }), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update(...) = %v, want %v", got, tc.want)
			}
		})
	}

	names := func(x *v1alpha1.DatabaseBinding) []string {
		var out []string
		for _, r := range databasesOfBinding(context.Background(), x) {
			if r.Namespace != "" {
				t.Errorf("request %v has a namespace: Databases are cluster-scoped", r)
			}
			out = append(out, r.Name)
		}
		sort.Strings(out)
		return out
	}
	for name, tc := range map[string]struct {
		b    *v1alpha1.DatabaseBinding
		want []string
	}{
		"Dynamic": {b: b(nil), want: []string{"tenant-u1"}},
		"Static":  {b: b(func(x *v1alpha1.DatabaseBinding) { x.Spec.ForProvider.DatabaseRef = ptr.To("shared-db") }), want: []string{"shared-db"}},
		"StaticRecorded": {b: b(func(x *v1alpha1.DatabaseBinding) {
			x.Spec.ForProvider.DatabaseRef = ptr.To("shared-db")
			x.Status.AtProvider.DatabaseName = "shared-db"
		}), want: []string{"shared-db"}},
		"DynamicRecorded": {b: b(func(x *v1alpha1.DatabaseBinding) { x.Status.AtProvider.DatabaseName = "tenant-u1" }), want: []string{"tenant-u1"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(tc.b)); diff != "" {
				t.Errorf("databasesOfBinding(): -want +got:\n%s", diff)
			}
		})
	}
}
