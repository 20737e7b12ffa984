package config

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// DefaultSizeInterval is how often, at most, the sizes of one config's
// databases are measured.
const DefaultSizeInterval = 5 * time.Minute

// refreshSizes measures the databases of the config's Databases when due
// (tenancy.SizeRefreshDue), one statement per postgres.SizeBatch of them,
// each bounded by postgres.SizeStatementTimeout, and writes the total, the
// largest, the stale and the databases that could not be measured into its
// status. It reports whether the status changed. A failed statement costs
// only its own batch (tenancy.MergeSizes); sizes are a report.
func (r *statusReconciler) refreshSizes(ctx context.Context, obj *v1alpha1.ClusterProviderConfig, ref string) bool {
	s := r.opts.Sizes
	now := time.Now()
	if s == nil {
		return false
	}
	prevState := s.State(obj.GetUID())
	if !tenancy.SizeRefreshDue(prevState, now, r.opts.SizeInterval) {
		return false
	}
	pool, ok := r.opts.Pools.Lookup(ref, obj.GetUID())
	if !ok {
		return false
	}
	l := &v1alpha1.DatabaseList{}
	if err := r.kube.List(ctx, l); err != nil {
		r.log.Debug("cannot list the Databases to measure", "config", ref, "error", err)
		return false
	}
	databases := map[string]string{}
	var names []string
	for _, db := range l.Items {
		if pc := db.GetProviderConfigReference(); pc == nil || pc.Name != obj.GetName() {
			continue
		}
		databases[db.GetName()] = db.Spec.ForProvider.Database
		names = append(names, db.Spec.ForProvider.Database)
	}
	start := time.Now()
	batches, deferred := tenancy.PlanSizes(names, prevState.Failed, now, postgres.SizeBatch)
	outcomes, problem := pool.MeasureSizes(ctx, batches)
	next := tenancy.MergeSizes(prevState, names, outcomes, problem, now, r.opts.SizeRetryBase)
	s.Put(obj.GetUID(), obj.GetName(), next)
	sum := tenancy.SummarizeSizeState(databases, next)
	r.log.Debug("Measured the databases", "config", ref, "databases", sum.Databases, "total", sum.Total, "statements", len(batches),
		"deferred", len(deferred), "notMeasured", sum.NotMeasured, "problem", problem, "took", time.Since(start))
	st := obj.ConfigStatus()
	prev := st.Sizes
	if prev != nil && prev.Databases == sum.Databases && !tenancy.SizeWorthWriting(&v1alpha1.DatabaseSize{Bytes: prev.TotalBytes}, sum.TotalBytes) &&
		largestSame(prev.Largest, sum.Largest) && prev.Stale == sum.Stale && prev.NotMeasured == sum.NotMeasured &&
		notMeasuredSame(prev.NotMeasuredDatabases, sum.NotMeasuredDatabases) && prev.Problem == sum.Problem {
		return false
	}
	at := next.At
	if at.IsZero() {
		at = now
	}
	sum.MeasuredAt = &metav1.Time{Time: at}
	st.Sizes = &sum
	return true
}

// notMeasuredSame: the same databases failing for the same reasons (the
// next attempt moves with every failure and is not compared).
func notMeasuredSame(a, b []v1alpha1.SizeNotMeasured) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Database != b[i].Database || a[i].Reason != b[i].Reason {
			return false
		}
	}
	return true
}

// largestSame: the same databases, in the same order, each within the
// change that writes a Database's size.
func largestSame(a, b []v1alpha1.NamedDatabaseSize) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || tenancy.SizeWorthWriting(&v1alpha1.DatabaseSize{Bytes: a[i].Bytes}, b[i].Bytes) {
			return false
		}
	}
	return true
}
