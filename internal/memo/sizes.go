package memo

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Sizes holds what each config's size refreshes know, in memory: the
// config status controller measures the sizes (one statement per
// postgres.SizeBatch databases of a config, every interval; see
// tenancy.PlanSizes and tenancy.MergeSizes for what a failed statement
// costs) and each Database copies its own into its status when it moved
// enough (tenancy.SizeWorthWriting). Lost on restart, when the first
// refresh measures again.
type Sizes struct {
	mu sync.Mutex
	m  map[types.UID]measured
}

type measured struct {
	name  string
	state tenancy.SizeState
}

// NewSizes returns an empty cache.
func NewSizes() *Sizes { return &Sizes{m: map[types.UID]measured{}} }

// Get returns the last known size of database on the config with that UID,
// and when it was measured (earlier than the last refresh when its
// measurement has failed since).
func (s *Sizes) Get(config types.UID, database string) (int64, time.Time, bool) {
	if s == nil {
		return 0, time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.m[config].state.Sizes[database]
	return m.Bytes, m.At, ok
}

// State is what the last refresh of the config with that UID left, for the
// next one to start from.
func (s *Sizes) State(config types.UID) tenancy.SizeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[config].state
}

// Put keeps what a refresh of the config with that UID and name found.
func (s *Sizes) Put(config types.UID, name string, st tenancy.SizeState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[config] = measured{name: name, state: st}
}

// ForgetName drops the sizes of the config of that name (it is gone).
func (s *Sizes) ForgetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, m := range s.m {
		if m.name == name {
			delete(s.m, uid)
		}
	}
}
