package database

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestConfirmFirst(t *testing.T) {
	cases := map[string]struct {
		res  reconcile.Result
		want *int
	}{
		"requeue right after a create: ahead of the queue": {res: reconcile.Result{Requeue: true}, want: ptr.To(confirmPriority)}, //nolint:staticcheck // what crossplane-runtime returns after a create
		"a poll: the request's own priority":               {res: reconcile.Result{RequeueAfter: time.Minute}},
		"nothing to requeue":                               {res: reconcile.Result{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return tc.res, nil })
			got, err := confirmFirst(inner).Reconcile(context.Background(), reconcile.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Priority); diff != "" {
				t.Errorf("priority (-want +got):\n%s", diff)
			}
		})
	}
}
