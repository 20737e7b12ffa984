// Package requeue decides when a managed resource is reconciled again after
// a reconcile that asked for it at once: the Observe that follows a create,
// and the retry of a write that lost to a newer version of the object.
//
// crossplane-runtime's managed reconciler turns every write conflict into
// an immediate requeue without an error, and so does it after a create and
// after most failures. controller-runtime sends all three through the
// per-object exponential backoff (one second, then two, four…), which is
// right for failures and wrong for the other two: after a create the
// resource waits behind every new resource of a wave, and a reconcile
// that read a cache one write behind (the usual cause of a conflict right
// after a create) waits two seconds for nothing.
package requeue

import (
	"context"
	"sync"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Priority is the work queue priority of an immediate requeue.
// controller-runtime's priority queue serves higher priorities first;
// events are 0, and the initial list and resyncs are lower.
const Priority = 10

// ConflictRetry is the wait after a write lost to a newer version of the
// object: long enough for the cache to see the newer version.
const ConflictRetry = 100 * time.Millisecond

// Lost records the objects whose write lost to a newer version during the
// reconcile in progress. A controller never reconciles one object twice at
// once, so an object's record belongs to its reconcile.
type Lost struct {
	mu   sync.Mutex
	keys map[types.NamespacedName]struct{}
}

// NewLost returns an empty record.
func NewLost() *Lost { return &Lost{keys: map[types.NamespacedName]struct{}{}} }

func (l *Lost) note(obj client.Object, err error) error {
	if kerrors.IsConflict(err) {
		l.mu.Lock()
		l.keys[client.ObjectKeyFromObject(obj)] = struct{}{}
		l.mu.Unlock()
	}
	return err
}

// take reports whether a write of key lost, and forgets it.
func (l *Lost) take(key types.NamespacedName) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.keys[key]
	delete(l.keys, key)
	return ok
}

// Reconciler wraps r: an immediate requeue after a lost write comes back
// after ConflictRetry, not through the backoff; every immediate requeue
// goes ahead of the queue, and every other requeue (a poll, a failure's
// backoff) goes back to the ordinary priority. Requeues after failures
// keep their backoff.
func Reconciler(r reconcile.Reconciler, lost *Lost) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		lostWrite := lost.take(req.NamespacedName)
		if err != nil || !res.Requeue || res.RequeueAfter != 0 { //nolint:staticcheck // crossplane-runtime asks for immediate requeues with Requeue
			// controller-runtime requeues with the priority the request
			// had unless the result names one: without this, a resource
			// once requeued ahead would poll ahead forever, and with
			// enough Ready resources their polls starve new ones.
			res.Priority = ptr.To(0)
			return res, err
		}
		res.Priority = ptr.To(Priority)
		if lostWrite {
			// Nothing failed: the next reconcile reads the newer version
			// and decides again from what it observes.
			return reconcile.Result{RequeueAfter: ConflictRetry, Priority: res.Priority}, nil
		}
		return res, nil
	})
}

// Manager is mgr as a managed reconciler sees it: its client records the
// writes that lose to a newer version in lost.
type Manager struct {
	ctrl.Manager
	Lost *Lost
}

// GetClient returns mgr's client, recording conflicts.
func (m Manager) GetClient() client.Client {
	return recording{Client: m.Manager.GetClient(), lost: m.Lost}
}

type recording struct {
	client.Client
	lost *Lost
}

func (c recording) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.lost.note(obj, c.Client.Update(ctx, obj, opts...))
}

func (c recording) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.lost.note(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c recording) Status() client.SubResourceWriter {
	return recordingStatus{SubResourceWriter: c.Client.Status(), lost: c.lost}
}

type recordingStatus struct {
	client.SubResourceWriter
	lost *Lost
}

func (w recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return w.lost.note(obj, w.SubResourceWriter.Update(ctx, obj, opts...))
}

func (w recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return w.lost.note(obj, w.SubResourceWriter.Patch(ctx, obj, patch, opts...))
}
