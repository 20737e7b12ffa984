// Package memo keeps, in memory and per object, what a controller proved or
// measured at its last look (a login, a delivery in sync, a database's
// size), so that later polls can rely on it until it is due again. The
// memories one controller fills and another reads (Logins, Sizes) live
// here, with the keys both spell them by (DataRoleKey, PoolRef), so that
// no controller imports another. Nothing in it survives a restart. A Memo
// keeps nothing after it is due: what was kept for an object deleted
// while its controller was not looking is dropped once due; Sizes drops a
// config's sizes once the config is gone.
package memo

import (
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Memo maps an object's UID to what was proven of it. It is safe for
// concurrent use.
type Memo[T any] struct {
	mu    sync.Mutex
	m     map[types.UID]T
	clone func(T) T
	due   func(T) time.Time
	// puts counts the Puts since the last sweep.
	puts int
	// Spread returns a number in [0, 1), random per call, for spreading
	// the next check of each object.
	Spread func() float64
}

// New returns an empty Memo. clone, when not nil, copies a value's shared
// parts (slices, maps) on the way out, so that a caller cannot change what
// is kept. due is when a value stops being relied on: the caller proves
// the object afresh from then on, so a value past it is only memory, and
// Put drops such values now and then.
func New[T any](clone func(T) T, due func(T) time.Time) *Memo[T] {
	return &Memo[T]{m: map[types.UID]T{}, clone: clone, due: due, Spread: rand.Float64}
}

// Get returns a copy of what is kept for uid, or nil.
func (m *Memo[T]) Get(uid types.UID) *T {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[uid]
	if !ok {
		return nil
	}
	if m.clone != nil {
		v = m.clone(v)
	}
	return &v
}

// Put keeps v for uid. Once there have been as many Puts as values kept
// since the last sweep (so a sweep costs O(1) per Put), it drops every
// value whose due time is not after now: those of objects that were
// deleted, or have not been looked at since they fell due.
func (m *Memo[T]) Put(uid types.UID, v T, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[uid] = v
	m.puts++
	if m.due == nil || m.puts < len(m.m) {
		return
	}
	m.puts = 0
	for k, kept := range m.m {
		if !now.Before(m.due(kept)) {
			delete(m.m, k)
		}
	}
}

// Len is the number of values kept.
func (m *Memo[T]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// Forget drops what is kept for uid: the next look proves it afresh.
func (m *Memo[T]) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, uid)
}
