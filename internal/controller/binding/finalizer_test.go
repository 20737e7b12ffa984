package binding

import (
	"context"
	"sync"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// writtenFinalizer stands in for the API finalizer: it records that it
// would have written.
type writtenFinalizer struct{ writes int }

func (w *writtenFinalizer) AddFinalizer(_ context.Context, obj resource.Object) error {
	w.writes++
	meta.AddFinalizer(obj, managed.FinalizerName)
	return nil
}

func (w *writtenFinalizer) RemoveFinalizer(context.Context, resource.Object) error { return nil }

// The finalizer is added without a write of its own only in the reconcile
// whose Observe decided to create (the create mark's write carries it);
// any other reconcile writes it at once, and a note is taken once.
func TestFinalizerWrittenUnlessCreating(t *testing.T) {
	cases := map[string]struct {
		creating  bool
		has       bool
		wantWrite int
	}{
		"Creating":          {creating: true, wantWrite: 0},
		"NotCreating":       {creating: false, wantWrite: 1},
		"AlreadyThere":      {has: true, wantWrite: 0},
		"AlreadyThereNoted": {has: true, creating: true, wantWrite: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
			if tc.has {
				meta.AddFinalizer(b, managed.FinalizerName)
			}
			m := &sync.Map{}
			if tc.creating {
				m.Store(b.GetUID(), true)
			}
			w := &writtenFinalizer{}
			f := finalizer{Finalizer: w, creating: m}
			if err := f.AddFinalizer(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			if !meta.FinalizerExists(b, managed.FinalizerName) {
				t.Error("no finalizer")
			}
			if w.writes != tc.wantWrite {
				t.Errorf("%d writes of the finalizer, want %d", w.writes, tc.wantWrite)
			}
			// The note is taken: the next reconcile writes.
			b.SetFinalizers(nil)
			if err := f.AddFinalizer(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			if w.writes != tc.wantWrite+1 {
				t.Errorf("a note was used twice: %d writes, want %d", w.writes, tc.wantWrite+1)
			}
		})
	}
}
