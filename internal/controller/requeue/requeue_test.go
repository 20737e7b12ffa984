package requeue

import (
	"context"
	"errors"
	"testing"
	"time"

	xperrors "github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var conflict = kerrors.NewConflict(schema.GroupResource{Resource: "databases"}, "shop", errors.New("the object has been modified"))

// apiserver answers every write with err.
type apiserver struct {
	client.Client
	err error
}

func (a apiserver) Update(context.Context, client.Object, ...client.UpdateOption) error { return a.err }
func (a apiserver) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return a.err
}
func (a apiserver) Status() client.SubResourceWriter { return statusWriter(a) }

type statusWriter struct {
	client.Client
	err error
}

func (w statusWriter) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return w.err
}
func (w statusWriter) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return w.err
}
func (w statusWriter) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return w.err
}
func (w statusWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return w.err
}

type manager struct {
	ctrl.Manager
	c client.Client
}

func (m manager) GetClient() client.Client { return m.c }

// write is a write a managed reconciler makes.
type write func(ctx context.Context, c client.Client, obj client.Object) error

func statusUpdate(ctx context.Context, c client.Client, obj client.Object) error {
	// unguarded-update: the stub apiserver answers a set error; this is the write a managed reconciler makes, and a conflict is the case under test
	return c.Status().Update(ctx, obj)
}
func update(ctx context.Context, c client.Client, obj client.Object) error {
	// unguarded-update: the stub apiserver answers a set error; this is the write a managed reconciler makes, and a conflict is the case under test
	return c.Update(ctx, obj)
}
func statusPatch(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Status().Patch(ctx, obj, client.MergeFrom(obj))
}

// managedReconciler acts like crossplane-runtime's: it writes, returns res
// with the write's error, and turns a conflict into an immediate requeue
// without an error.
func managedReconciler(c client.Client, w write, res reconcile.Result) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (result reconcile.Result, err error) {
		defer func() { result, err = xperrors.SilentlyRequeueOnConflict(result, err) }()
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
		if w == nil {
			return res, nil
		}
		if err := w(ctx, c, obj); err != nil {
			if res.Requeue { //nolint:staticcheck // crossplane-runtime asks for immediate requeues with Requeue
				return res, nil // a failure it reported in the status: backoff
			}
			return res, xperrors.Wrap(err, "cannot update managed resource status")
		}
		return res, nil
	})
}

func TestReconciler(t *testing.T) {
	after := func(d time.Duration) reconcile.Result {
		return reconcile.Result{RequeueAfter: d, Priority: ptr.To(Priority)}
	}
	now := reconcile.Result{Requeue: true, Priority: ptr.To(Priority)} //nolint:staticcheck // the shape controller-runtime reads
	cases := map[string]struct {
		apiErr  error
		write   write
		res     reconcile.Result
		want    reconcile.Result
		wantErr bool
	}{
		"a status write lost to a newer version: retried shortly, ahead of the queue": {
			apiErr: conflict, write: statusUpdate, res: reconcile.Result{RequeueAfter: time.Minute}, want: after(ConflictRetry),
		},
		"a metadata write lost: the same": {
			apiErr: conflict, write: update, res: reconcile.Result{RequeueAfter: time.Minute}, want: after(ConflictRetry),
		},
		"a status patch lost: the same": {
			apiErr: conflict, write: statusPatch, res: reconcile.Result{RequeueAfter: time.Minute}, want: after(ConflictRetry),
		},
		"the requeue after a create: ahead of the queue, through the backoff": {
			write: statusUpdate, res: reconcile.Result{Requeue: true}, want: now, //nolint:staticcheck // what crossplane-runtime returns after a create
		},
		"a failure reported in the status: ahead, and keeps its backoff": {
			apiErr: kerrors.NewInternalError(errors.New("etcd")), write: update, res: reconcile.Result{Requeue: true}, want: now, //nolint:staticcheck // what crossplane-runtime returns after a failure
		},
		"a write that failed otherwise: the error, for the backoff": {
			apiErr: kerrors.NewInternalError(errors.New("etcd")), write: statusUpdate, res: reconcile.Result{RequeueAfter: time.Minute}, wantErr: true,
			want: reconcile.Result{RequeueAfter: time.Minute, Priority: ptr.To(0)}, // controller-runtime ignores it next to an error
		},
		"a poll: back to the ordinary priority, not the one the request had": {
			write: statusUpdate, res: reconcile.Result{RequeueAfter: time.Minute}, want: reconcile.Result{RequeueAfter: time.Minute, Priority: ptr.To(0)},
		},
		"nothing to requeue": {res: reconcile.Result{}, want: reconcile.Result{Priority: ptr.To(0)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lost := NewLost()
			m := Manager{Manager: manager{c: apiserver{err: tc.apiErr}}, Lost: lost}
			r := Reconciler(managedReconciler(m.GetClient(), tc.write, tc.res), lost)
			got, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "shop"}})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// A lost write speeds up only the reconcile that lost it, and only for its
// own object.
func TestLostWriteBelongsToItsReconcile(t *testing.T) {
	lost := NewLost()
	api := &apiserver{err: conflict}
	m := Manager{Manager: manager{c: api}, Lost: lost}
	r := Reconciler(managedReconciler(m.GetClient(), statusUpdate, reconcile.Result{RequeueAfter: time.Minute}), lost)
	shop := reconcile.Request{NamespacedName: client.ObjectKey{Name: "shop"}}
	if got, _ := r.Reconcile(context.Background(), shop); got.RequeueAfter != ConflictRetry {
		t.Fatalf("after a conflict: RequeueAfter %s, want %s", got.RequeueAfter, ConflictRetry)
	}
	api.err = nil
	created := Reconciler(managedReconciler(m.GetClient(), nil, reconcile.Result{Requeue: true}), lost) //nolint:staticcheck // what crossplane-runtime returns after a create
	if got, _ := created.Reconcile(context.Background(), shop); got.RequeueAfter != 0 {
		t.Errorf("the next reconcile, no conflict: RequeueAfter %s, want the backoff (0)", got.RequeueAfter)
	}
	// Another object's conflict does not speed this one up.
	_ = lost.note(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, conflict)
	if got, _ := created.Reconcile(context.Background(), shop); got.RequeueAfter != 0 {
		t.Errorf("another object lost a write: RequeueAfter %s, want the backoff (0)", got.RequeueAfter)
	}
}
