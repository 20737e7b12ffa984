package tenancy

import (
	"fmt"
	"time"
)

// ProvenLogin is what the last successful login as a Database's role
// proved, kept between Observes so that not every poll has to log in.
type ProvenLogin struct {
	// Fingerprint is the catalog's and the record's state the login was
	// made under (see LoginCheck).
	Fingerprint string
	// Installed are the extensions the login listed.
	Installed []string
	// Due is when the credential must be proven by a login again.
	Due time.Time
}

// LoginCheck is what decides whether an Observe logs in as the role.
type LoginCheck struct {
	// Last is the last proven login, nil if none is known (a new
	// Database, or the provider restarted).
	Last *ProvenLogin
	// Fingerprint is the state observed now: everything the catalog shows
	// that decides whether the credential logs in (the objects' OIDs, the
	// role's attributes and expiry, CONNECT, the owner, and the password
	// verifier where the admin may read it) and the record's version.
	Fingerprint string
	Now         time.Time
}

// LoginDue returns why Observe must log in as the role now, or "" when the
// last proven login still stands. A login is skipped only when nothing the
// catalog or the record shows has changed since it, it is not yet due, and
// the Database is in the steady state where a login only confirms what is
// known: provisioned by this Database, with its ownership on record, not
// being deleted, no credential rotation pending. Everything else (first
// observation, provisioning, repairs, conflicts, imports, deletion,
// rotation) logs in every time, as before.
func LoginDue(o Observation, c LoginCheck) string {
	switch {
	case c.Last == nil:
		return "no login proven since the provider started"
	case o.Import:
		return "an import is proven by its credential on every observation"
	case o.Deleting:
		return "deleting"
	case o.Rotation.ID != o.Rotation.StatusID:
		return "a credential rotation is pending"
	case !KVOurs(o.KV, o.Identity) || o.KV.Owner[MetaRoleOID] == "" || o.KV.Owner[MetaDatabaseOID] == "":
		return "ownership is not on record yet"
	case c.Fingerprint != c.Last.Fingerprint:
		return "the catalog or the credential record changed since the last login"
	case !c.Now.Before(c.Last.Due):
		return "the periodic login check is due"
	}
	return ""
}

// NextLoginDue is when a login made at now must be repeated: every after
// it, moved earlier by up to a quarter of every by spread (a number in
// [0, 1), random per login), so that Databases created together do not log
// in together ever after. every <= 0 means every Observe logs in.
func NextLoginDue(now time.Time, every time.Duration, spread float64) time.Time {
	if every <= 0 {
		return now
	}
	if spread < 0 || spread >= 1 {
		panic(fmt.Sprintf("spread %v outside [0, 1)", spread))
	}
	return now.Add(every - time.Duration(spread*float64(every)/4))
}
