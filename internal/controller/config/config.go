// Package config reconciles ClusterProviderConfigs and ProviderConfigs: usage
// tracking, so that a config in use cannot be deleted.
package config

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	ctrl "sigs.k8s.io/controller-runtime"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// SetupGated registers the usage and status controllers once the config
// CRDs exist.
func SetupGated(mgr ctrl.Manager, o controller.Options, so StatusOptions) error {
	o.Gate.Register(func() {
		if err := Setup(mgr, o); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the ProviderConfig usage controllers")
		}
		if err := SetupStatus(mgr, o, so); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the ProviderConfig status controllers")
		}
	}, v1alpha1.ClusterProviderConfigGroupVersionKind, v1alpha1.ProviderConfigGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind)
	return nil
}

// Setup adds one usage controller per config kind. Both count the namespaced
// ProviderConfigUsage kind: a Database records its usage in its own
// namespace, labelled with the config's kind and name, and the
// ClusterProviderConfig controller counts such usages across all namespaces.
// (A separate ClusterProviderConfigUsage kind would never be written by the
// managed reconciler, and a config counted through it could be deleted while
// in use.)
func Setup(mgr ctrl.Manager, o controller.Options) error {
	for _, k := range []struct {
		gk     string
		kind   string
		gvk    resource.ProviderConfigKinds
		object resource.ProviderConfig
	}{
		{
			gk:     v1alpha1.ProviderConfigGroupKind,
			kind:   v1alpha1.ProviderConfigKind,
			object: &v1alpha1.ProviderConfig{},
			gvk: resource.ProviderConfigKinds{
				Config:    v1alpha1.ProviderConfigGroupVersionKind,
				Usage:     v1alpha1.ProviderConfigUsageGroupVersionKind,
				UsageList: v1alpha1.ProviderConfigUsageListGroupVersionKind,
			},
		},
		{
			gk:     v1alpha1.ClusterProviderConfigGroupKind,
			kind:   v1alpha1.ClusterProviderConfigKind,
			object: &v1alpha1.ClusterProviderConfig{},
			gvk: resource.ProviderConfigKinds{
				Config:    v1alpha1.ClusterProviderConfigGroupVersionKind,
				Usage:     v1alpha1.ProviderConfigUsageGroupVersionKind,
				UsageList: v1alpha1.ProviderConfigUsageListGroupVersionKind,
			},
		},
	} {
		name := providerconfig.ControllerName(k.gk)
		r := providerconfig.NewReconciler(mgr, k.gvk,
			providerconfig.WithLogger(o.Logger.WithValues("controller", name)),
			providerconfig.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name)))) //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
		err := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			WithOptions(o.ForControllerRuntime()).
			For(k.object).
			Watches(&v1alpha1.ProviderConfigUsage{}, &resource.EnqueueRequestForProviderConfig{Kind: k.kind}).
			Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
		if err != nil {
			return err
		}
	}
	return nil
}
