// Package memo keeps, in memory and per object, what a controller proved at
// its last look (a login, a delivery in sync), so that later polls can
// rely on it until it is due again. Nothing in it survives a restart.
package memo

import (
	"math/rand/v2"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Memo maps an object's UID to what was proven of it. It is safe for
// concurrent use.
type Memo[T any] struct {
	mu    sync.Mutex
	m     map[types.UID]T
	clone func(T) T
	// Spread returns a number in [0, 1), random per call, for spreading
	// the next check of each object.
	Spread func() float64
}

// New returns an empty Memo. clone, when not nil, copies a value's shared
// parts (slices, maps) on the way out, so that a caller cannot change what
// is kept.
func New[T any](clone func(T) T) *Memo[T] {
	return &Memo[T]{m: map[types.UID]T{}, clone: clone, Spread: rand.Float64}
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

// Put keeps v for uid.
func (m *Memo[T]) Put(uid types.UID, v T) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[uid] = v
}

// Forget drops what is kept for uid: the next look proves it afresh.
func (m *Memo[T]) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, uid)
}
