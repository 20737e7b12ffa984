package tenancy

import (
	"fmt"
	"time"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// ReclaimRecord is the value recorded for a deletion: the reclaim policy in
// effect, the UID of the object and the deletion timestamp it was recorded
// for (RFC 3339, UTC, the second precision the API serves), e.g.
// "Retain; uid=0f1e…; deletionTimestamp=2025-01-02T03:04:05Z".
//
// Metadata is writable by anyone who can update the object, before and
// during its deletion, and survives a backup and restore or a GitOps
// re-apply. Tying the record to the UID and the deletion timestamp makes a
// value written before the deletion started (no deletion timestamp exists
// then to name) or carried over from another object or another deletion
// (another UID or timestamp) recognisable, and never trusted.
func ReclaimRecord(p v1alpha1.ReclaimPolicy, uid string, deletedAt time.Time) string {
	return fmt.Sprintf("%s; uid=%s; deletionTimestamp=%s", p, uid, deletedAt.UTC().Format(time.RFC3339))
}

// ReclaimVerdict is the reclaim policy a deletion acts on.
type ReclaimVerdict struct {
	// Policy is Retain or Delete.
	Policy v1alpha1.ReclaimPolicy
	// Record, when not empty, is the value to record now (the first pass
	// of this deletion, or a value found that was not recorded for it).
	Record string
	// Ignored: a value was present that was not recorded for this
	// deletion (written before it started, restored, or re-applied); it
	// decided nothing and is replaced by Record.
	Ignored bool
}

// ReclaimAtDeletion returns the reclaim policy a deleted object acts on.
// The policy recorded when its deletion started stands, whatever
// spec.reclaimPolicy says later, but only if the record names this
// object's UID and this deletion's timestamp (ReclaimRecord). Anything
// else present (a bare "Delete" set in advance, a record of another UID or
// another deletion, a value nobody can parse) is ignored: the spec's value
// in effect now is taken and recorded in its place. So only the spec, as it
// is when the deletion is first seen, can authorise a drop; a pre-set or
// restored record never can. Without a UID or a deletion timestamp nothing
// can be recorded and the answer is Retain.
func ReclaimAtDeletion(recorded string, hasRecord bool, spec v1alpha1.ReclaimPolicy, uid string, deletedAt time.Time) ReclaimVerdict {
	if uid == "" || deletedAt.IsZero() {
		return ReclaimVerdict{Policy: v1alpha1.ReclaimRetain}
	}
	if hasRecord {
		for _, p := range []v1alpha1.ReclaimPolicy{v1alpha1.ReclaimRetain, v1alpha1.ReclaimDelete} {
			if recorded == ReclaimRecord(p, uid, deletedAt) {
				return ReclaimVerdict{Policy: p}
			}
		}
	}
	p := v1alpha1.ReclaimRetain
	if spec == v1alpha1.ReclaimDelete {
		p = v1alpha1.ReclaimDelete
	}
	return ReclaimVerdict{Policy: p, Record: ReclaimRecord(p, uid, deletedAt), Ignored: hasRecord}
}
