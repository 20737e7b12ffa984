package database

import (
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"k8s.io/apimachinery/pkg/types"
)

// After a repair, Crossplane waits a whole poll interval (1 m by default)
// before the Observe that can report the Database Ready again. A repair
// right after a create (measured in the benchmark) or on a Ready Database
// would leave it not Ready for that long. The Database is observed again
// after confirmAfterRepair instead, at most once per poll interval, so a
// repair that does not hold never turns into a fast loop.
const confirmAfterRepair = 2 * time.Second

// confirmAfterCreate is the wait before the Observe that confirms data
// roles just created: PostgreSQL and OpenBao read their writes at once, so
// it is only long enough for the informer cache to see the status the
// create wrote (a reconcile that reads an older one loses its status write
// to a conflict). A creation happens once per role, so it cannot loop; a
// new Tenant's Secrets wait for it.
const confirmAfterCreate = 100 * time.Millisecond

// confirmer remembers which Databases were just repaired.
type confirmer struct {
	mu       sync.Mutex
	repaired map[types.UID]bool
	// created: a data role was just created (once per role: it cannot
	// loop), observed again after confirmAfterCreate whatever the last
	// early confirmation.
	created map[types.UID]bool
	last    map[types.UID]time.Time
	// at: a Database to observe again at a time (a grace ending, a
	// rotation by age), when that is sooner than the poll interval.
	at  map[types.UID]time.Time
	now func() time.Time
}

func newConfirmer() *confirmer {
	return &confirmer{repaired: map[types.UID]bool{}, created: map[types.UID]bool{}, last: map[types.UID]time.Time{}, at: map[types.UID]time.Time{}, now: time.Now}
}

// Repaired records that a repair of the Database with this UID succeeded.
func (c *confirmer) Repaired(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.repaired[uid] = true
}

// Created records that a data role of the Database with this UID was
// created: a new Tenant's Database is Ready only once its data roles are,
// and that must not wait a poll interval behind the owner's own early
// confirmation.
func (c *confirmer) Created(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created[uid] = true
}

// At records that the Database with this UID has something due at t (a
// zero t: nothing); the earliest of a reconcile's calls counts.
func (c *confirmer) At(uid types.UID, t time.Time) {
	if t.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.at[uid]; !ok || t.Before(cur) {
		c.at[uid] = t
	}
}

// PollInterval is a managed.PollIntervalHook: poll, or confirmAfterRepair
// once after a repair unless the previous early confirmation of the same
// Database was less than a poll interval ago.
func (c *confirmer) PollInterval(mg resource.Managed, poll time.Duration) time.Duration {
	uid := mg.GetUID()
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.at[uid]; ok {
		// Due before the next poll: observed again then (a second after,
		// so that it is due), never sooner than a second from now.
		delete(c.at, uid)
		if d := max(t.Sub(c.now())+time.Second, time.Second); d < poll {
			poll = d
		}
	}
	if c.created[uid] {
		delete(c.created, uid)
		delete(c.repaired, uid)
		return min(poll, confirmAfterCreate)
	}
	if !c.repaired[uid] {
		return poll
	}
	delete(c.repaired, uid)
	now := c.now()
	for k, t := range c.last { // forget Databases confirmed long ago
		if now.Sub(t) >= poll {
			delete(c.last, k)
		}
	}
	if _, recent := c.last[uid]; recent || poll <= confirmAfterRepair {
		return poll
	}
	c.last[uid] = now
	return confirmAfterRepair
}
