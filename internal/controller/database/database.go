// Package database reconciles Database managed resources.
package database

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/options"
)

const (
	errTrackUsage   = "cannot track ProviderConfig usage"
	errGetConfig    = "cannot get the referenced provider config"
	errNoConfigRef  = "spec.providerConfigRef is required"
	errUnknownKind  = "spec.providerConfigRef.kind must be ProviderConfig or ClusterProviderConfig"
	errNotAvailable = "provisioning of Database is not available in this build of the provider; nothing was changed"
)

// SetupGated registers the Database controller once its CRDs exist.
func SetupGated(mgr ctrl.Manager, o controller.Options, opts options.Options) error {
	o.Gate.Register(func() {
		if err := Setup(mgr, o, opts); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the Database controller")
		}
	}, v1alpha1.DatabaseGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind)
	return nil
}

// Setup adds the Database controller to the manager.
func Setup(mgr ctrl.Manager, o controller.Options, _ options.Options) error {
	name := managed.ControllerName(v1alpha1.DatabaseGroupKind)

	// Management policies are always honoured: without them Crossplane
	// would treat every Database as "*" and drop data on delete.
	if o.Features == nil || !o.Features.Enabled(feature.EnableBetaManagementPolicies) {
		return errors.New("management policies must be enabled: the Database default (no Delete) depends on them")
	}

	ro := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.Database](&connector{
			kube:  mgr.GetClient(),
			usage: resource.NewProviderConfigUsageTracker(mgr.GetClient(), &v1alpha1.ProviderConfigUsage{}),
		}),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithPollInterval(o.PollInterval),
		managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name))), //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
		managed.WithManagementPolicies(),
	}
	if o.MetricOptions != nil {
		ro = append(ro, managed.WithMetricRecorder(o.MetricOptions.MRMetrics))
		if o.MetricOptions.MRStateMetrics != nil {
			sm := statemetrics.NewMRStateRecorder(mgr.GetClient(), o.Logger, o.MetricOptions.MRStateMetrics, &v1alpha1.DatabaseList{}, o.MetricOptions.PollStateMetricInterval)
			if err := mgr.Add(sm); err != nil {
				return errors.Wrap(err, "cannot register the Database state metrics recorder")
			}
		}
	}

	r := managed.NewReconciler(mgr, resource.ManagedKind(v1alpha1.DatabaseGroupVersionKind), ro...)

	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		WithEventFilter(resource.DesiredStateChanged()).
		For(&v1alpha1.Database{}).
		Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
}

// A connector resolves a Database's provider config and produces the
// external client that acts on its server.
type connector struct {
	kube  client.Client
	usage resource.ModernTracker
}

// Connect records the usage of the config and resolves it.
func (c *connector) Connect(ctx context.Context, db *v1alpha1.Database) (managed.TypedExternalClient[*v1alpha1.Database], error) {
	if err := c.usage.Track(ctx, db); err != nil {
		return nil, errors.Wrap(err, errTrackUsage)
	}
	ref := db.GetProviderConfigReference()
	if ref == nil {
		return nil, errors.New(errNoConfigRef)
	}
	switch ref.Kind {
	case v1alpha1.ProviderConfigKind:
		if err := c.kube.Get(ctx, types.NamespacedName{Namespace: db.GetNamespace(), Name: ref.Name}, &v1alpha1.ProviderConfig{}); err != nil {
			return nil, errors.Wrap(err, errGetConfig)
		}
	case v1alpha1.ClusterProviderConfigKind:
		if err := c.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, &v1alpha1.ClusterProviderConfig{}); err != nil {
			return nil, errors.Wrap(err, errGetConfig)
		}
	default:
		return nil, errors.New(errUnknownKind)
	}
	return &external{}, nil
}

// external acts on one Database's server. Until provisioning lands it changes
// nothing and says so on every call.
type external struct{}

func (e *external) Observe(context.Context, *v1alpha1.Database) (managed.ExternalObservation, error) {
	return managed.ExternalObservation{}, errors.New(errNotAvailable)
}

func (e *external) Create(context.Context, *v1alpha1.Database) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, errors.New(errNotAvailable)
}

func (e *external) Update(context.Context, *v1alpha1.Database) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, errors.New(errNotAvailable)
}

func (e *external) Delete(context.Context, *v1alpha1.Database) (managed.ExternalDelete, error) {
	return managed.ExternalDelete{}, errors.New(errNotAvailable)
}

func (e *external) Disconnect(context.Context) error { return nil }
