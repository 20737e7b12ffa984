package database

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// rotationRequest is what the Database asks of a credential rotation.
func rotationRequest(db *v1alpha1.Database) tenancy.RotationRequest {
	r := tenancy.RotationRequest{MayUpdate: policies(db).ShouldUpdate()}
	if c := db.Spec.CredentialRotation; c != nil {
		r.ID = c.ID
	}
	if c := db.Status.AtProvider.CredentialRotation; c != nil {
		r.StatusID = c.ID
	}
	return r
}

// completedRotation is the last completed rotation recorded in a record's
// metadata, or nil.
func completedRotation(owner map[string]string) *v1alpha1.CredentialRotationObservation {
	id := owner[tenancy.MetaRotationCompletedID]
	if id == "" {
		return nil
	}
	r := &v1alpha1.CredentialRotationObservation{ID: id}
	if t, err := time.Parse(time.RFC3339, owner[tenancy.MetaRotationCompletedAt]); err == nil {
		r.CompletedAt = &metav1.Time{Time: t}
	}
	return r
}

// rotate takes the rotation step of the verdict. Each write is durable
// before the next, so an interruption anywhere resumes without a second
// password and without going back to the old one: the intent (rotation ID
// and the version its password will be) is recorded before the new
// version is written with check-and-set on the current one; from then on
// the decision core finishes the rotation with the current version's
// password (and holds back the repair that would restore the old one):
// the role gets its verifier, the role's sessions are ended when asked,
// a login proves it, and only then is the completion recorded.
func (e *external) rotate(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	n, r := o.names, o.verdict.Rotation
	password := o.owner.KV.Data["password"]
	if r.Action == tenancy.RotateStart {
		pw, err := e.startRotation(ctx, db, o)
		if err != nil {
			return err
		}
		password = pw
	}
	if password == "" {
		return fail(db, tenancy.ReasonProvisioningFailed, fmt.Sprintf("version %d of %s has no password; the next observation decides", r.Version, n.path))
	}
	if !o.owner.R.AdminMember {
		// Ending the role's sessions needs its privileges.
		if err := e.pool.GrantRoleToAdmin(ctx, n.role); err != nil {
			return failFrom(db, StepRotateRole, err)
		}
	}
	ended, err := e.setRotatedPassword(ctx, db, o, password)
	if err != nil {
		return err
	}
	c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: password})
	switch {
	case err == nil:
		_ = c.Close(ctx)
	case postgres.LimitAfterAuthentication(err):
		// Refused after the new password was accepted: proven. The
		// role's sessions (opened before, with the old password) fill its
		// connection limit; terminateSessions ends them.
	default:
		return failFrom(db, "log in with the rotated password", err)
	}
	return e.completeRotation(ctx, db, o, ended)
}

// startRotation records the intent, then writes the new password as the
// version the verdict names, with check-and-set on the current one. It
// returns the new password.
func (e *external) startRotation(ctx context.Context, db *v1alpha1.Database, o *observation) (string, error) {
	n, r := o.names, o.verdict.Rotation
	if err := e.do(db, StepRotateCredential, func() error { return e.kv.SetOwner(ctx, n.path, tenancy.RotationIntent(r.ID, r.Version)) }); err != nil {
		return "", err
	}
	pw, err := NewPassword()
	if err != nil {
		return "", failFrom(db, StepRotateCredential, err)
	}
	data := maps.Clone(o.owner.KV.Data)
	data["password"] = pw
	ver, err := e.kv.Write(ctx, n.path, data, o.owner.KV.Version)
	if err != nil {
		return "", failFrom(db, StepRotateCredential, err)
	}
	if ver != r.Version {
		return "", fail(db, tenancy.ReasonProvisioningFailed, fmt.Sprintf("the rotated credential was written as version %d of %s, not %d; the next observation decides", ver, n.path, r.Version))
	}
	e.record.Event(db, event.Normal("CredentialRotationStarted", fmt.Sprintf("rotation %q: a new password is version %d of %s", r.ID, r.Version, n.path)))
	return pw, nil
}

// setRotatedPassword gives the role the rotated password's verifier and,
// when asked, ends its sessions in the same transaction (a session of the
// role cannot set its own password in between and keep it). It returns
// how many sessions ended.
func (e *external) setRotatedPassword(ctx context.Context, db *v1alpha1.Database, o *observation, password string) (int, error) {
	n, r := o.names, o.verdict.Rotation
	if err := e.step(StepRotateRole); err != nil {
		return 0, failFrom(db, StepRotateRole, err)
	}
	verifier, err := scram.Verifier(password)
	if err != nil {
		return 0, fail(db, tenancy.ReasonProvisioningFailed, err.Error())
	}
	if c := db.Spec.CredentialRotation; c == nil || !c.TerminateSessions {
		if err := e.pool.SetRolePassword(ctx, n.role, verifier); err != nil {
			return 0, failFrom(db, StepRotateRole, err)
		}
		return 0, nil
	}
	if err := e.step(StepRotateSessions); err != nil {
		return 0, failFrom(db, StepRotateSessions, err)
	}
	ended, err := e.pool.SetRolePasswordEndingSessions(ctx, n.role, verifier)
	if err != nil {
		if postgres.ClassOf(err) == postgres.ClassPrivileges {
			return 0, fail(db, tenancy.ReasonInsufficientPrivileges, fmt.Sprintf("rotation %q: the role %q has its new password, but the server refused to end its sessions: the admin role needs the privileges of %q (GRANT %q TO <the admin role> WITH INHERIT TRUE) or of pg_signal_backend (GRANT pg_signal_backend TO <the admin role>); retrying: %v", r.ID, n.role, n.role, n.role, err))
		}
		return 0, failFrom(db, StepRotateSessions, err)
	}
	return ended, nil
}

// completeRotation records the completion in the record's metadata, then
// in status, once a login proved the new password.
func (e *external) completeRotation(ctx context.Context, db *v1alpha1.Database, o *observation, ended int) error {
	n, r := o.names, o.verdict.Rotation
	now := time.Now().UTC().Truncate(time.Second)
	if err := e.do(db, StepRotateRecord, func() error {
		return e.kv.SetOwner(ctx, n.path, tenancy.RotationCompletion(r.ID, now.Format(time.RFC3339)))
	}); err != nil {
		return err
	}
	db.Status.AtProvider.CredentialRotation = &v1alpha1.CredentialRotationObservation{ID: r.ID, CompletedAt: &metav1.Time{Time: now}}
	e.log.Info("Credential rotated", "rotation", r.ID, "version", r.Version, "sessionsEnded", ended)
	e.record.Event(db, event.Normal("CredentialRotated", fmt.Sprintf("rotation %q: the role %q logs in with version %d of %s; %d of its sessions ended", r.ID, n.role, r.Version, n.path, ended)))
	if e.confirm != nil {
		e.confirm.Repaired(db.GetUID())
	}
	return nil
}
