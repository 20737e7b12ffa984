package metrics

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ManagedOptions are the managed reconciler's metric options for one kind
// (its list type is list), and registers that kind's state metrics
// recorder with the manager; nothing when o has no metric options.
func ManagedOptions(mgr ctrl.Manager, o controller.Options, kind string, list resource.ManagedList) ([]managed.ReconcilerOption, error) {
	if o.MetricOptions == nil {
		return nil, nil
	}
	ro := []managed.ReconcilerOption{managed.WithMetricRecorder(o.MetricOptions.MRMetrics)}
	if o.MetricOptions.MRStateMetrics != nil {
		sm := statemetrics.NewMRStateRecorder(mgr.GetClient(), o.Logger, o.MetricOptions.MRStateMetrics, list, o.MetricOptions.PollStateMetricInterval)
		if err := mgr.Add(sm); err != nil {
			return nil, errors.Wrapf(err, "cannot register the %s state metrics recorder", kind)
		}
	}
	return ro, nil
}
