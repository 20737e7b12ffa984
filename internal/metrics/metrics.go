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

func init() {
	metrics.Registry.MustRegister(Failures)
}

// Failure records one failure of kind with class.
func Failure(kind, class string) { Failures.WithLabelValues(kind, class).Inc() }
