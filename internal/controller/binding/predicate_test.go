package binding

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

func TestDatabaseChanged(t *testing.T) {
	base := func() *v1alpha1.Database {
		d := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "shop", Generation: 1, ResourceVersion: "1"}}
		d.SetConditions(xpv2.Creating())
		return d
	}
	cases := map[string]struct {
		change func(*v1alpha1.Database)
		passes bool
	}{
		"its own progress (resourceVersion, annotations, other status)": {change: func(d *v1alpha1.Database) {
			d.ResourceVersion = "2"
			meta.AddAnnotations(d, map[string]string{meta.AnnotationKeyExternalCreatePending: "now"})
			d.Status.AtProvider.Phase = v1alpha1.DatabasePhaseRoleCreated
		}},
		"Ready": {change: func(d *v1alpha1.Database) { d.SetConditions(xpv2.Available()) }, passes: true},
		"a new Ready reason": {change: func(d *v1alpha1.Database) {
			d.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Conflict"})
		}, passes: true},
		"the spec (claimRef, reclaim policy)": {change: func(d *v1alpha1.Database) { d.Generation = 2 }, passes: true},
		"deletion":                            {change: func(d *v1alpha1.Database) { d.DeletionTimestamp = ptrNow() }, passes: true},
		"the claim protection": {change: func(d *v1alpha1.Database) {
			meta.AddFinalizer(d, tenancy.ClaimProtectionFinalizer)
		}, passes: true},
		"the record path": {change: func(d *v1alpha1.Database) { d.Status.AtProvider.Credential.Path = "p" }, passes: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := base()
			tc.change(n)
			if got := databaseChanged().Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: n}); got != tc.passes {
				t.Errorf("passes = %t, want %t", got, tc.passes)
			}
		})
	}
}

func TestBindingChanged(t *testing.T) {
	base := func() *v1alpha1.DatabaseBinding {
		return &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "app", Generation: 1}}
	}
	cases := map[string]struct {
		change func(*v1alpha1.DatabaseBinding)
		passes bool
	}{
		"its own status report": {change: func(b *v1alpha1.DatabaseBinding) {
			b.Status.AtProvider.Phase = v1alpha1.BindingPhaseReady
			b.SetConditions(xpv2.Available())
		}},
		"its own create annotation": {change: func(b *v1alpha1.DatabaseBinding) {
			meta.AddAnnotations(b, map[string]string{meta.AnnotationKeyExternalCreatePending: "now"})
		}},
		"the bound Database recorded": {change: func(b *v1alpha1.DatabaseBinding) { b.Status.AtProvider.DatabaseName = "tenant-1" }, passes: true},
		"the spec":                    {change: func(b *v1alpha1.DatabaseBinding) { b.Generation = 2 }, passes: true},
		"deletion":                    {change: func(b *v1alpha1.DatabaseBinding) { b.DeletionTimestamp = ptrNow() }, passes: true},
		"a label":                     {change: func(b *v1alpha1.DatabaseBinding) { b.Labels = map[string]string{"a": "b"} }, passes: true},
		"another annotation":          {change: func(b *v1alpha1.DatabaseBinding) { meta.AddAnnotations(b, map[string]string{"a": "b"}) }, passes: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := base()
			tc.change(n)
			if got := bindingChanged().Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: n}); got != tc.passes {
				t.Errorf("passes = %t, want %t", got, tc.passes)
			}
		})
	}
}

func ptrNow() *metav1.Time { n := metav1.Now(); return &n }
