package memo

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Logins remembers, per Database, the last login as its role that
// succeeded and the record it used, so that a steady-state Observe reads
// the catalog but neither the record nor logs in unless something changed
// or the periodic check is due (tenancy.LoginDue, tenancy.RememberedRecord).
// Each data role's login is kept beside its Database's, under DataRoleKey.
// It lives in memory: after a restart, every Database reads its record and
// logs in at its first Observe. The DatabaseBinding controller asks it
// which record version stands (RecordVersion).
type Logins struct {
	*Memo[tenancy.ProvenLogin]
}

// NewLogins returns an empty memory of proven logins.
func NewLogins() *Logins {
	return &Logins{New(func(p tenancy.ProvenLogin) tenancy.ProvenLogin {
		p.Installed = slices.Clone(p.Installed)
		if p.Record != nil {
			r := p.Record.WithoutPassword()
			p.Record = &r
		}
		return p
	}, func(p tenancy.ProvenLogin) time.Time { return p.Due })}
}

// RecordVersion is the version of the Database's credential record that its
// last proven login used, while that login is not yet due again; ok is
// false when there is none (the Database reads its record at every
// Observe until a login is proven). An import's record is never
// remembered.
func (l *Logins) RecordVersion(uid types.UID, now time.Time) (version int, ok bool) {
	p := l.Get(uid)
	if p == nil || p.Record == nil || !now.Before(p.Due) {
		return 0, false
	}
	return p.Record.Version, true
}
