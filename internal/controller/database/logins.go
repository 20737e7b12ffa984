package database

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Logins remembers, per Database, the last login as its role that
// succeeded and the record it used, so that a steady-state Observe reads
// the catalog but neither the record nor logs in unless something changed
// or the periodic check is due (tenancy.LoginDue, tenancy.RememberedRecord).
// It lives in memory: after a restart, every Database reads its record and
// logs in at its first Observe. The DatabaseBinding controller asks it
// which record version stands (RecordVersion).
type Logins struct {
	mu     sync.Mutex
	proven map[types.UID]tenancy.ProvenLogin
	spread func() float64
}

// NewLogins returns an empty memory of proven logins.
func NewLogins() *Logins {
	return &Logins{proven: map[types.UID]tenancy.ProvenLogin{}, spread: rand.Float64}
}

// get returns a copy of the Database's last proven login, or nil.
func (l *Logins) get(uid types.UID) *tenancy.ProvenLogin {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.proven[uid]
	if !ok {
		return nil
	}
	p.Installed = slices.Clone(p.Installed)
	return &p
}

func (l *Logins) put(uid types.UID, p tenancy.ProvenLogin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.proven[uid] = p
}

// forget drops what is known of a Database's login: after any write (a
// create, repair, rotation or deletion step) the next Observe logs in.
func (l *Logins) forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.proven, uid)
}

// RecordVersion is the version of the Database's credential record that its
// last proven login used, while that login is not yet due again; ok is
// false when there is none (the Database reads its record at every
// Observe until a login is proven). An import's record is never
// remembered.
func (l *Logins) RecordVersion(uid types.UID, now time.Time) (version int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, found := l.proven[uid]
	if !found || p.Record == nil || !now.Before(p.Due) {
		return 0, false
	}
	return p.Record.Version, true
}
