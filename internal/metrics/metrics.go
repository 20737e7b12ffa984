// Package metrics holds the provider's own metrics, next to
// controller-runtime's and Crossplane's. Labels are low-cardinality by
// design: never a database, role, namespace or path.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Failures counts failed reconciles by kind (database, config) and class
// (the Ready reason: Conflict, DependencyUnavailable, ...).
var Failures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "provider_postgresql_tenant_failures_total",
	Help: "Failed reconciles by resource kind and failure class (the Ready condition's reason).",
}, []string{"kind", "class"})

// TenantLogins counts the Database controller's Observes by what they did
// about the role's credential: "login" (logged in as the role) or
// "skipped" (the last proven login still stood: nothing the catalog or the
// record shows changed and the periodic check was not due).
var TenantLogins = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "provider_postgresql_tenant_credential_checks_total",
	Help: "Observes of a Database's credential by outcome: login (logged in as the role) or skipped (the last proven login still stood).",
}, []string{"check"})

// LoginFailures counts the logins as a Database's role that failed, by
// result: "refused" (the server refused the credential: wrong password,
// NOLOGIN, expired, pg_hba) or "unavailable" (the login failed for another
// reason, e.g. the server did not answer).
var LoginFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "provider_postgresql_tenant_credential_login_failures_total",
	Help: "Logins as a Database's role that failed, by result: refused (the server refused the credential) or unavailable (another failure, e.g. the server did not answer).",
}, []string{"result"})

// StaleAdminSessions counts the admin sessions closed because the server
// refused a statement for lack of privileges that the catalog shows the
// admin holds: the session acted on an outdated list of its memberships.
var StaleAdminSessions = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "provider_postgresql_tenant_stale_admin_sessions_total",
	Help: "Admin sessions closed because the server refused a statement for lack of a membership the catalog shows the admin holds (a session acting on an outdated list of its memberships).",
})

// RecordReads counts the Database controller's Observes by where the
// credential record came from: "openbao" (read) or "memory" (the record
// kept with the last proven login, while that login stands).
var RecordReads = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "provider_postgresql_tenant_credential_record_reads_total",
	Help: "Observes of a Database by where its credential record came from: openbao (read) or memory (kept with the last proven login while that login stands).",
}, []string{"source"})

// DeliveryChecks counts the DatabaseBinding controller's checks of a bound
// Database's delivery copy: "read" (the Database's record and the copy
// read from OpenBao) or "skipped" (the last reading in sync still stood).
var DeliveryChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "provider_postgresql_tenant_delivery_checks_total",
	Help: "Observes of a bound Database's delivery copy by outcome: read (the record and the copy read from OpenBao) or skipped (the last reading in sync still stood).",
}, []string{"check"})

// ReconcileRate is the global reconcile rate limit in effect, per second:
// --max-reconcile-rate, or more when the number of resources needs it to
// observe each once per poll interval.
var ReconcileRate = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "provider_postgresql_tenant_reconcile_rate_limit",
	Help: "The global reconcile rate limit in effect (per second): --max-reconcile-rate, raised when the number of resources needs more to observe each once per poll interval.",
})

func init() {
	metrics.Registry.MustRegister(Failures, TenantLogins, RecordReads, DeliveryChecks, ReconcileRate, StaleAdminSessions, LoginFailures, StateGauges)
	// Every series of a fixed label set exists from the start at 0, so a
	// rate or an increase over it is defined before the first event.
	for _, v := range []string{"login", "skipped"} {
		TenantLogins.WithLabelValues(v)
	}
	for _, v := range []string{"openbao", "memory"} {
		RecordReads.WithLabelValues(v)
	}
	for _, v := range []string{"read", "skipped"} {
		DeliveryChecks.WithLabelValues(v)
	}
	for _, v := range []string{LoginRefused, LoginUnavailable} {
		LoginFailures.WithLabelValues(v)
	}
}

// Results of a failed login (LoginFailures).
const (
	LoginRefused     = "refused"
	LoginUnavailable = "unavailable"
)

// LoginFailed records a failed login as a Database's role with its result
// (LoginRefused or LoginUnavailable).
func LoginFailed(result string) { LoginFailures.WithLabelValues(result).Inc() }

// LoginSkipped records an Observe that relied on the last proven login.
func LoginSkipped() { TenantLogins.WithLabelValues("skipped").Inc() }

// LoginMade records an Observe that logged in as the role.
func LoginMade() { TenantLogins.WithLabelValues("login").Inc() }

// RecordRead records an Observe that read the credential record from OpenBao.
func RecordRead() { RecordReads.WithLabelValues("openbao").Inc() }

// RecordRemembered records an Observe that used the record kept with the
// last proven login.
func RecordRemembered() { RecordReads.WithLabelValues("memory").Inc() }

// DeliveryRead records a binding Observe that read the record and the copy.
func DeliveryRead() { DeliveryChecks.WithLabelValues("read").Inc() }

// DeliveryRemembered records a binding Observe that relied on the last
// reading of its delivery in sync.
func DeliveryRemembered() { DeliveryChecks.WithLabelValues("skipped").Inc() }

// StaleAdminSession records an admin session closed for acting on an
// outdated list of its memberships.
func StaleAdminSession() { StaleAdminSessions.Inc() }

// Failure records one failure of kind with class.
func Failure(kind, class string) { Failures.WithLabelValues(kind, class).Inc() }
