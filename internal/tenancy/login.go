package tenancy

import (
	"fmt"
	"maps"
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
	// Record is the credential record the login was made with, its
	// password withheld (WithoutPassword): what an Observe uses instead of
	// reading OpenBao while the login stands (RememberedRecord). nil: the
	// record is read at every Observe.
	Record *KVState
}

// withheldPassword stands in a remembered record for the password that
// was read and proven but is not kept in memory. It can never be a
// password the provider generates or a login would send: RememberedRecord
// hands a remembered record out only while no login is due.
const withheldPassword = "\x00password withheld"

// PasswordWithheld reports whether pw is the marker a remembered record
// holds instead of its password: never a password to set or send.
func PasswordWithheld(pw string) bool { return pw == withheldPassword }

// WithoutPassword returns a copy of the record whose password, when it has
// one, is replaced by a marker that is not the password: enough for every
// decision that needs to know a password is there, useless for a login.
func (k KVState) WithoutPassword() KVState {
	c := KVState{Present: k.Present, Version: k.Version, Owner: maps.Clone(k.Owner), Data: maps.Clone(k.Data), Created: k.Created}
	if c.Data["password"] != "" {
		c.Data["password"] = withheldPassword
	}
	return c
}

// RememberedRecord returns the record an Observe may use instead of
// reading OpenBao: the one kept with the last proven login, as long as that
// login still stands (LoginDue returns "" with it). fingerprint gives the
// login fingerprint of the catalog's state now with a record version. nil:
// read the record. The record is then read as often as the role logs in:
// at the periodic check, after every write, whenever the catalog changes,
// and at every Observe of a Database not in the steady state. An Observe
// that used it and finds anything to do reads the record again before it
// acts (Steady).
func RememberedRecord(o Observation, c LoginCheck, fingerprint func(version int) string) *KVState {
	if c.Last == nil || c.Last.Record == nil {
		return nil
	}
	rec := c.Last.Record.WithoutPassword()
	o.KV = rec
	c.Fingerprint = fingerprint(rec.Version)
	if LoginDue(o, c) != "" {
		return nil
	}
	return &rec
}

// Steady reports whether a verdict leaves nothing to do: the Database is
// Ready, exists, is up to date, and no repair, rotation or attention is
// needed (nor an access cleanup). Only such a verdict may stand on a remembered record.
func Steady(v Verdict) bool {
	return v.Ready && v.Exists && v.UpToDate && v.Reason == "" && v.Conflict == "" &&
		len(v.Repairs) == 0 && len(v.Differences) == 0 && v.Rotation.Action == RotateNone && v.Cleanup.ID == ""
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
