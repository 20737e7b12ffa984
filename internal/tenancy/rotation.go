package tenancy

import (
	"fmt"
	"slices"
	"strconv"
)

// Credential rotation keys of a record's custom_metadata. They make a
// rotation durable across crashes and lost status: the intent (the
// rotation's ID and the version its password will be) is recorded before
// the new version is written, and the completion after the new password
// has logged in.
const (
	// MetaRotationID is the ID of the last rotation started.
	MetaRotationID = "rotation-id"
	// MetaRotationVersion is the record version that holds (or, before it
	// is written, will hold) that rotation's password.
	MetaRotationVersion = "rotation-version"
	// MetaRotationCompletedID is the ID of the last rotation completed.
	MetaRotationCompletedID = "rotation-completed-id"
	// MetaRotationCompletedAt is when it completed (RFC 3339).
	MetaRotationCompletedAt = "rotation-completed-at"
)

// RotationRequest is what the Database says about rotating its credential.
type RotationRequest struct {
	// ID is spec.credentialRotation.id; "" when the field is absent.
	ID string
	// StatusID is status.atProvider.credentialRotation.id.
	StatusID string
	// MayUpdate: the management policies include Update (or "*"). The
	// managed reconciler calls Update only then, and a rotation is an
	// update of the password.
	MayUpdate bool
}

// RotationAction is a step of a credential rotation.
type RotationAction string

// Rotation actions.
const (
	// RotateNone: nothing to rotate.
	RotateNone RotationAction = ""
	// RotateStart: record the intent (ID and Version) in the record's
	// metadata, write a new random password as version Version with
	// check-and-set on the current version, then finish as RotateFinish.
	RotateStart RotationAction = "start"
	// RotateFinish: the current version (Version) holds the rotation's
	// password: set it on the role, end the role's sessions when asked,
	// log in with it, then record the completion. Never a new password and
	// never the old one.
	RotateFinish RotationAction = "finish"
)

// RotationVerdict is the rotation step to take.
type RotationVerdict struct {
	Action RotationAction
	// ID of the rotation.
	ID string
	// Version of the record that holds its password.
	Version int
}

// RotationRecord is what a record's metadata says about rotations.
type RotationRecord struct {
	// Started is the ID of the last rotation started, Version the record
	// version of its password.
	Started string
	Version int
	// Completed is the ID of the last rotation completed.
	Completed string
}

// RotationOf reads the rotation keys of a record's custom_metadata. A
// version that is not a positive number (edited by hand) is 0: no version
// is taken for a rotation's.
func RotationOf(owner map[string]string) RotationRecord {
	r := RotationRecord{Started: owner[MetaRotationID], Completed: owner[MetaRotationCompletedID]}
	if v, err := strconv.Atoi(owner[MetaRotationVersion]); err == nil && v > 0 {
		r.Version = v
	}
	return r
}

// RotationIntent is the metadata recorded before the new version of
// rotation id is written as version.
func RotationIntent(id string, version int) map[string]string {
	return map[string]string{MetaRotationID: id, MetaRotationVersion: strconv.Itoa(version)}
}

// RotationCompletion is the metadata recorded once rotation id's password
// has logged in.
func RotationCompletion(id, at string) map[string]string {
	return map[string]string{MetaRotationCompletedID: id, MetaRotationCompletedAt: at}
}

// RotationCreated is the metadata of a record created for a Database that
// already names a rotation: its first password (version 1) counts as that
// rotation, so creating a Database never rotates.
func RotationCreated(id, at string) map[string]string {
	m := RotationIntent(id, 1)
	for k, v := range RotationCompletion(id, at) {
		m[k] = v
	}
	return m
}

// rotationBlocking are the reasons that stop a rotation: what is ours
// cannot be told, or the Database has nothing a password protects.
var rotationBlocking = map[string]bool{
	ReasonConflict: true, ReasonImmutableField: true, ReasonEndpointChanged: true, ReasonDatabaseVanished: true,
}

// startsUnready reports whether a requested rotation may start although
// the Database is not Ready: a Database this provider provisioned, whose
// record names the OIDs of its role and database, which exist, so that
// ownership is proven without any login, and what keeps it from Ready is
// the credential: its holder changed the role's password (which the
// password repair would set back, and the holder could change again), or
// the login fails for a reason of the role's own. The rotation sets the
// new password with the admin's privileges and never uses the old one.
// Any other drift is repaired first. An import, or a Database whose
// ownership is not on record, waits for Ready: its credential is its only
// proof.
func startsUnready(o Observation, v Verdict) bool {
	return !o.Import && v.KVOurs && v.RoleOurs && v.DBOurs && v.Exists &&
		o.KV.Owner[MetaRoleOID] != "" && o.KV.Owner[MetaDatabaseOID] != "" &&
		o.KV.Data["password"] != "" &&
		((v.Reason == "" && slices.Contains(v.Repairs, RepairPassword)) || v.Reason == ReasonProvisioningFailed)
}

// withoutUpdate is the verdict on an admin's request (what) that changes
// something (changes) when the Database may not: its management policies
// lack Update, or it is a read-only import. InvalidSpec, naming the policy
// to add (to do it) or the field to remove, and that nothing was done.
func withoutUpdate(o Observation, v Verdict, what, changes, do, field, nothing string) Verdict {
	why := "a Database whose spec.managementPolicies lack Update never changes " + changes
	if o.Import {
		why = "a read-only import never changes " + changes
	}
	v.Exists, v.UpToDate, v.Ready, v.Repairs = o.DB.Exists, true, false, nil
	v.Rotation = RotationVerdict{}
	v.Reason = ReasonInvalidSpec
	v.Message = fmt.Sprintf("%s is not applied: %s; add Update to spec.managementPolicies to %s, or remove %s; %s", what, why, do, field, nothing)
	return v
}

// decideRotation adds the credential rotation step to the verdict of an
// observation.
//
// A rotation is pending when the record's metadata records a started,
// uncompleted rotation whose version is the current version and holds a
// password: the new password is in OpenBao, so the rotation is finished
// with it, whatever the spec says now, and the repair that restores a
// record from its newest working version is held back (it would roll the
// rotation back). A rotation is requested when spec.credentialRotation.id
// is neither the last completed one (in the metadata, or, when the
// metadata lost it, in status) nor pending. Neither happens while the
// Database is deleted, in a state where what is ours cannot be told, or
// without Update in the management policies (a read-only import); a
// requested rotation waits for a Ready Database.
func decideRotation(o Observation, v Verdict) Verdict {
	if o.Deleting {
		return v
	}
	var rec RotationRecord
	if v.KVOurs || (o.Import && !KVForeign(o.KV, o.Identity)) {
		rec = RotationOf(o.KV.Owner)
	}
	id := o.Rotation.ID
	pending := rec.Started != "" && rec.Started != rec.Completed && rec.Version > 0 &&
		o.KV.Version == rec.Version && o.KV.Data["password"] != ""
	requested := id != "" && id != rec.Completed && !pending && !(o.Rotation.StatusID == id && rec.Started != id)
	if !pending && !requested {
		return v
	}
	rid := id
	if pending {
		rid = rec.Started
	}
	waits := fmt.Sprintf("the credential rotation %q", rid)
	if rotationBlocking[v.Reason] {
		v.Message += fmt.Sprintf(". %s waits until this is resolved; nothing was rotated", waits)
		return v
	}
	if !o.Rotation.MayUpdate || (o.Import && !o.ImportUpdate) {
		return withoutUpdate(o, v, waits, "the password", "rotate it", "spec.credentialRotation", "nothing was written")
	}
	if v.Reason == ReasonDependencyUnavailable || v.Reason == ReasonInsufficientPrivileges {
		v.Message += fmt.Sprintf(". %s waits until this is resolved; nothing was rotated", waits)
		return v
	}
	unready := !v.Ready && startsUnready(o, v)
	if !o.R.AdminCanAdmin && (pending || v.Ready || unready) {
		v.Exists, v.UpToDate, v.Ready, v.Repairs = true, true, false, nil
		v.Reason = ReasonInsufficientPrivileges
		v.Message = noAdminOption(o.Role, fmt.Sprintf("set the password of %s", waits))
		return v
	}
	if pending {
		roleOurs := v.RoleOurs
		if o.Import {
			// An import's role was proven by the old password before the
			// intent was recorded; the old password no longer proves it.
			roleOurs = o.R.Exists
		}
		if !roleOurs || !o.DB.Exists {
			v.Message += fmt.Sprintf(". %s waits for the role and the database; nothing was rotated", waits)
			return v
		}
		v.Exists, v.UpToDate, v.Ready, v.Reason, v.Repairs = true, false, false, "", nil
		v.Rotation = RotationVerdict{Action: RotateFinish, ID: rid, Version: rec.Version}
		v.Message = fmt.Sprintf("finishing %s: its new password is version %d of %s; next: set it on the role %q and log in with it", waits, rec.Version, o.Path, o.Role)
		return v
	}
	if !v.Ready && !unready {
		v.Message += fmt.Sprintf(". %s waits until the Database is Ready", waits)
		return v
	}
	// Ready stays as it is: the current password works (or, not Ready,
	// does not) until the rotation changes it.
	v.UpToDate = false
	v.Rotation = RotationVerdict{Action: RotateStart, ID: rid, Version: o.KV.Version + 1}
	v.Message += fmt.Sprintf("; rotating the credential (%s)", waits)
	return v
}
