package tenancy

import "fmt"

// Access cleanup keys of a record's custom_metadata: the last completed
// cleanup, kept where status cannot lose it.
const (
	// MetaCleanupCompletedID is the ID of the last access cleanup completed.
	MetaCleanupCompletedID = "cleanup-completed-id"
	// MetaCleanupCompletedAt is when it completed (RFC 3339).
	MetaCleanupCompletedAt = "cleanup-completed-at"
)

// CleanupRequest is what the Database says about an access cleanup.
type CleanupRequest struct {
	// ID is spec.accessCleanup.id; "" when the field is absent.
	ID string
	// StatusID is status.atProvider.accessCleanup.id.
	StatusID string
	// MayUpdate: the management policies include Update (or "*").
	MayUpdate bool
}

// CleanupVerdict is the access cleanup to run on Update; ID "" is none.
type CleanupVerdict struct {
	ID string
}

// CleanupCompletion is the metadata recorded once cleanup id has run to
// its end.
func CleanupCompletion(id, at string) map[string]string {
	return map[string]string{MetaCleanupCompletedID: id, MetaCleanupCompletedAt: at}
}

// cleanupBlocking are the reasons that stop a cleanup: what is ours
// cannot be told, or there is no database to clean.
var cleanupBlocking = map[string]bool{
	ReasonConflict: true, ReasonImmutableField: true, ReasonEndpointChanged: true, ReasonDatabaseVanished: true,
}

// decideCleanup adds the access cleanup to the verdict of an observation.
//
// A cleanup is requested when spec.accessCleanup.id is neither the last
// completed one in the record's metadata nor, when the metadata lost it,
// the one status shows. It has no intermediate state to resume: every
// step re-reads the catalog, so an interrupted cleanup simply runs again
// under the same ID until its completion is recorded.
//
// It runs only where every part is proven this Database's own and the
// credential logs in (Ready: Bound or Released alike, the claim does not
// matter), with Update in the management policies, never while the
// Database is deleted, and never in the same Update as a credential
// rotation (the rotation goes first). While it waits, the Ready message
// says why.
func decideCleanup(o Observation, v Verdict) Verdict {
	if o.Deleting || o.Cleanup.ID == "" {
		return v
	}
	var completed string
	if v.KVOurs {
		completed = o.KV.Owner[MetaCleanupCompletedID]
	}
	id := o.Cleanup.ID
	if id == completed || (completed == "" && o.Cleanup.StatusID == id) {
		return v
	}
	waits := fmt.Sprintf("the access cleanup %q", id)
	if cleanupBlocking[v.Reason] {
		v.Message += fmt.Sprintf(". %s waits until this is resolved; nothing was revoked", waits)
		return v
	}
	if !o.Cleanup.MayUpdate || (o.Import && !o.ImportUpdate) {
		return withoutUpdate(o, v, waits, "privileges", "run it", "spec.accessCleanup", "nothing was revoked")
	}
	if v.Reason != "" {
		v.Message += fmt.Sprintf(". %s waits until this is resolved; nothing was revoked", waits)
		return v
	}
	if v.Rotation.Action != RotateNone {
		v.Message += fmt.Sprintf("; %s runs after the credential rotation", waits)
		return v
	}
	if !v.Ready || !v.KVOurs || !v.RoleOurs || !v.DBOurs || len(v.Repairs) > 0 {
		v.Message += fmt.Sprintf(". %s waits until the Database is Ready", waits)
		return v
	}
	if !o.R.AdminMember {
		// Ready implies it; kept so that no path runs a cleanup without
		// the owner's privileges.
		v.Message += fmt.Sprintf(". %s waits until the admin role is a member of the login role", waits)
		return v
	}
	v.UpToDate = false
	v.Cleanup = CleanupVerdict{ID: id}
	v.Message += fmt.Sprintf("; removing every other role's access (%s)", waits)
	return v
}
