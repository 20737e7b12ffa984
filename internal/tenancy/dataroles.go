package tenancy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

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
}

// DataRoleRotation is what a Database asks of a data role's password: its
// own request's ID (the entry's credentialRotation) and the Database's
// (spec.credentialRotation, which rotates every role), and whether the
// role's sessions end with the old password.
type DataRoleRotation struct {
	ID, DatabaseID    string
	TerminateSessions bool
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
	// Started is the pair of IDs of the last rotation started, Version the
	// record version of its password; Completed the last completed.
	Started, Completed [2]string
	// HasStarted, HasCompleted: the keys are present.
	HasStarted, HasCompleted bool
	Version                  int
	// CompletedAt as recorded (RFC 3339).
	CompletedAt string
}

// DataRoleRotationOf reads a data role's record's rotation metadata.
func DataRoleRotationOf(owner map[string]string) DataRoleRotationRecord {
	r := DataRoleRotationRecord{
		Started:     [2]string{idOf(owner[MetaRotationID]), idOf(owner[MetaRotationDatabaseID])},
		Completed:   [2]string{idOf(owner[MetaRotationCompletedID]), idOf(owner[MetaRotationCompletedDatabaseID])},
		CompletedAt: owner[MetaRotationCompletedAt],
	}
	r.HasStarted = owner[MetaRotationID] != "" || owner[MetaRotationDatabaseID] != ""
	r.HasCompleted = owner[MetaRotationCompletedID] != "" || owner[MetaRotationCompletedDatabaseID] != ""
	if v, err := strconv.Atoi(owner[MetaRotationVersion]); err == nil && v > 0 {
		r.Version = v
	}
	return r
}

// DataRoleRotationIntent is the metadata recorded before the new version
// of rotation r is written as version.
func DataRoleRotationIntent(r DataRoleRotation, version int) map[string]string {
	return map[string]string{MetaRotationID: metaID(r.ID), MetaRotationDatabaseID: metaID(r.DatabaseID), MetaRotationVersion: strconv.Itoa(version)}
}

// DataRoleRotationCompletion is the metadata recorded once rotation ids'
// password has logged in (ids: the role's and the Database's).
func DataRoleRotationCompletion(ids [2]string, at string) map[string]string {
	return map[string]string{MetaRotationCompletedID: metaID(ids[0]), MetaRotationCompletedDatabaseID: metaID(ids[1]), MetaRotationCompletedAt: at}
}

// DataRoleRotationCreated is the metadata of a data role's first record
// when the spec already asks for a rotation: its first password counts as
// that rotation, so creating a role never rotates it.
func DataRoleRotationCreated(r DataRoleRotation, at string) map[string]string {
	if !r.requested() {
		return nil
	}
	m := DataRoleRotationIntent(r, 1)
	maps.Copy(m, DataRoleRotationCompletion([2]string{r.ID, r.DatabaseID}, at))
	return m
}

// dataRoleRotation decides the rotation of a data role whose record is
// ours: pending (its intent is recorded and the current version holds its
// password: finished with it, whatever the spec says now), requested (the
// spec's pair of IDs is not the last completed), or neither. ids is the
// pair of the rotation to start or finish.
func dataRoleRotation(o DataRoleObservation) (pending, requested bool, ids [2]string) {
	rec := DataRoleRotationOf(o.KV.Owner)
	want := [2]string{o.Rotation.ID, o.Rotation.DatabaseID}
	pending = rec.HasStarted && rec.Started != rec.Completed && rec.Version > 0 && o.KV.Version == rec.Version && o.KV.Data["password"] != ""
	if pending {
		return true, false, rec.Started
	}
	return false, o.Rotation.requested() && want != rec.Completed, want
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
	// password: set it on the role (ending its sessions when asked, in the
	// same transaction), log in with it, record the completion.
	DataRoleRotateFinish DataRoleAction = "finish its password's rotation"
)

// DataRoleVerdict is what to do with one data role and what to show.
type DataRoleVerdict struct {
	// Wanted: the spec lists the role.
	Wanted  bool
	Actions []DataRoleAction
	// Ready: a wanted role that exists, is provably ours, logs in with its
	// record and lacks nothing.
	Ready bool
	// Rotation is the pair of IDs (the role's, the Database's) of the
	// rotation DataRoleRotate or DataRoleRotateFinish takes.
	Rotation [2]string
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
			(recordedOID == "" && o.KV.Data["password"] != "" && passwordAccepted(o.Login)))

	if !o.Wanted {
		return decideDataRoleRemoval(o, ours, roleOurs)
	}
	if v, held := dataRoleConflict(o, ours, roleOurs, recordedOID); held {
		return v
	}
	if !ours {
		return DataRoleVerdict{Actions: []DataRoleAction{DataRoleWriteRecord, DataRoleCreate, DataRoleRecordOID, DataRoleGrant},
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
	if recordedOID == "" {
		v.Actions = append(v.Actions, DataRoleRecordOID)
	}
	if !o.R.AttributesOK || o.LimitsDrifted || !o.R.AdminMember {
		v.Actions = append(v.Actions, DataRoleRepairAttributes)
		why = append(why, "its attributes, limits or the admin's membership changed")
	}
	pending, requested, ids := dataRoleRotation(o)
	switch {
	case pending:
		// Its new password is in OpenBao: finished with it, and never set
		// back to an older one.
		v.Actions = append(v.Actions, DataRoleRotateFinish)
		v.Rotation = ids
		why = append(why, fmt.Sprintf("finishing the rotation of its password (version %d)", o.KV.Version))
	case requested:
		v.Actions = append(v.Actions, DataRoleRotate)
		v.Rotation = ids
		why = append(why, "rotating its password")
	case o.Login == LoginRefused:
		v.Actions = append(v.Actions, DataRoleRepairPassword)
		why = append(why, "its record's password was refused")
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
	v.Ready = v.Message == "" && !slices.Contains(v.Actions, DataRoleRecordOID)
	return v
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
