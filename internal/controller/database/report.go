package database

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// report writes the verdict into status and conditions.
func (e *external) report(db *v1alpha1.Database, o *observation) {
	v := o.verdict
	ap := &db.Status.AtProvider
	prevPhase := ap.Phase
	ap.Phase = v.Phase
	ap.Credential = v1alpha1.CredentialObservation{
		Path:       o.names.path,
		OpenBaoURL: openbao.ConsumerURL(e.opts.OpenBao.ConsumerAddress, e.opts.OpenBao.KVMount, o.names.path),
	}
	ap.PostgreSQLVersion = e.cfgVer
	ap.DatabaseOID, ap.Owner, ap.Extensions = 0, "", nil
	if o.owner.DB.Exists {
		ap.DatabaseOID, ap.Owner = int64(o.owner.DB.OID), o.owner.DB.Owner
	}
	if o.owner.Login == tenancy.LoginOK {
		ap.Extensions = o.owner.Installed
	}
	if v.KVOurs || (o.owner.Import && !tenancy.KVForeign(o.owner.KV, e.id)) {
		// The last completed rotation, as the record's metadata keeps it
		// (status may have been lost).
		if r := completedRotation(o.owner.KV.Owner); r != nil {
			ap.CredentialRotation = r
		}
		// The last completed access cleanup: what status kept of it when
		// it is the same one, else the record's metadata.
		if c := completedCleanup(o.owner.KV.Owner); c != nil && (ap.AccessCleanup == nil || ap.AccessCleanup.ID != c.ID) {
			ap.AccessCleanup = c
		}
	}
	ap.Limits = nil
	if o.owner.R.Exists {
		ap.Limits = tenancy.DecideLimits(o.owner.Limits, o.owner.R.Limits).Status
	}
	e.reportOtherAccess(db, o.access)
	prev := db.GetCondition(xpv2.TypeReady)
	// A Ready verdict carries no reason; the condition it sets says
	// Available. Log only changes, not every poll of a Ready Database.
	reason := v.Reason
	if v.Ready {
		reason = string(xpv2.Available().Reason)
	}
	if string(prev.Reason) != reason || prev.Status == corev1.ConditionTrue != v.Ready || ap.Phase != prevPhase {
		e.log.Info("Database observed", "phase", v.Phase, "ready", v.Ready, "reason", v.Reason, "kvOurs", v.KVOurs, "roleOurs", v.RoleOurs, "databaseOurs", v.DBOurs, "repairs", tenancy.JoinRepairs(v.Repairs))
	}
	switch {
	case v.Ready:
		db.SetConditions(xpv2.Available().WithMessage(v.Message))
		if prev.Status != corev1.ConditionTrue {
			e.record.Event(db, event.Normal("Ready", v.Message))
		}
	case v.Reason != "":
		metrics.Failure("database", v.Reason)
		db.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ConditionReason(v.Reason), Message: v.Message, LastTransitionTime: metav1.Now(), ObservedGeneration: db.GetGeneration()})
		if string(prev.Reason) != v.Reason {
			e.record.Event(db, event.Warning(event.Reason(v.Reason), errors.New(v.Message)))
		}
	case meta.WasDeleted(db):
		db.SetConditions(xpv2.Deleting())
	default:
		db.SetConditions(xpv2.Creating().WithMessage(v.Message))
	}
}
