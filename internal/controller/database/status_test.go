package database

import (
	"context"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// cacheOf is a cache holding one object.
type cacheOf struct{ obj *v1alpha1.Database }

func (c cacheOf) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.obj.DeepCopyInto(obj.(*v1alpha1.Database))
	return nil
}

func (c cacheOf) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// countingWriter counts the status updates that reach the apiserver.
type countingWriter struct {
	client.SubResourceWriter
	n *int
}

func (w countingWriter) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	*w.n++
	return nil
}

func TestQuietStatusSkipsOnlyUpdatesThatChangeNothing(t *testing.T) {
	readyDB := func() *v1alpha1.Database {
		d := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "shop", ResourceVersion: "7"}}
		d.Status.AtProvider.Phase = v1alpha1.DatabasePhaseReady
		d.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable,
			LastTransitionTime: metav1.Unix(1700000000, 0)})
		return d
	}
	cases := map[string]struct {
		change func(*v1alpha1.Database)
		sent   int
	}{
		"nothing changed: skipped": {change: func(*v1alpha1.Database) {}, sent: 0},
		"the same condition set again keeps its time: skipped": {change: func(d *v1alpha1.Database) {
			d.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable, LastTransitionTime: metav1.Now()})
		}, sent: 0},
		"a new condition: sent": {change: func(d *v1alpha1.Database) {
			d.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Conflict", LastTransitionTime: metav1.Now()})
		}, sent: 1},
		"a status field: sent":                           {change: func(d *v1alpha1.Database) { d.Status.AtProvider.Owner = "intruder" }, sent: 1},
		"another resourceVersion than the cache's: sent": {change: func(d *v1alpha1.Database) { d.ResourceVersion = "8" }, sent: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := 0
			w := quietStatusWriter{SubResourceWriter: countingWriter{n: &n}, cache: cacheOf{obj: readyDB()}}
			d := readyDB()
			tc.change(d)
			if err := w.Update(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.sent, n); diff != "" {
				t.Errorf("status updates sent (-want +got):\n%s", diff)
			}
		})
	}
}
