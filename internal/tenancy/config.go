package tenancy

import (
	"fmt"
	"net"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// Reasons of a config's Ready condition.
const (
	ReasonReady                  = "Ready"
	ReasonReconciling            = "Reconciling"
	ReasonInvalidSpec            = "InvalidSpec"
	ReasonDependencyUnavailable  = "DependencyUnavailable"
	ReasonAuthenticationFailed   = "AuthenticationFailed"
	ReasonInsufficientPrivileges = "InsufficientPrivileges"
	// ReasonUnsupportedVersion: the server's PostgreSQL major is older than
	// the provider supports.
	ReasonUnsupportedVersion = "UnsupportedVersion"
)

// SecretRefOf returns the namespace and name of a ClusterProviderConfig's
// admin Secret, or an InvalidSpec message when the reference is not
// allowed: the Secret must be in the provider's namespace.
func SecretRefOf(providerNamespace string, ref v1alpha1.SecretReference) (ns, name, invalid string) {
	if ref.Namespace != providerNamespace {
		return "", "", fmt.Sprintf("spec.credentials.secretRef.namespace must be the provider's namespace %q, not %q: a ClusterProviderConfig reads its admin Secret only from there", providerNamespace, ref.Namespace)
	}
	if ref.Name == "" {
		return "", "", "spec.credentials.secretRef.name is required"
	}
	return ref.Namespace, ref.Name, ""
}

// ConfigUsageVerdict is what the usage controller does with a config.
type ConfigUsageVerdict struct {
	// Users is the number to show in status.users.
	Users int64
	// KeepFinalizer: the in-use finalizer stays (or is added).
	KeepFinalizer bool
	// Blocked: the config is being deleted and has users; Message says so.
	Blocked bool
	Message string
}

// DecideConfigUsage decides from a config's users: the Databases that use
// it (ClusterProviderConfigUsages) and the DatabaseBindings that provision
// on it (ProviderConfigUsages naming it). A config with a deletion timestamp
// keeps its finalizer while any user exists, Released Databases included;
// it goes when none is left.
func DecideConfigUsage(deleting bool, databases, bindings int64) ConfigUsageVerdict {
	v := ConfigUsageVerdict{Users: databases + bindings, KeepFinalizer: true}
	if !deleting {
		return v
	}
	if v.Users == 0 {
		v.KeepFinalizer = false
		return v
	}
	v.Blocked = true
	v.Message = fmt.Sprintf("Blocking deletion while usages still exist: %d Database(s) and %d DatabaseBinding(s) use this ClusterProviderConfig", databases, bindings)
	return v
}

// ValidateEndpoint re-checks, before any connection, what the CRD schema
// already enforces, so that an object written around the schema is refused
// too. It returns an InvalidSpec message or "".
func ValidateEndpoint(e v1alpha1.Endpoint) string {
	switch {
	case e.Host == "":
		return "spec.endpoint.host is required"
	case e.Hostaddr != "" && net.ParseIP(e.Hostaddr) == nil:
		return fmt.Sprintf("spec.endpoint.hostaddr %q must be an IPv4 or IPv6 literal", e.Hostaddr)
	case e.Port < 1 || e.Port > 65535:
		return fmt.Sprintf("spec.endpoint.port %d must be between 1 and 65535", e.Port)
	case !ValidIdentifier(e.Database):
		return fmt.Sprintf("spec.endpoint.database %q is not a valid identifier (%s)", e.Database, identifier)
	}
	switch e.SSLMode {
	case v1alpha1.SSLModeDisable, v1alpha1.SSLModeRequire, v1alpha1.SSLModeVerifyCA, v1alpha1.SSLModeVerifyFull:
		return ""
	}
	return fmt.Sprintf("spec.endpoint.sslMode %q is not one of disable, require, verify-ca, verify-full", e.SSLMode)
}

// ConfigObservation is what the config controller learned in one pass.
type ConfigObservation struct {
	// Deleting: the config has a deletion timestamp.
	Deleting bool
	// Users is how many Databases and DatabaseBindings use the config.
	Users int64
	// Invalid is an InvalidSpec message (spec, Secret reference or Secret
	// content), or "".
	Invalid string
	// SecretMissing: the admin Secret does not exist (or lacks its keys).
	SecretMissing bool
	// SecretProblem describes what is wrong with the Secret when
	// SecretMissing is set.
	SecretProblem string
	// PoolKept: the Secret is missing but a pool built from it earlier for
	// the same config and endpoint exists and was checked.
	PoolKept bool
	// Checked: a health check ran.
	Checked bool
	// CheckClass/CheckMessage: the failure of the health check, if any
	// (a postgres.Class as a string, and a message safe to show).
	CheckClass   string
	CheckMessage string
	// Privileges is the message of missing privileges, or "".
	Privileges string
	// Templates is why the server's template databases are unsafe
	// (TemplateVerdict), or "".
	Templates string
	// TemplatesWarning is what the config's unhardenedTemplate1 Warn
	// accepted about template1 (TemplateVerdict), or "".
	TemplatesWarning string
	// Superuser: the admin role is a superuser (accepted, with a warning).
	Superuser bool
	// Version is the server version read by the health check.
	Version string
	// ServerIdentity is the server's system identifier, or "" when the
	// admin may not read it.
	ServerIdentity string
	// Warning is a note the health check had about the server (e.g. a
	// major newer than the tested ones), or "".
	Warning string
	// Target names the endpoint for messages, e.g. "localhost (127.0.0.1:5432)".
	Target string
	// Budget is the connection budget read with the health check (nil
	// when it was not read); it never decides Ready.
	Budget *BudgetVerdict
}

// ConfigVerdict is the status a config should show.
type ConfigVerdict struct {
	Phase   v1alpha1.ConfigPhase
	Ready   bool
	Reason  string
	Message string
}

// DecideConfig turns an observation into a phase and a Ready condition.
func DecideConfig(o ConfigObservation) ConfigVerdict {
	if o.Deleting {
		msg := "being deleted"
		if o.Users > 0 {
			msg = fmt.Sprintf("being deleted: waiting until its %d user(s) (Databases and DatabaseBindings) are gone; no new Database starts provisioning against it", o.Users)
		}
		return ConfigVerdict{Phase: v1alpha1.ConfigPhaseDeleting, Reason: ReasonReconciling, Message: msg}
	}
	// Pending: nothing can be validated until a human fixes the input.
	if o.Invalid != "" {
		return ConfigVerdict{Phase: v1alpha1.ConfigPhasePending, Reason: ReasonInvalidSpec, Message: o.Invalid}
	}
	if o.SecretMissing && !o.PoolKept {
		// A first validation without a valid Secret is never Ready.
		return ConfigVerdict{Phase: v1alpha1.ConfigPhasePending, Reason: ReasonInvalidSpec, Message: o.SecretProblem}
	}
	// Validating: the server is being checked, or the check did not pass.
	if !o.Checked {
		return ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonReconciling, Message: "validating the server"}
	}
	if o.CheckClass != "" {
		reason := o.CheckClass
		switch reason {
		case ReasonDependencyUnavailable, ReasonAuthenticationFailed, ReasonInsufficientPrivileges, ReasonInvalidSpec, ReasonUnsupportedVersion:
		default:
			reason = ReasonDependencyUnavailable
		}
		return ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: reason, Message: fmt.Sprintf("%s: %s", o.Target, o.CheckMessage)}
	}
	if o.Privileges != "" {
		return ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonInsufficientPrivileges, Message: o.Privileges}
	}
	if o.Templates != "" {
		return ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonUnsafeTemplates, Message: fmt.Sprintf("%s: %s", o.Target, o.Templates)}
	}
	msg := fmt.Sprintf("PostgreSQL %s at %s: TLS, authentication and privileges verified", o.Version, o.Target)
	if o.Superuser {
		msg += "; the admin role is a superuser, which this provider does not need (CREATEDB and CREATEROLE suffice)"
	}
	if o.Warning != "" {
		msg += "; WARNING: " + o.Warning
	}
	if o.TemplatesWarning != "" {
		msg += "; WARNING: " + o.TemplatesWarning
	}
	if o.SecretMissing {
		msg += fmt.Sprintf("; WARNING: %s, so the working connection pool is kept until it returns or the endpoint changes", o.SecretProblem)
	}
	return ConfigVerdict{Phase: v1alpha1.ConfigPhaseReady, Ready: true, Reason: ReasonReady, Message: msg}
}

// ReasonInstanceNotReady is a Database's Ready reason while its config
// cannot be used.
const ReasonInstanceNotReady = "InstanceNotReady"

// InstanceGate decides whether a Database may use its config now. It returns
// "" when it may, else why not (to follow the config's name). A Database
// that is itself being deleted may still use a config that is being
// deleted, so that deletions can finish; nothing new starts against it.
func InstanceGate(configDeleting bool, ready xpv2.Condition, databaseDeleting bool) string {
	switch {
	case configDeleting && !databaseDeleting:
		return "is being deleted: no new Database starts provisioning against it"
	case configDeleting:
		return ""
	case ready.Status != corev1.ConditionTrue:
		if ready.Reason == "" {
			return "is not Ready yet"
		}
		return fmt.Sprintf("is not Ready (%s): %s", ready.Reason, ready.Message)
	}
	return ""
}
