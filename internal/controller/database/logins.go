package database

import (
	"math/rand/v2"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// logins remembers, per Database, the last login as its role that
// succeeded, so that a steady-state Observe reads the catalog and the
// record but logs in only when something changed or the periodic check is
// due (tenancy.LoginDue). It lives in memory: after a restart, every
// Database logs in at its first Observe.
type logins struct {
	mu     sync.Mutex
	proven map[types.UID]tenancy.ProvenLogin
	spread func() float64
}

func newLogins() *logins {
	return &logins{proven: map[types.UID]tenancy.ProvenLogin{}, spread: rand.Float64}
}

// get returns a copy of the Database's last proven login, or nil.
func (l *logins) get(uid types.UID) *tenancy.ProvenLogin {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.proven[uid]
	if !ok {
		return nil
	}
	p.Installed = slices.Clone(p.Installed)
	return &p
}

func (l *logins) put(uid types.UID, p tenancy.ProvenLogin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.proven[uid] = p
}

// forget drops what is known of a Database's login: after any write (a
// create, repair, rotation or deletion step) the next Observe logs in.
func (l *logins) forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.proven, uid)
}
