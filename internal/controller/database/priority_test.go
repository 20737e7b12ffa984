package database

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestConfirmFirst(t *testing.T) {
	cases := map[string]struct {
		res       reconcile.Result
		err       error
		want      *int
		wantAfter time.Duration
		wantErr   bool
	}{
		"a status write lost to a newer version: retried shortly, ahead": {
			err:  fmt.Errorf("cannot update managed resource status: %w", kerrors.NewConflict(schema.GroupResource{Resource: "databases"}, "shop", errors.New("changed"))),
			want: ptr.To(confirmPriority), wantAfter: statusConflictRetry,
		},
		"another error: returned":                          {err: errors.New("boom"), wantErr: true},
		"requeue right after a create: ahead of the queue": {res: reconcile.Result{Requeue: true}, want: ptr.To(confirmPriority)}, //nolint:staticcheck // what crossplane-runtime returns after a create
		"a poll: the request's own priority":               {res: reconcile.Result{RequeueAfter: time.Minute}, wantAfter: time.Minute},
		"nothing to requeue":                               {res: reconcile.Result{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return tc.res, tc.err })
			got, err := confirmFirst(inner).Reconcile(context.Background(), reconcile.Request{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %t", err, tc.wantErr)
			}
			if got.RequeueAfter != tc.wantAfter {
				t.Errorf("RequeueAfter %s, want %s", got.RequeueAfter, tc.wantAfter)
			}
			if diff := cmp.Diff(tc.want, got.Priority); diff != "" {
				t.Errorf("priority (-want +got):\n%s", diff)
			}
		})
	}
}
