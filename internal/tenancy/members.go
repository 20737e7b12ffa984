package tenancy

import (
	"fmt"
	"hash/fnv"
	"time"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// A data role is two kinds of role: the role <owner>_<name> holds its
// privileges and cannot log in, and two login members, <owner>_<name>_1 and
// _2, inherit them and take turns. The credential record's username names
// the member in use. A rotation gives the other member a new password and
// makes it the record's username; the member in use until then keeps its
// password for a grace period, so that every app reads the new Secret
// before the old credential stops working, and then gets none
// (NOLOGIN, PASSWORD NULL). A data role made before the members existed
// logs in as its role itself: it moves to the members the same way, with
// its password unchanged.

// DataRoleRoles are every role of the data role name of a Database whose
// owner is owner: its role and its two login members.
func DataRoleRoles(owner, name string) []string {
	r := DataRoleName(owner, name)
	return []string{r, MemberName(r, 1), MemberName(r, 2)}
}

// MemberName is the login member i (1 or 2) of the data role role.
func MemberName(role string, i int) string { return fmt.Sprintf("%s_%d", role, i) }

// Keys of a data role's record's metadata about its logins.
const (
	// MetaPreviousLogin names the login that logged in before the last
	// switch and keeps its password until MetaPreviousUntil ("-": none).
	MetaPreviousLogin = "previous-login"
	MetaPreviousUntil = "previous-login-until"
	// MetaPasswordSetAt is when the current password was set (RFC 3339).
	MetaPasswordSetAt = "password-set-at"
	// MetaRotationFrom is the login in use when the rotation whose intent
	// is recorded started: the previous login once it completes.
	MetaRotationFrom = "rotation-from"
	// MetaRotationScheduled marks a rotation the credential policy's
	// maxAge started: the password-set-at time of the password it
	// replaces (one rotation per age); MetaRotationCompletedScheduled the
	// last completed.
	MetaRotationScheduled          = "rotation-scheduled"
	MetaRotationCompletedScheduled = "rotation-completed-scheduled"
)

// MetaMemberOID is the key of the OID of the member i this Database created.
func MetaMemberOID(i int) string { return fmt.Sprintf("member-%d-oid", i) }

// DefaultGracePeriod is how long the previous login keeps its password
// after a rotation when the policy says nothing: the kubelet refreshes a
// mounted Secret within about a minute and a half of its change (its
// sync period plus its cache's), and an app reading it on reconnect then
// switches; ten minutes leaves room for a slow kubelet and a retrying app.
const DefaultGracePeriod = 10 * time.Minute

// CredentialPolicy is the credential policy in effect for one data role.
type CredentialPolicy struct {
	// MaxAge: a password this old is rotated (0: never by age).
	MaxAge time.Duration
	// Grace is how long the previous login keeps its password.
	Grace time.Duration
	// Offset brings this role's rotation forward by a fixed part of the
	// last tenth of MaxAge, so that roles made at once rotate apart.
	Offset time.Duration
}

// CredentialPolicyOf is the policy of the data role key (a stable,
// unique key: the Database's UID and the role's name) from the config's
// policy and the Database's override.
func CredentialPolicyOf(cfg, db *v1alpha1.CredentialPolicy, key string) CredentialPolicy {
	p := CredentialPolicy{Grace: DefaultGracePeriod}
	for _, c := range []*v1alpha1.CredentialPolicy{cfg, db} {
		if c == nil {
			continue
		}
		if c.MaxAge != nil {
			p.MaxAge = c.MaxAge.Duration
		}
		if c.GracePeriod != nil {
			p.Grace = max(c.GracePeriod.Duration, 0)
		}
	}
	if p.MaxAge > 0 {
		p.Offset = RotationOffset(p.MaxAge, key)
	}
	return p
}

// RotationOffset is a point of [0, maxAge/10) fixed by key.
func RotationOffset(maxAge time.Duration, key string) time.Duration {
	span := maxAge / 10
	if span <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return time.Duration(h.Sum64() % uint64(span)) //nolint:gosec // less than span, a positive Duration
}

// MemberState is what the catalog shows of one login member.
type MemberState struct {
	Exists bool
	OID    uint32
	// CanLogin: LOGIN.
	CanLogin bool
	// AttributesOK: NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
	// NOBYPASSRLS.
	AttributesOK bool
	// Inherits: a member of the data role that uses its privileges.
	Inherits bool
	// AdminMember: the admin holds the membership provisioning needs.
	AdminMember bool
	// LimitsDrifted: its connection limit or session defaults differ from
	// the limits in effect for the data role.
	LimitsDrifted bool
	// Login is a login as it with the record's password, tried when the
	// record does not name it and its OID is not on record (a move to the
	// members interrupted before its OID was recorded).
	Login Login
}

// logins is what a data role's record and catalog say of its logins.
type logins struct {
	// active is the record's username: 0 the role itself (a data role not
	// moved yet), 1 or 2 a member, -1 none of them.
	active int
	// previous and until: the login in its grace (previousIdx as active).
	previous    string
	previousIdx int
	until       time.Time
	// setAt is when the current password was set (zero when unknown).
	setAt time.Time
}

func loginIndex(role, login string) int {
	switch login {
	case role:
		return 0
	case MemberName(role, 1):
		return 1
	case MemberName(role, 2):
		return 2
	}
	return -1
}

func loginsOf(o DataRoleObservation) logins {
	l := logins{active: loginIndex(o.Role, o.KV.Data["username"]), previousIdx: -1}
	if p := o.KV.Owner[MetaPreviousLogin]; p != "" && p != "-" {
		l.previous, l.previousIdx = p, loginIndex(o.Role, p)
		l.until, _ = time.Parse(time.RFC3339, o.KV.Owner[MetaPreviousUntil])
	}
	for _, k := range []string{MetaPasswordSetAt, MetaRotationCompletedAt} {
		if t, err := time.Parse(time.RFC3339, o.KV.Owner[k]); err == nil {
			l.setAt = t
			break
		}
	}
	if l.setAt.IsZero() {
		l.setAt = o.KV.Created
	}
	return l
}

// inGrace: the previous login still keeps its password at now.
func (l logins) inGrace(now time.Time) bool { return l.previous != "" && now.Before(l.until) }

// memberOurs reports whether member i exists and is provably this
// Database's: its OID is on record, or, before it is (a create
// interrupted), the record's password logs in as it while the record names
// it.
func memberOurs(o DataRoleObservation, i int, active int) bool {
	m := o.Members[i-1]
	if !m.Exists {
		return false
	}
	if oid := o.KV.Owner[MetaMemberOID(i)]; oid != "" {
		return oid == fmt.Sprint(m.OID)
	}
	return (active == i && passwordAccepted(o.Login)) || passwordAccepted(m.Login)
}

// DataRoleLogins is what status shows of a data role's logins.
type DataRoleLogins struct {
	// Login is the record's username; Previous the login in its grace
	// until PreviousUntil.
	Login, Previous string
	PreviousUntil   time.Time
	// PasswordSetAt and NextRotation (zero without a maxAge).
	PasswordSetAt, NextRotation time.Time
}

// LoginsOf reads what status shows of a data role's logins from its
// observation (its record ours).
func LoginsOf(o DataRoleObservation) DataRoleLogins {
	l := loginsOf(o)
	s := DataRoleLogins{Login: o.KV.Data["username"], PasswordSetAt: l.setAt}
	if l.inGrace(o.Now) {
		s.Previous, s.PreviousUntil = l.previous, l.until
	}
	if due, ok := rotationDue(o, l); ok {
		s.NextRotation = due
	}
	return s
}

// rotationDue is when the policy's maxAge rotates the current password.
func rotationDue(o DataRoleObservation, l logins) (time.Time, bool) {
	if o.Policy.MaxAge <= 0 || l.setAt.IsZero() {
		return time.Time{}, false
	}
	return l.setAt.Add(o.Policy.MaxAge - o.Policy.Offset), true
}

// WakeAt is the next time something of the data role is due without any
// change: the end of the previous login's grace, or the policy's next
// rotation (zero: nothing).
func (v DataRoleVerdict) WakeAt() time.Time { return v.wake }

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// otherLogins are the logins of a member-model data role that can log in
// besides the active one and the previous one: a switch interrupted before
// its grace was recorded, or a login someone enabled. Each is given a
// grace from now (nobody is cut off without one) when no other login is in
// its grace, else left for after it.
func otherLogins(o DataRoleObservation, l logins) []string {
	var out []string
	if l.active != 0 && o.R.CanLogin && l.previousIdx != 0 {
		out = append(out, o.Role)
	}
	for i := 1; i <= 2; i++ {
		if i == l.active || i == l.previousIdx || !o.Members[i-1].CanLogin || !memberOurs(o, i, l.active) {
			continue
		}
		out = append(out, MemberName(o.Role, i))
	}
	return out
}

// switchTarget is the member a rotation gives the new password: the one
// not in use.
func switchTarget(active int) int {
	if active == 1 {
		return 2
	}
	return 1
}
