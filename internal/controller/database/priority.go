package database

import (
	"context"
	"time"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// confirmPriority is the work queue priority of the Observe that follows a
// create. controller-runtime's priority queue serves higher priorities
// first; events are 0, and the initial list and resyncs are lower.
const confirmPriority = 10

// statusConflictRetry is the wait after a status write lost to a newer
// version of the Database (the reconcile read a cache that had not yet seen
// the previous write). Returned as an error, the conflict went through the
// per-item backoff, which a create's own requeue had already raised to 2 s:
// measured as the whole p99 of a Tenant's time to Ready.
const statusConflictRetry = 100 * time.Millisecond

// confirmFirst gives the reconcile that follows a create (the managed
// reconciler asks for it with an immediate requeue) priority over the
// Databases still waiting for their first reconcile. Without it, in a wave
// of N new Databases, the Observe that proves each one Ready queues behind
// every create not started yet, and the first Database is Ready only when
// the whole wave is created. A reconcile that lost a write to a newer
// version of the Database is retried shortly, with the same priority.
func confirmFirst(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil && kerrors.IsConflict(err) {
			// Nothing failed: the next reconcile reads the newer version
			// and decides again from what it observes.
			return reconcile.Result{RequeueAfter: statusConflictRetry, Priority: ptr.To(confirmPriority)}, nil
		}
		if err == nil && res.Requeue && res.RequeueAfter == 0 { //nolint:staticcheck // crossplane-runtime asks for the Observe after a create with Requeue
			res.Priority = ptr.To(confirmPriority)
		}
		return res, err
	})
}
