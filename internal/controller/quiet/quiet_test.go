package quiet

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
type cacheOf struct{ obj client.Object }

func (c cacheOf) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := c.obj.(type) {
	case *v1alpha1.Database:
		o.DeepCopyInto(obj.(*v1alpha1.Database))
	case *v1alpha1.DatabaseBinding:
		o.DeepCopyInto(obj.(*v1alpha1.DatabaseBinding))
	}
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

func readyCondition() xpv2.Condition {
	return xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable, LastTransitionTime: metav1.Unix(1700000000, 0)}
}

func TestQuietStatusSkipsOnlyUpdatesThatChangeNothing(t *testing.T) {
	readyDB := func() client.Object {
		d := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "shop", ResourceVersion: "7"}}
		d.Status.AtProvider.Phase = v1alpha1.DatabasePhaseReady
		d.SetConditions(readyCondition())
		return d
	}
	boundBinding := func() client.Object {
		b := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop-db", ResourceVersion: "7"}}
		b.Status.AtProvider.Phase = v1alpha1.BindingPhaseBound
		b.SetConditions(readyCondition())
		return b
	}
	setCondition := func(c xpv2.Condition) func(client.Object) {
		return func(o client.Object) { o.(interface{ SetConditions(...xpv2.Condition) }).SetConditions(c) }
	}
	cases := map[string]struct {
		obj    func() client.Object
		change func(client.Object)
		sent   int
	}{
		"Database, nothing changed: skipped": {obj: readyDB, change: func(client.Object) {}, sent: 0},
		"Database, the same condition set again keeps its time: skipped": {obj: readyDB, change: setCondition(xpv2.Condition{
			Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable, LastTransitionTime: metav1.Now()}), sent: 0},
		"Database, a new condition: sent": {obj: readyDB, change: setCondition(xpv2.Condition{
			Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Conflict", LastTransitionTime: metav1.Now()}), sent: 1},
		"Database, a status field: sent":                           {obj: readyDB, change: func(o client.Object) { o.(*v1alpha1.Database).Status.AtProvider.Owner = "intruder" }, sent: 1},
		"Database, another resourceVersion than the cache's: sent": {obj: readyDB, change: func(o client.Object) { o.SetResourceVersion("8") }, sent: 1},
		"binding, nothing changed: skipped":                        {obj: boundBinding, change: func(client.Object) {}, sent: 0},
		"binding, the same condition set again: skipped": {obj: boundBinding, change: setCondition(xpv2.Condition{
			Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable, LastTransitionTime: metav1.Now()}), sent: 0},
		"binding, a new message: sent": {obj: boundBinding, change: setCondition(xpv2.Condition{
			Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable, Message: "other", LastTransitionTime: metav1.Now()}), sent: 1},
		"binding, a status field: sent": {obj: boundBinding, change: func(o client.Object) {
			o.(*v1alpha1.DatabaseBinding).Status.AtProvider.Phase = v1alpha1.BindingPhaseReleased
		}, sent: 1},
		"binding, never stored: sent": {obj: boundBinding, change: func(o client.Object) { o.SetResourceVersion("") }, sent: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := 0
			w := Writer{SubResourceWriter: countingWriter{n: &n}, Cache: cacheOf{obj: tc.obj()}}
			o := tc.obj()
			tc.change(o)
			// unguarded-update: the quiet Writer over a counting stub and a one-object cache: no API server, the call under test
			if err := w.Update(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.sent, n); diff != "" {
				t.Errorf("status updates sent (-want +got):\n%s", diff)
			}
		})
	}
}
