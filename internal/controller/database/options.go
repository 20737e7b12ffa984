package database

import (
	"context"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// checkOptions resolves the options a new database is to be created with
// (the Database's, the config's defaults, template0's) and asks the
// server whether it supports them, before any write. It returns the
// reason and message refusing them, or "" and the options to create the
// database with.
func (e *external) checkOptions(ctx context.Context, db *v1alpha1.Database) (reason, message string, _ postgres.CreateOptions) {
	major, err := e.pool.Major(ctx)
	if err != nil {
		return tenancy.ReasonDependencyUnavailable, "cannot read the server's major version to check the database options: " + err.Error(), postgres.CreateOptions{}
	}
	v := tenancy.ResolveOptions(db.Spec.ForProvider.Options, e.optionPolicy, major)
	if v.Reason != "" {
		return v.Reason, v.Message, postgres.CreateOptions{}
	}
	o := postgres.CreateOptions{Encoding: v.Effective.Encoding, Provider: string(v.Effective.LocaleProvider),
		Locale: v.Effective.Locale, ICULocale: v.Effective.ICULocale, BuiltinLocale: v.Effective.BuiltinLocale}
	if o != (postgres.CreateOptions{}) {
		s, err := e.pool.CheckOptions(ctx, o)
		if err != nil {
			return tenancy.ReasonDependencyUnavailable, "cannot check the database options against pg_collation: " + err.Error(), postgres.CreateOptions{}
		}
		if msg := tenancy.OptionsUnsupported(v.Effective, tenancy.OptionsSupport(s)); msg != "" {
			return tenancy.ReasonDatabaseOptionsUnsupported, msg, postgres.CreateOptions{}
		}
	}
	return "", "", o
}

// reportOptions shows the database's encoding and locale in
// status.atProvider.options, read from pg_database once per database (they
// cannot change), and the OptionsDiffer condition: whether they differ
// from spec.forProvider.options. Nothing is changed to match.
func (e *external) reportOptions(ctx context.Context, db *v1alpha1.Database, o *observation) {
	ap := &db.Status.AtProvider
	exists, oid := o.owner.DB.Exists, o.owner.DB.OID
	if !exists {
		ap.Options = nil
		return
	}
	if ap.Options == nil || ap.DatabaseOID != int64(oid) {
		d, err := e.pool.ReadDatabaseOptions(ctx, o.names.database)
		if err != nil || d == nil {
			// A report: read again at the next poll.
			e.log.Debug("cannot read the database's options", "error", err)
			return
		}
		ap.Options = &v1alpha1.DatabaseOptionsObservation{Encoding: d.Encoding, LocaleProvider: v1alpha1.LocaleProvider(d.Provider), Collate: d.Collate, Ctype: d.Ctype}
		switch d.Provider {
		case "icu":
			ap.Options.ICULocale = d.Locale
		case "builtin":
			ap.Options.BuiltinLocale = d.Locale
		}
	}
	have := *ap.Options
	have.Differences = nil
	ap.Options.Differences = tenancy.OptionsDifferences(db.Spec.ForProvider.Options, have)
	differ, reason, msg := tenancy.OptionsCondition(ap.Options.Differences)
	status := corev1.ConditionFalse
	if differ {
		status = corev1.ConditionTrue
	}
	if prev := db.GetCondition(tenancy.ConditionOptionsDiffer); prev.Status != status && differ {
		e.log.Info("Database options differ from spec.forProvider.options", "differences", len(ap.Options.Differences))
	}
	db.SetConditions(xpv2.Condition{Type: tenancy.ConditionOptionsDiffer, Status: status, Reason: xpv2.ConditionReason(reason),
		Message: msg, LastTransitionTime: metav1.Now(), ObservedGeneration: db.GetGeneration()})
}
