package config

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// DefaultSizeInterval is how often, at most, the sizes of one config's
// databases are measured.
const DefaultSizeInterval = 5 * time.Minute

// Sizes holds the last measured sizes of each config's databases, in
// memory: the config status controller measures them (one statement per
// postgres.SizeBatch databases of a config, every interval) and each Database copies its own into its status
// when it moved enough (tenancy.SizeWorthWriting). Lost on restart, when
// the first refresh measures again.
type Sizes struct {
	mu sync.Mutex
	m  map[types.UID]measured
}

type measured struct {
	name  string
	at    time.Time
	bytes map[string]int64
}

// NewSizes returns an empty cache.
func NewSizes() *Sizes { return &Sizes{m: map[types.UID]measured{}} }

// Get returns the size of database on the config with that UID, and when
// it was measured.
func (s *Sizes) Get(config types.UID, database string) (int64, time.Time, bool) {
	if s == nil {
		return 0, time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.m[config]
	if !ok {
		return 0, time.Time{}, false
	}
	b, ok := m.bytes[database]
	return b, m.at, ok
}

func (s *Sizes) last(config types.UID) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[config].at
}

func (s *Sizes) put(config types.UID, name string, at time.Time, bytes map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[config] = measured{name: name, at: at, bytes: bytes}
}

// forgetName drops the sizes of the config of that name (it is gone).
func (s *Sizes) forgetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, m := range s.m {
		if m.name == name {
			delete(s.m, uid)
		}
	}
}

// refreshSizes measures the databases of the config's Databases when due,
// (one statement per postgres.SizeBatch of them), and writes the total and the largest into its status.
// It reports whether the status changed. A failure is logged and retried
// at the next health check: sizes are a report.
func (r *statusReconciler) refreshSizes(ctx context.Context, obj *v1alpha1.ClusterProviderConfig, ref string) bool {
	s := r.opts.Sizes
	now := time.Now()
	if s == nil || !tenancy.SizeRefreshDue(s.last(obj.GetUID()), now, r.opts.SizeInterval) {
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
	// Each statement of the refresh is bounded by the pool's call
	// timeout (postgres.SizeBatch databases each).
	start := time.Now()
	bytes, err := pool.DatabaseSizes(ctx, names)
	if err != nil {
		r.log.Debug("cannot measure the databases", "config", ref, "error", err)
		return false
	}
	s.put(obj.GetUID(), obj.GetName(), now, bytes)
	sum := tenancy.SummarizeSizes(databases, bytes)
	r.log.Debug("Measured the databases", "config", ref, "databases", sum.Databases, "total", sum.Total, "took", time.Since(start))
	st := obj.ConfigStatus()
	prev := st.Sizes
	if prev != nil && prev.Databases == sum.Databases && !tenancy.SizeWorthWriting(&v1alpha1.DatabaseSize{Bytes: prev.TotalBytes}, sum.TotalBytes) && largestSame(prev.Largest, sum.Largest) {
		return false
	}
	sum.MeasuredAt = &metav1.Time{Time: now}
	st.Sizes = &sum
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
