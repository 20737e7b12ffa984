package database

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Steps, as named to the fault-injection hook and in messages.
const (
	StepCheckExtensions = "check-extensions"
	StepOwnerMetadata   = "kv-owner-metadata"
	StepCredential      = "kv-credential" //nolint:gosec // a step name, not a credential
	StepRole            = "role"
	StepDatabase        = "database"
	StepRecordOID       = "kv-record-oid"
	StepConnect         = "connect-privileges"
	StepExtensions      = "extensions"
	StepCreated         = "created"
	StepRepair          = "repair"
	StepBlockLogins     = "block-logins"
	StepTerminate       = "terminate-sessions"
	StepDropDatabase    = "drop-database"
	StepDropRole        = "drop-role"
	StepDeleteKV        = "delete-kv"
	// Credential rotation: the intent and the new version in OpenBao; the
	// role's new verifier; ending the role's sessions; the completion in
	// the record's metadata.
	StepRotateCredential = "rotate-kv-credential" //nolint:gosec // a step name, not a credential
	StepRotateRole       = "rotate-role"
	StepRotateSessions   = "rotate-terminate-sessions"
	StepRotateRecord     = "rotate-record"
	// Access cleanup: the removal itself (every step re-reads the
	// catalog); the completion in the record's metadata.
	StepCleanup       = "access-cleanup"
	StepCleanupRecord = "access-cleanup-record"
)

// fail sets Ready=False with reason and message and returns the message as
// an error.
func fail(db *v1alpha1.Database, reason, msg string) error {
	// The error class is logged by the managed reconciler with the error;
	// the message names steps and objects, never a credential.
	metrics.Failure("database", reason)
	db.SetConditions(xpv2.Condition{
		Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ConditionReason(reason),
		Message: msg, LastTransitionTime: metav1.Now(), ObservedGeneration: db.GetGeneration(),
	})
	return errors.New(msg)
}

// failFrom classifies err (a postgres or openbao failure) into a reason.
func failFrom(db *v1alpha1.Database, step string, err error) error {
	reason := tenancy.ReasonProvisioningFailed
	if c := postgres.ClassOf(err); c != "" {
		// Every class is named as the reason a human acts on.
		reason = string(c)
	}
	if openbao.Unavailable(err) {
		reason = tenancy.ReasonDependencyUnavailable
	}
	return fail(db, reason, fmt.Sprintf("step %s failed: %v", step, err))
}

// step gives the fault-injection hook its chance before the named step.
func (e *external) step(name string) error {
	if e.hook == nil {
		return nil
	}
	return e.hook(name)
}

// do runs one named step: the hook, then fn; either failure is reported
// as the step's.
func (e *external) do(db *v1alpha1.Database, step string, fn func() error) error {
	if err := e.step(step); err != nil {
		return failFrom(db, step, err)
	}
	if err := fn(); err != nil {
		return failFrom(db, step, err)
	}
	return nil
}

// refusesDelete: with this verdict reason, what is ours cannot be told
// from what is not, so a deletion drops nothing and keeps the finalizer
// until it is fixed.
func refusesDelete(reason string) bool {
	return reason == tenancy.ReasonEndpointChanged || reason == tenancy.ReasonImmutableField
}
