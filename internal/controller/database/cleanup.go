package database

import (
	"context"

	"fmt"
	"slices"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// cleanupRequest is what the Database asks of an access cleanup.
func cleanupRequest(db *v1alpha1.Database) tenancy.CleanupRequest {
	r := tenancy.CleanupRequest{MayUpdate: policies(db).ShouldUpdate()}
	if c := db.Spec.AccessCleanup; c != nil {
		r.ID = c.ID
	}
	if c := db.Status.AtProvider.AccessCleanup; c != nil {
		r.StatusID = c.ID
	}
	return r
}

// completedCleanup is the last completed access cleanup recorded in a
// record's metadata, or nil.
func completedCleanup(owner map[string]string) *v1alpha1.AccessCleanupObservation {
	id := owner[tenancy.MetaCleanupCompletedID]
	if id == "" {
		return nil
	}
	c := &v1alpha1.AccessCleanupObservation{ID: id}
	if t, err := time.Parse(time.RFC3339, owner[tenancy.MetaCleanupCompletedAt]); err == nil {
		c.CompletedAt = &metav1.Time{Time: t}
	}
	return c
}

// maxRemaining is how many entries of what a cleanup left status lists.
const maxRemaining = 20

// cleanup runs the access cleanup of the verdict: the removal (which
// reads the catalog afresh at every step, so an interrupted one just runs
// again), then the completion in the record's metadata, then the report
// in status and an Event that names counts only.
func (e *external) cleanup(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	n, id := o.names, o.verdict.Cleanup.ID
	db.SetConditions(xpv2.Available().WithMessage(fmt.Sprintf("running the access cleanup %q: removing every access to the database %q other than the login role's and its data roles'", id, n.database)))
	if err := e.step(StepCleanup); err != nil {
		return failFrom(db, StepCleanup, err)
	}
	// What the Database itself grants stays: its data roles keep their
	// access and their login members their sessions (the running app is
	// one of them).
	var keep []string
	for _, r := range db.Spec.ForProvider.DataRoles {
		keep = append(keep, tenancy.DataRoleRoles(n.role, r.Name)...)
	}
	rep, err := e.pool.CleanupAccess(ctx, n.database, n.role, keep)
	// Whatever the cleanup did, the data roles' readiness is what the
	// next check of their grants shows, not what was proven before it.
	if e.logins != nil {
		for _, r := range db.Spec.ForProvider.DataRoles {
			e.logins.Forget(memo.DataRoleKey(db.GetUID(), r.Name))
		}
	}
	if err != nil {
		return failFrom(db, StepCleanup+" "+id, err)
	}
	e.recheckDataRoles(ctx, db, o)
	if err := e.step(StepCleanupRecord); err != nil {
		return failFrom(db, StepCleanupRecord, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if err := e.kv.SetOwner(ctx, n.path, tenancy.CleanupCompletion(id, now.Format(time.RFC3339))); err != nil {
		return failFrom(db, StepCleanupRecord, err)
	}
	msg := e.reportCleanup(db, id, now, rep)
	db.SetConditions(xpv2.Available().WithMessage(msg))
	if e.confirm != nil {
		e.confirm.Repaired(db.GetUID())
	}
	return nil
}

// reportCleanup writes a completed cleanup into status, logs it and
// records an Event that names counts only. It returns the message.
func (e *external) reportCleanup(db *v1alpha1.Database, id string, now time.Time, rep postgres.CleanupReport) string {
	remaining := rep.Remaining
	if len(remaining) > maxRemaining {
		remaining = append(slices.Clone(remaining[:maxRemaining]), fmt.Sprintf("and %d more", len(rep.Remaining)-maxRemaining))
	}
	db.Status.AtProvider.AccessCleanup = &v1alpha1.AccessCleanupObservation{
		ID: id, CompletedAt: &metav1.Time{Time: now}, Remaining: remaining,
		Removed: &v1alpha1.AccessCleanupCounts{DatabaseGrants: rep.DatabaseGrants, Memberships: rep.Memberships,
			DefaultPrivileges: rep.DefaultPrivileges, ObjectGrants: rep.ObjectGrants, Sessions: rep.Sessions},
	}
	msg := fmt.Sprintf("access cleanup %q: revoked %d database grant(s), %d membership(s), %d default privilege(s), %d object grant(s); ended %d session(s); %d item(s) left (status.atProvider.accessCleanup.remaining)",
		id, rep.DatabaseGrants, rep.Memberships, rep.DefaultPrivileges, rep.ObjectGrants, rep.Sessions, len(rep.Remaining))
	e.log.Info("Access cleanup completed", "cleanup", id, "databaseGrants", rep.DatabaseGrants, "memberships", rep.Memberships,
		"defaultPrivileges", rep.DefaultPrivileges, "objectGrants", rep.ObjectGrants, "sessions", rep.Sessions, "remaining", len(rep.Remaining))
	if len(rep.Remaining) > 0 {
		e.record.Event(db, event.Warning("AccessCleanupIncomplete", errors.New(msg)))
	} else {
		e.record.Event(db, event.Normal("AccessCleanedUp", msg))
	}
	return msg
}

// otherAccess judges the access the catalog shows by roles other than the
// owner. The data roles this Database's record lists hold the CONNECT it
// granted them: that is not other access.
func (e *external) otherAccess(o *observation, cat postgres.Catalog) tenancy.OtherAccessVerdict {
	var dataRoles []string
	if o.verdict.KVOurs || o.roles.ours {
		for _, name := range tenancy.RecordedDataRoles(o.roles.meta) {
			dataRoles = append(dataRoles, tenancy.DataRoleRoles(o.names.role, name)...)
		}
	}
	return tenancy.DecideOtherAccess(tenancy.OtherAccessInput{Database: o.names.database, Role: o.names.role, Grants: cat.OtherGrants, Members: cat.OtherMembers, DataRoles: dataRoles})
}

// reportOtherAccess shows the access roles other than the owner have, in
// status.atProvider.otherAccess and the OtherAccess condition: never on
// Ready, which is relayed to the Tenant's namespace, and never in an
// Event, which a namespace may read; the roles' names stay on the
// cluster-scoped Database. Nothing is revoked.
func (e *external) reportOtherAccess(db *v1alpha1.Database, a tenancy.OtherAccessVerdict) {
	db.Status.AtProvider.OtherAccess = a.Status
	status := corev1.ConditionFalse
	if a.Present {
		status = corev1.ConditionTrue
	}
	if prev := db.GetCondition(tenancy.ConditionOtherAccess); prev.Status != status {
		grantees, members := 0, 0
		if a.Status != nil {
			grantees, members = len(a.Status.Grantees), len(a.Status.Members)
		}
		e.log.Info("Database other access observed", "otherAccess", a.Present, "grantees", grantees, "members", members)
	}
	db.SetConditions(xpv2.Condition{Type: tenancy.ConditionOtherAccess, Status: status, Reason: xpv2.ConditionReason(a.Reason),
		Message: a.Message, LastTransitionTime: metav1.Now(), ObservedGeneration: db.GetGeneration()})
}
