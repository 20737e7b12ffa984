package tenancy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// DataRoleName is the login role of the data role name of a database whose
// owner is owner.
func DataRoleName(owner, name string) string { return owner + "_" + name }

// DataRolePath is the credential record of the data role name of a
// Database whose own record is record.
func DataRolePath(record, name string) string { return record + "/roles/" + name }

// MetaDataRole names, in a data role's record, the entry of
// spec.forProvider.dataRoles it was written for; MetaDataAccess its access.
const (
	MetaDataRole   = "data-role"
	MetaDataAccess = "data-access"
)

// DataRoleMetadata is the custom_metadata of a data role's record: the
// Database's ownership metadata and the entry's name and access.
func DataRoleMetadata(id Identity, name string, access v1alpha1.DataAccess) map[string]string {
	m := OwnerMetadata(id)
	m[MetaDataRole] = name
	m[MetaDataAccess] = string(access)
	return m
}

// DataRoleObservation is what the provider found of one data role: one the
// spec lists (Wanted), or one whose record this Database wrote and the
// spec no longer lists.
type DataRoleObservation struct {
	// Name is the entry's name; Role and Path its login role and record.
	Name, Role, Path string
	// Wanted: the spec lists it, with Access.
	Wanted bool
	Access v1alpha1.DataAccess

	KV    KVState
	R     RoleState
	Login Login
	// Checked: the owner's check of the role's privileges ran; Missing is
	// what it found missing (or held and must not be).
	Checked bool
	Missing []string
	// LimitsDrifted: its connection limit or session defaults differ from
	// the limits in effect for it.
	LimitsDrifted bool
	// Rotation is what the spec asks of its password.
	Rotation DataRoleRotation

	// Members are the catalog's view of its login members _1 and _2.
	Members [2]MemberState
	// Policy is the credential policy in effect; Now the observation's
	// time, against which ages and graces are told.
	Policy CredentialPolicy
	Now    time.Time
}

// DataRoleRotation is what a Database asks of a data role's password: its
// own request's ID (the entry's credentialRotation) and the Database's
// (spec.credentialRotation, which rotates every role), and whether the
// role's sessions end with the old password.
type DataRoleRotation struct {
	ID, DatabaseID    string
	TerminateSessions bool
	// RoleTerminates and DatabaseTerminates: which of the two requests
	// asks for it (TerminateSessions: either).
	RoleTerminates, DatabaseTerminates bool
}

// terminates reports whether the rotation ids ends the previous login's
// sessions at once, with no grace: a rotation a request asked, when the
// request whose id is new (not the one completed) asks it. A rotation by
// age never does.
func (r DataRoleRotation) terminates(ids, completed [3]string) bool {
	if ids[2] != "" {
		return false
	}
	return (r.RoleTerminates && ids[0] != "" && ids[0] != completed[0]) ||
		(r.DatabaseTerminates && ids[1] != "" && ids[1] != completed[1])
}

// Keys of a data role's record's metadata beside the rotation keys of a
// Database's own record (MetaRotationID, MetaRotationVersion,
// MetaRotationCompletedID, MetaRotationCompletedAt): the Database's
// rotation ID a started or completed rotation answered. OpenBao keeps no
// empty value, so an ID that is not set is recorded as "-".
const (
	MetaRotationDatabaseID          = "rotation-database-id"
	MetaRotationCompletedDatabaseID = "rotation-completed-database-id"
)

func metaID(id string) string {
	if id == "" {
		return "-"
	}
	return id
}

func idOf(v string) string {
	if v == "-" {
		return ""
	}
	return v
}

// requested reports whether the spec asks for any rotation at all.
func (r DataRoleRotation) requested() bool { return r.ID != "" || r.DatabaseID != "" }

// DataRoleRotationRecord is what a data role's record says of its
// rotations.
type DataRoleRotationRecord struct {
	// Started is the IDs of the last rotation started (the role's, the
	// Database's, and the age it was scheduled at), Version the record
	// version of its password; Completed the last completed.
	Started, Completed [3]string
	// HasStarted, HasCompleted: the keys are present.
	HasStarted, HasCompleted bool
	Version                  int
	// CompletedAt as recorded (RFC 3339).
	CompletedAt string
}

// DataRoleRotationOf reads a data role's record's rotation metadata.
func DataRoleRotationOf(owner map[string]string) DataRoleRotationRecord {
	r := DataRoleRotationRecord{
		Started:     [3]string{idOf(owner[MetaRotationID]), idOf(owner[MetaRotationDatabaseID]), idOf(owner[MetaRotationScheduled])},
		Completed:   [3]string{idOf(owner[MetaRotationCompletedID]), idOf(owner[MetaRotationCompletedDatabaseID]), idOf(owner[MetaRotationCompletedScheduled])},
		CompletedAt: owner[MetaRotationCompletedAt],
	}
	r.HasStarted = owner[MetaRotationID] != "" || owner[MetaRotationDatabaseID] != "" || owner[MetaRotationScheduled] != ""
	r.HasCompleted = owner[MetaRotationCompletedID] != "" || owner[MetaRotationCompletedDatabaseID] != "" || owner[MetaRotationCompletedScheduled] != ""
	if v, err := strconv.Atoi(owner[MetaRotationVersion]); err == nil && v > 0 {
		r.Version = v
	}
	return r
}

// DataRoleRotationIntent is the metadata recorded before the new version
// of rotation ids is written as version; from is the login in use.
func DataRoleRotationIntent(ids [3]string, version int, from string) map[string]string {
	return map[string]string{MetaRotationID: metaID(ids[0]), MetaRotationDatabaseID: metaID(ids[1]), MetaRotationScheduled: metaID(ids[2]),
		MetaRotationVersion: strconv.Itoa(version), MetaRotationFrom: metaID(from)}
}

// DataRoleRotationCompletion is the metadata recorded once rotation ids'
// password has logged in: the completion, the password's time, and the
// login used before (from) kept until graceUntil.
func DataRoleRotationCompletion(ids [3]string, at time.Time, from string, graceUntil time.Time) map[string]string {
	m := map[string]string{MetaRotationCompletedID: metaID(ids[0]), MetaRotationCompletedDatabaseID: metaID(ids[1]),
		MetaRotationCompletedScheduled: metaID(ids[2]), MetaRotationCompletedAt: at.Format(time.RFC3339), MetaPasswordSetAt: at.Format(time.RFC3339)}
	maps.Copy(m, PreviousLogin(from, graceUntil))
	return m
}

// PreviousLogin is the metadata of the login login kept until until ("":
// none).
func PreviousLogin(login string, until time.Time) map[string]string {
	if login == "" {
		return map[string]string{MetaPreviousLogin: "-", MetaPreviousUntil: "-"}
	}
	return map[string]string{MetaPreviousLogin: login, MetaPreviousUntil: until.UTC().Format(time.RFC3339)}
}

// DataRoleRotationCreated is the metadata of a data role's first record
// when the spec already asks for a rotation: its first password counts as
// that rotation, so creating a role never rotates it.
func DataRoleRotationCreated(r DataRoleRotation, at time.Time) map[string]string {
	m := map[string]string{MetaPasswordSetAt: at.UTC().Format(time.RFC3339)}
	if !r.requested() {
		return m
	}
	ids := [3]string{r.ID, r.DatabaseID, ""}
	maps.Copy(m, DataRoleRotationIntent(ids, 1, ""))
	maps.Copy(m, DataRoleRotationCompletion(ids, at, "", time.Time{}))
	return m
}

// dataRoleRotation decides the rotation of a data role whose record is
// ours: pending (its intent is recorded and the current version holds its
// password: finished with it, whatever the spec says now), requested (the
// spec's pair of IDs is not the last completed, or the policy's maxAge has
// come), or neither. ids are the IDs of the rotation to start or finish.
func dataRoleRotation(o DataRoleObservation, l logins) (pending, requested bool, ids [3]string) {
	rec := DataRoleRotationOf(o.KV.Owner)
	pending = rec.HasStarted && rec.Started != rec.Completed && rec.Version > 0 && o.KV.Version == rec.Version && o.KV.Data["password"] != ""
	if pending {
		return true, false, rec.Started
	}
	want := [3]string{o.Rotation.ID, o.Rotation.DatabaseID, ""}
	if o.Rotation.requested() && [2]string{want[0], want[1]} != [2]string{rec.Completed[0], rec.Completed[1]} {
		return false, true, want
	}
	// By age: the IDs the spec asks are completed; the age marks it.
	want = [3]string{rec.Completed[0], rec.Completed[1], l.setAt.UTC().Format(time.RFC3339)}
	if due, ok := rotationDue(o, l); ok && !o.Now.Before(due) && want != rec.Completed {
		return false, true, want
	}
	return false, false, want
}

// DataRoleAction is one step on a data role, in the order they are taken.
type DataRoleAction string

// Data role actions.
const (
	// DataRoleWriteRecord: write the record (a new random password, the
	// role's name, the database and the endpoint) with its ownership
	// metadata, before the role exists: a role is never created without
	// its password on record.
	DataRoleWriteRecord DataRoleAction = "write its credential record"
	// DataRoleCreate: create the login role with the record's password (a
	// SCRAM verifier), owning nothing.
	DataRoleCreate DataRoleAction = "create its login role"
	// DataRoleRecordOID: write the role's OID into the record's metadata:
	// from then on the role is provably this Database's.
	DataRoleRecordOID DataRoleAction = "record its role's OID"
	// DataRoleRepairAttributes: reset LOGIN NOSUPERUSER NOCREATEDB
	// NOCREATEROLE NOREPLICATION NOBYPASSRLS and its limits, and make the
	// admin a member again (the connection budget counts the roles the
	// admin is a member of; ending its sessions needs it).
	DataRoleRepairAttributes DataRoleAction = "reset its role's attributes"
	// DataRoleRepairPassword: the record's password was refused: the role
	// gets it back (the record is the truth).
	DataRoleRepairPassword DataRoleAction = "set its role's password back to the record's" //nolint:gosec // the name of an action, not a credential
	// DataRoleGrant: grant its access as the owner (idempotent: it puts
	// back what was revoked).
	DataRoleGrant DataRoleAction = "grant its access"
	// DataRoleDrop: end the role's sessions and drop it (it owns nothing;
	// what was granted to it goes with it).
	DataRoleDrop DataRoleAction = "end its sessions and drop its role"
	// DataRoleDeleteRecord: delete its record, every version.
	DataRoleDeleteRecord DataRoleAction = "delete its credential record"
	// DataRoleRotate: record the rotation's intent, write a new random
	// password as a new version with check-and-set, then finish it as
	// DataRoleRotateFinish.
	DataRoleRotate DataRoleAction = "rotate its password"
	// DataRoleRotateFinish: the current version holds the rotation's
	// password and names the member it is for: create that member with it
	// (or set it on the member), log in with it, and record the
	// completion, with the login used before kept for the grace period.
	DataRoleRotateFinish DataRoleAction = "finish its password's rotation"
	// DataRoleMoveToMembers: a data role whose role still logs in moves
	// to its members: member 1 gets the record's password, the record
	// names it, and the role keeps logging in for the grace period (at
	// once not at all when it was created in the same turn).
	DataRoleMoveToMembers DataRoleAction = "move its login to a member role"
	// DataRoleCreateMember: the member the record names is gone: create it
	// again with the record's password.
	DataRoleCreateMember DataRoleAction = "create its login member"
	// DataRoleRecordMemberOID: write the OID of the member in use into the
	// record's metadata.
	DataRoleRecordMemberOID DataRoleAction = "record its login member's OID"
	// DataRoleRepairMember: give the member in use back LOGIN, its
	// membership in the role (inheriting), the admin's membership and the
	// limits.
	DataRoleRepairMember DataRoleAction = "reset its login member"
	// DataRoleRetirePrevious: the previous login's grace has ended: its
	// password is replaced by none (NOLOGIN, PASSWORD NULL), and its
	// sessions end when the rotation asks for it.
	DataRoleRetirePrevious DataRoleAction = "end its previous login"
	// DataRoleStartGrace: a login besides the one in use can log in and no
	// grace is on record for it (a switch interrupted before its grace was
	// recorded, or someone enabled it): it gets a grace from now, and then
	// is retired.
	DataRoleStartGrace DataRoleAction = "give a previous login its grace"
)

// DataRoleVerdict is what to do with one data role and what to show.
type DataRoleVerdict struct {
	// Wanted: the spec lists the role.
	Wanted  bool
	Actions []DataRoleAction
	// Ready: a wanted role that exists, is provably ours, logs in with its
	// record and lacks nothing.
	Ready bool
	// Rotation is the IDs (the role's, the Database's, the age) of the
	// rotation DataRoleRotate or DataRoleRotateFinish takes.
	Rotation [3]string
	// Target is the member DataRoleRotate gives the new password, From the
	// login in use until then.
	Target int
	From   string
	// Terminate: the rotation keeps no grace and ends the previous
	// login's sessions (see DataRoleRotation.terminates).
	Terminate bool
	// Retire is the login DataRoleRetirePrevious ends; Grace the one
	// DataRoleStartGrace gives a grace.
	Retire, Grace string
	// wake: see WakeAt.
	wake time.Time
	// Conflict names what exists without proof of ownership; nothing of
	// the role is changed.
	Conflict string
	// Message says what is not ready, or what waits.
	Message string
}

// DecideDataRole decides one data role of the Database id.
func DecideDataRole(o DataRoleObservation, id Identity) DataRoleVerdict {
	v := decideDataRole(o, id)
	v.Wanted = o.Wanted
	if v.Wanted && !v.Ready && v.Conflict == "" && v.Message == "" {
		v.Message = fmt.Sprintf("the data role %q is not ready", o.Name)
	}
	return v
}

func decideDataRole(o DataRoleObservation, id Identity) DataRoleVerdict {
	ours := KVOurs(o.KV, id) && o.KV.Owner[MetaDataRole] == o.Name
	recordedOID := ""
	if ours {
		recordedOID = o.KV.Owner[MetaRoleOID]
	}
	// The role is ours when our record names its OID, or, before the OID
	// is recorded (a create interrupted), when our record's password logs
	// in as it.
	roleOurs := o.R.Exists && ours &&
		((recordedOID != "" && recordedOID == fmt.Sprint(o.R.OID)) ||
			(recordedOID == "" && o.KV.Data["password"] != "" && o.KV.Data["username"] == o.Role && passwordAccepted(o.Login)))

	if !o.Wanted {
		return decideDataRoleRemoval(o, ours, roleOurs)
	}
	if v, held := dataRoleConflict(o, ours, roleOurs, recordedOID); held {
		return v
	}
	if !ours {
		return DataRoleVerdict{Actions: []DataRoleAction{DataRoleWriteRecord, DataRoleCreate, DataRoleRecordOID, DataRoleMoveToMembers, DataRoleGrant},
			Message: fmt.Sprintf("the data role %q is being created", o.Name)}
	}
	if !o.R.Exists {
		msg := fmt.Sprintf("the data role %q is being created", o.Name)
		if recordedOID != "" {
			// It owns nothing and its password is on record: creating it
			// again loses nothing, and the new OID is recorded.
			msg = fmt.Sprintf("the data role %q: its role %q (OID %s) is gone; it is created again with the recorded password", o.Name, o.Role, recordedOID)
		}
		return DataRoleVerdict{Actions: []DataRoleAction{DataRoleCreate, DataRoleRecordOID, DataRoleGrant}, Message: msg}
	}
	return decideDataRoleRepairs(o, recordedOID)
}

// dataRoleConflict stops a wanted data role whose record or role exists
// without proof that it is this Database's (a conflict), or whose role's
// ownership cannot be told yet; it returns false when nothing is in the
// way.
func dataRoleConflict(o DataRoleObservation, ours, roleOurs bool, recordedOID string) (DataRoleVerdict, bool) {
	if o.KV.Present && !ours {
		return DataRoleVerdict{Conflict: fmt.Sprintf("the data role %q: the KV record %s exists and belongs to %s; nothing of it was changed", o.Name, o.Path, describeOwner(o.KV.Owner))}, true
	}
	if !o.R.Exists || roleOurs {
		return DataRoleVerdict{}, false
	}
	switch {
	case !ours:
		return DataRoleVerdict{Conflict: fmt.Sprintf("the data role %q: the role %q exists and this Database has no record of creating it; nothing of it was changed (drop it, or choose another name)", o.Name, o.Role)}, true
	case recordedOID != "":
		return DataRoleVerdict{Conflict: fmt.Sprintf("the data role %q: the role %q exists with OID %d, but this Database created OID %s (dropped and re-created by someone else?); nothing of it was changed", o.Name, o.Role, o.R.OID, recordedOID)}, true
	case o.Login == LoginUnavailable || o.Login == LoginNotTried:
		return DataRoleVerdict{Message: fmt.Sprintf("the data role %q: cannot tell yet whether the role %q is this Database's: its credential could not be tried", o.Name, o.Role)}, true
	default:
		return DataRoleVerdict{Conflict: fmt.Sprintf("the data role %q: the role %q exists, this Database's record does not name its OID and the record's password does not log in as it; nothing of it was changed", o.Name, o.Role)}, true
	}
}

// decideDataRoleRepairs decides a wanted data role whose record and role
// are this Database's: what to record, repair, rotate or grant, and
// whether it is Ready.
func decideDataRoleRepairs(o DataRoleObservation, recordedOID string) DataRoleVerdict {
	var v DataRoleVerdict
	var why []string
	l := loginsOf(o)
	if recordedOID == "" {
		v.Actions = append(v.Actions, DataRoleRecordOID)
	}
	if l.active == 0 {
		if !o.R.AttributesOK || o.LimitsDrifted || !o.R.AdminMember {
			v.Actions = append(v.Actions, DataRoleRepairAttributes)
			why = append(why, "its attributes, limits or the admin's membership changed")
		}
	} else if !o.R.GroupOK || !o.R.AdminMember {
		v.Actions = append(v.Actions, DataRoleRepairAttributes)
		why = append(why, "its role's attributes or the admin's membership changed")
	}
	pending, requested, ids := dataRoleRotation(o, l)
	if !pending {
		if c, held := memberConflict(o, l); held {
			return c
		}
	}
	if !pending && l.active >= 1 {
		v.Actions, why = memberRepairs(o, l, v.Actions, why)
	}
	v.Actions, why = decideGraces(o, l, pending, v.Actions, why, &v)
	waiting := false
	switch {
	case pending:
		// Its new password is in OpenBao: finished with it, and never set
		// back to an older one.
		v.Actions = append(v.Actions, DataRoleRotateFinish)
		v.Rotation = ids
		v.Terminate = o.Rotation.terminates(ids, DataRoleRotationOf(o.KV.Owner).Completed)
		why = append(why, fmt.Sprintf("finishing the rotation of its password (version %d)", o.KV.Version))
	case requested && l.inGrace(o.Now):
		// The member a rotation would give a new password may be the
		// previous login, still in use: the rotation waits for its grace.
		waiting = true
	case requested:
		v.Actions = append(v.Actions, DataRoleRotate)
		v.Rotation, v.Target, v.From = ids, switchTarget(l.active), o.KV.Data["username"]
		v.Terminate = o.Rotation.terminates(ids, DataRoleRotationOf(o.KV.Owner).Completed)
		why = append(why, "rotating its password")
	case o.Login == LoginRefused:
		v.Actions = append(v.Actions, DataRoleRepairPassword)
		why = append(why, "its record's password was refused")
	case l.active == 0:
		// Its credential keeps working throughout: Ready meanwhile.
		v.Actions = append(v.Actions, DataRoleMoveToMembers)
	}
	if !o.Checked || len(o.Missing) > 0 {
		v.Actions = append(v.Actions, DataRoleGrant)
		if len(o.Missing) > 0 {
			why = append(why, "it lacks "+strings.Join(firstN(o.Missing, 3), ", "))
		}
	}
	switch {
	case len(why) > 0:
		v.Message = fmt.Sprintf("the data role %q is repaired: %s", o.Name, strings.Join(why, "; "))
	case !passwordAccepted(o.Login):
		v.Message = fmt.Sprintf("the data role %q: its credential is not proven yet", o.Name)
	case !o.Checked:
		v.Message = fmt.Sprintf("the data role %q: its privileges are not checked yet", o.Name)
	}
	v.Ready = v.Message == "" && !slices.Contains(v.Actions, DataRoleRecordOID) && !slices.Contains(v.Actions, DataRoleRecordMemberOID)
	if l.inGrace(o.Now) {
		v.wake = l.until
	}
	if due, ok := rotationDue(o, l); ok && !waiting {
		v.wake = earliest(v.wake, due)
	}
	return v
}

// memberConflict stops a data role whose member in use exists without
// proof that it is this Database's, or whose rotation would give its new
// password to such a member; it returns false when nothing is in the way.
func memberConflict(o DataRoleObservation, l logins) (DataRoleVerdict, bool) {
	check := []int{}
	if l.active >= 1 {
		check = append(check, l.active)
	}
	if _, requested, _ := dataRoleRotation(o, l); requested || l.active == 0 {
		check = append(check, switchTarget(l.active))
	}
	for _, i := range check {
		m := o.Members[i-1]
		if !m.Exists || memberOurs(o, i, l.active) {
			continue
		}
		name := MemberName(o.Role, i)
		switch {
		case o.KV.Owner[MetaMemberOID(i)] != "":
			return DataRoleVerdict{Conflict: fmt.Sprintf("the data role %q: its login member %q exists with OID %d, but this Database created OID %s (dropped and re-created by someone else?); nothing of it was changed", o.Name, name, m.OID, o.KV.Owner[MetaMemberOID(i)])}, true
		case i == l.active && (o.Login == LoginUnavailable || o.Login == LoginNotTried):
			return DataRoleVerdict{Message: fmt.Sprintf("the data role %q: cannot tell yet whether the role %q is this Database's: its credential could not be tried", o.Name, name)}, true
		default:
			return DataRoleVerdict{Conflict: fmt.Sprintf("the data role %q: the role %q exists and this Database has no record of creating it; nothing of it was changed (drop it, or choose another name)", o.Name, name)}, true
		}
	}
	return DataRoleVerdict{}, false
}

// memberRepairs adds what the member in use needs: created again, its OID
// recorded, its attributes, membership and limits reset.
func memberRepairs(o DataRoleObservation, l logins, actions []DataRoleAction, why []string) ([]DataRoleAction, []string) {
	m, name := o.Members[l.active-1], MemberName(o.Role, l.active)
	switch {
	case !m.Exists:
		return append(actions, DataRoleCreateMember, DataRoleRecordMemberOID), append(why, fmt.Sprintf("its login member %q is gone and is created again", name))
	case o.KV.Owner[MetaMemberOID(l.active)] == "":
		actions = append(actions, DataRoleRecordMemberOID)
	}
	if !m.CanLogin || !m.AttributesOK || !m.Inherits || !m.AdminMember || m.LimitsDrifted {
		actions = append(actions, DataRoleRepairMember)
		why = append(why, fmt.Sprintf("its login member %q's attributes, membership or limits changed", name))
	}
	return actions, why
}

// decideGraces ends the previous login once its grace is over, and gives
// a grace to a login that can log in with none on record.
func decideGraces(o DataRoleObservation, l logins, pending bool, actions []DataRoleAction, why []string, v *DataRoleVerdict) ([]DataRoleAction, []string) {
	// Neither changes the credential in use: Ready meanwhile.
	if l.previous != "" && !l.inGrace(o.Now) {
		v.Retire = l.previous
		return append(actions, DataRoleRetirePrevious), why
	}
	if l.previous != "" || l.active < 1 || pending {
		return actions, why
	}
	if others := otherLogins(o, l); len(others) > 0 {
		v.Grace = others[0]
		return append(actions, DataRoleStartGrace), why
	}
	return actions, why
}

// decideDataRoleRemoval decides a data role the spec no longer lists: its
// sessions and its role go, then its record. What is not provably this
// Database's is left alone.
func decideDataRoleRemoval(o DataRoleObservation, ours, roleOurs bool) DataRoleVerdict {
	if !ours {
		return DataRoleVerdict{}
	}
	if o.R.Exists && roleOurs {
		return DataRoleVerdict{Actions: []DataRoleAction{DataRoleDrop, DataRoleDeleteRecord}, Message: fmt.Sprintf("the data role %q is being removed", o.Name)}
	}
	if o.R.Exists && !roleOurs && o.KV.Owner[MetaRoleOID] == "" && (o.Login == LoginUnavailable || o.Login == LoginNotTried) {
		// A create interrupted before the OID was recorded: the role may be
		// ours; deleting the record now would leave it unprovable.
		return DataRoleVerdict{Message: fmt.Sprintf("the data role %q: cannot tell yet whether the role %q is this Database's: its credential could not be tried", o.Name, o.Role)}
	}
	msg := fmt.Sprintf("the data role %q is being removed", o.Name)
	if o.R.Exists {
		msg = fmt.Sprintf("the data role %q is being removed; the role %q is not this Database's and is left alone", o.Name, o.Role)
	}
	return DataRoleVerdict{Actions: []DataRoleAction{DataRoleDeleteRecord}, Message: msg}
}

// firstN returns at most n of s.
func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// MetaDataRoles is the key, in the Database's own record, that lists the
// data roles whose records it may have written ("app,report"; "-" for none): a name is
// listed before its record is written and unlisted after the record is
// deleted, so that no data role's record or login role outlives its
// Database unnoticed, and one removed from the spec is still found.
const MetaDataRoles = "data-roles"

// RecordedDataRoles returns the names MetaDataRoles lists in owner.
func RecordedDataRoles(owner map[string]string) []string {
	v := owner[MetaDataRoles]
	if v == "" || v == "-" {
		return nil
	}
	return strings.Split(v, ",")
}

// DataRolesValue is the MetaDataRoles value listing names (sorted, once
// each).
func DataRolesValue(names []string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	s = slices.Compact(s)
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// WithDataRoles folds the data roles' verdicts into a Ready Database's
// verdict: it is Ready only when every role the spec lists is and no
// removed one is still being removed, up to date only when no role has an
// action, and a role's conflict is the Database's Conflict (nothing of
// that role is changed; the others proceed).
func WithDataRoles(v Verdict, roles []DataRoleVerdict) Verdict {
	var conflicts, waiting []string
	for _, r := range roles {
		if len(r.Actions) > 0 {
			v.UpToDate = false
		}
		switch {
		case r.Conflict != "":
			conflicts = append(conflicts, r.Conflict)
		case r.Wanted && !r.Ready, !r.Wanted && r.Message != "":
			waiting = append(waiting, r.Message)
		}
	}
	if len(conflicts) > 0 {
		v.Ready, v.Reason = false, ReasonConflict
		v.Message = strings.Join(append(conflicts, waiting...), "; ")
		return v
	}
	if len(waiting) > 0 {
		v.Ready = false
		v.Message = strings.Join(waiting, "; ")
	}
	return v
}
