package database

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"

	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// A data role's logins: the data role's role holds its privileges, and
// two login members take turns (tenancy.MemberName). This file takes the
// actions on them: a rotation gives the member not in use a new password
// and names it in the record, the login used before keeps its password for
// the grace period and then loses it, and a data role made before the
// members existed moves to them with its password unchanged.

// rotateDataRole rotates a data role's password, each step durable before
// the next: (start) the intent is recorded with the login in use, then a
// new random password is written as the next version with check-and-set,
// naming the member not in use as the username; then that member gets the
// password (created when it does not exist), a login proves it, and the
// completion is recorded with the login used before kept until the grace
// ends. Interrupted after the write, the next Observe finishes with that
// version's password and member, never a second one. A rotation an older
// release started on the role itself is finished on it.
func (e *external) rotateDataRole(ctx context.Context, t *dataRoleTurn, start bool) error {
	o, v := t.role.obs, t.role.verdict
	from := o.KV.Owner[tenancy.MetaRotationFrom]
	if from == "-" {
		from = ""
	}
	if start {
		target := tenancy.MemberName(o.Role, v.Target)
		from = t.username
		if err := e.kv.SetOwner(ctx, o.Path, tenancy.DataRoleRotationIntent(v.Rotation, t.version+1, from)); err != nil {
			return err
		}
		pw, err := NewPassword()
		if err != nil {
			return err
		}
		data := maps.Clone(o.KV.Data)
		data["password"], data["username"] = pw, target
		ver, err := e.kv.Write(ctx, o.Path, data, t.version)
		if err != nil {
			return err
		}
		if ver != t.version+1 {
			return errors.Errorf("the rotated credential was written as version %d of %s, not %d; the next observation decides", ver, o.Path, t.version+1)
		}
		t.password, t.username, t.version = pw, target, ver
	}
	if t.password == "" {
		return errors.Errorf("version %d of %s has no password; the next observation decides", t.version, o.Path)
	}
	if err := e.step(StepDataRoleRotateRole); err != nil {
		return err
	}
	ended, err := e.setLoginPassword(ctx, t)
	if err != nil {
		return err
	}
	if l := e.dataLogin(ctx, t.n.database, t.username, t.password); l != tenancy.LoginOK && l != tenancy.LoginAuthOK && l != tenancy.LoginLimitFull {
		return errors.Errorf("the rotated password of the role %q did not log in; retrying", t.username)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if from == t.username {
		from = ""
	}
	// A rotation asked with terminateSessions locks the old credential's
	// holders out (a rebind, a leak): no grace for it. A rotation by age,
	// or one another request asked, never does, whatever an earlier
	// request in the spec asked.
	terminate := v.Terminate
	grace := o.Policy.Grace
	if terminate {
		grace = 0
	}
	if err := e.kv.SetOwner(ctx, o.Path, tenancy.DataRoleRotationCompletion(v.Rotation, now, from, now.Add(grace))); err != nil {
		return err
	}
	msg := fmt.Sprintf("data role %q: the role %q logs in with version %d of %s", o.Name, t.username, t.version, o.Path)
	if from != "" && grace > 0 {
		msg += fmt.Sprintf("; %q keeps its password until %s", from, now.Add(grace).Format(time.RFC3339))
	}
	if from != "" && grace == 0 && e.provenLogin(t, from) {
		n, err := e.pool.RetireLogin(ctx, from, terminate)
		if err != nil {
			return err
		}
		ended += n
		if err := e.kv.SetOwner(ctx, o.Path, tenancy.PreviousLogin("", time.Time{})); err != nil {
			return err
		}
		msg += fmt.Sprintf("; %q has no password any more", from)
	}
	if ended > 0 {
		msg += fmt.Sprintf("; %d of its sessions ended", ended)
	}
	e.record.Event(t.db, event.Normal("DataRoleCredentialRotated", msg))
	return nil
}

// setLoginPassword gives the login the record names the record's
// password: a member is created with it, or gets it (with LOGIN and its
// membership back); the role itself (a rotation an older release started)
// gets it, ending its sessions in the same transaction when asked. It
// returns how many sessions ended.
func (e *external) setLoginPassword(ctx context.Context, t *dataRoleTurn) (int, error) {
	o := t.role.obs
	verifier, err := scram.Verifier(t.password)
	if err != nil {
		return 0, err
	}
	if t.username == o.Role {
		if o.Rotation.TerminateSessions {
			return e.pool.SetRolePasswordEndingSessions(ctx, o.Role, verifier)
		}
		return 0, e.pool.SetRolePassword(ctx, o.Role, verifier)
	}
	i := memberIndex(o.Role, t.username)
	if i == 0 {
		return 0, errors.Errorf("the record %s names %q, which is not a login of the data role %q; nothing was changed", o.Path, t.username, o.Name)
	}
	return 0, e.ensureMember(ctx, t, i, verifier)
}

// ensureMember creates member i with verifier, or, when it exists and is
// this Database's, gives it the verifier; then records its OID.
func (e *external) ensureMember(ctx context.Context, t *dataRoleTurn, i int, verifier string) error {
	o, member := t.role.obs, tenancy.MemberName(t.role.obs.Role, i)
	cat, err := e.pool.Observe(ctx, t.n.database, member)
	if err != nil {
		return err
	}
	recorded := o.KV.Owner[tenancy.MetaMemberOID(i)]
	switch {
	case !cat.RoleExists:
		if err := e.pool.CreateMember(ctx, o.Role, member, verifier, t.role.limits); err != nil {
			return err
		}
	case recorded != "" && recorded == fmt.Sprint(cat.RoleOID),
		recorded == "" && e.dataLogin(ctx, t.n.database, member, t.password).Accepted():
		if err := e.pool.SetMemberPassword(ctx, o.Role, member, verifier); err != nil {
			return err
		}
	default:
		return errors.Errorf("the role %q exists and is not this Database's; nothing of it was changed", member)
	}
	return e.writeMemberOID(ctx, t, i)
}

// writeMemberOID records member i's OID in the record's metadata.
func (e *external) writeMemberOID(ctx context.Context, t *dataRoleTurn, i int) error {
	o, member := t.role.obs, tenancy.MemberName(t.role.obs.Role, i)
	cat, err := e.pool.Observe(ctx, t.n.database, member)
	if err != nil {
		return err
	}
	if !cat.RoleExists {
		return errors.Errorf("the role %q does not exist after creating it", member)
	}
	return e.kv.SetOwner(ctx, o.Path, map[string]string{tenancy.MetaMemberOID(i): fmt.Sprint(cat.RoleOID)})
}

// memberIndex is the member role names of role (1 or 2), 0 for none.
func memberIndex(role, name string) int {
	for i := 1; i <= 2; i++ {
		if name == tenancy.MemberName(role, i) {
			return i
		}
	}
	return 0
}

// moveToMembers moves a data role that logs in as its role to its first
// member: the member gets the record's password, a new version of the
// record names it (the Secret follows), and the role keeps logging in for
// the grace period, or not at all when this turn created it (nobody had
// its credential yet).
func moveToMembers(ctx context.Context, t *dataRoleTurn) error {
	e, o := t.e, t.role.obs
	verifier, err := scram.Verifier(t.password)
	if err != nil {
		return err
	}
	if err := e.ensureMember(ctx, t, 1, verifier); err != nil {
		return err
	}
	setAt := o.KV.Owner[tenancy.MetaPasswordSetAt]
	if setAt == "" {
		setAt = o.KV.Owner[tenancy.MetaRotationCompletedAt]
	}
	if setAt == "" && !o.KV.Created.IsZero() {
		setAt = o.KV.Created.UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	if setAt == "" {
		setAt = time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	if err := e.kv.SetOwner(ctx, o.Path, map[string]string{tenancy.MetaPasswordSetAt: setAt}); err != nil {
		return err
	}
	rec, err := e.kv.Read(ctx, o.Path)
	if err != nil {
		return err
	}
	if rec == nil || rec.Version != t.version || rec.Data["password"] != t.password {
		return errors.Errorf("the record %s changed while its login moved; the next observation decides", o.Path)
	}
	member := tenancy.MemberName(o.Role, 1)
	data := maps.Clone(rec.Data)
	data["username"] = member
	ver, err := e.kv.Write(ctx, o.Path, data, t.version)
	if err != nil {
		return err
	}
	t.username, t.version = member, ver
	if t.created {
		if _, err := e.pool.RetireLogin(ctx, o.Role, false); err != nil {
			return err
		}
		return e.kv.SetOwner(ctx, o.Path, tenancy.PreviousLogin("", time.Time{}))
	}
	until := time.Now().Add(o.Policy.Grace)
	if err := e.kv.SetOwner(ctx, o.Path, tenancy.PreviousLogin(o.Role, until)); err != nil {
		return err
	}
	e.record.Event(t.db, event.Normal("DataRoleLoginMoved", fmt.Sprintf("data role %q: its credential now names the login %q (the same password); %q keeps logging in until %s", o.Name, member, o.Role, until.UTC().Format(time.RFC3339))))
	return nil
}

// createMember creates the member the record names again, with the
// record's password.
func createMember(ctx context.Context, t *dataRoleTurn) error {
	verifier, err := scram.Verifier(t.password)
	if err != nil {
		return err
	}
	i := memberIndex(t.role.obs.Role, t.username)
	if i == 0 {
		return errors.Errorf("the record names %q, which is not a login member of the data role %q", t.username, t.role.obs.Name)
	}
	return t.e.pool.CreateMember(ctx, t.role.obs.Role, t.username, verifier, t.role.limits)
}

// recordMemberOID records the OID of the member the record names.
func recordMemberOID(ctx context.Context, t *dataRoleTurn) error {
	i := memberIndex(t.role.obs.Role, t.username)
	if i == 0 {
		return nil
	}
	return t.e.writeMemberOID(ctx, t, i)
}

// repairMember gives the member in use back LOGIN, its membership, the
// admin's membership and its limits.
func repairMember(ctx context.Context, t *dataRoleTurn) error {
	if err := t.e.pool.RepairMember(ctx, t.role.obs.Role, t.username); err != nil {
		return err
	}
	return t.e.pool.SetRoleLimits(ctx, t.username, t.n.database, tenancy.DecideLimits(t.role.limits, t.role.memberLimits))
}

// retirePrevious takes the login of the previous login once its grace
// has ended (never the login in use, never a role this Database cannot
// prove it created), and records that no login is in its grace. Its
// sessions go on: the app's open connections are not cut, as the grace
// promised (a rotation with terminateSessions ends them at once instead).
func retirePrevious(ctx context.Context, t *dataRoleTurn) error {
	e, o, login := t.e, t.role.obs, t.role.verdict.Retire
	if login != t.username && e.provenLogin(t, login) {
		if _, err := e.pool.RetireLogin(ctx, login, false); err != nil {
			return err
		}
		e.record.Event(t.db, event.Normal("DataRolePreviousLoginEnded", fmt.Sprintf("data role %q: the grace of the login %q has ended: it has no password any more", o.Name, login)))
	}
	return e.kv.SetOwner(ctx, o.Path, tenancy.PreviousLogin("", time.Time{}))
}

// provenLogin reports whether login is the data role's role (proven
// already) or a member whose OID the record holds.
func (e *external) provenLogin(t *dataRoleTurn, login string) bool {
	o := t.role.obs
	if login == o.Role {
		return true
	}
	i := memberIndex(o.Role, login)
	if i == 0 {
		return false
	}
	m := o.Members[i-1]
	return m.Exists && o.KV.Owner[tenancy.MetaMemberOID(i)] == fmt.Sprint(m.OID)
}

// startGrace gives a login that can still log in, with no grace on
// record, one from now.
func startGrace(ctx context.Context, t *dataRoleTurn) error {
	o := t.role.obs
	return t.e.kv.SetOwner(ctx, o.Path, tenancy.PreviousLogin(t.role.verdict.Grace, time.Now().Add(o.Policy.Grace)))
}
