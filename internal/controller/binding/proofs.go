package binding

import (
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// RecordVersions tells which version of a Database's credential record
// the Database controller's standing login proved (database.Logins).
type RecordVersions interface {
	RecordVersion(uid types.UID, now time.Time) (version int, ok bool)
}

// proofs remembers, per binding, the last reading of its delivery in sync
// (tenancy.DeliveryCheckDue). It lives in memory: after a restart, every
// binding reads the record and the copy at its first Observe.
type proofs struct {
	mu     sync.Mutex
	last   map[types.UID]tenancy.DeliveryProof
	spread func() float64
}

func newProofs() *proofs {
	return &proofs{last: map[types.UID]tenancy.DeliveryProof{}, spread: rand.Float64}
}

// get returns a copy of the binding's last proof, or nil.
func (p *proofs) get(uid types.UID) *tenancy.DeliveryProof {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.last[uid]
	if !ok {
		return nil
	}
	return &d
}

func (p *proofs) put(uid types.UID, d tenancy.DeliveryProof) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[uid] = d
}

// forget drops the binding's proof: after a write, on a delivery not in
// sync, and on deletion.
func (p *proofs) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, uid)
}
