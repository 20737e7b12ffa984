// Package database reconciles Database managed resources.
package database

import (
	"context"
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/config"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

const (
	errTrackUsage   = "cannot track ProviderConfig usage"
	errGetConfig    = "cannot get the referenced provider config"
	errNoConfigRef  = "spec.providerConfigRef is required"
	errUnknownKind  = "spec.providerConfigRef.kind must be ProviderConfig or ClusterProviderConfig"
	errNotAvailable = "provisioning of Database is not available in this build of the provider; nothing was changed"
)

// SetupGated registers the Database controller once its CRDs exist.
func SetupGated(mgr ctrl.Manager, o controller.Options, opts options.Options, pools *postgres.Manager) error {
	o.Gate.Register(func() {
		if err := Setup(mgr, o, opts, pools); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the Database controller")
		}
	}, v1alpha1.DatabaseGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind)
	return nil
}

// Setup adds the Database controller to the manager.
func Setup(mgr ctrl.Manager, o controller.Options, _ options.Options, pools *postgres.Manager) error {
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
			pools: pools,
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
	pools *postgres.Manager
}

// Connect records the usage of the config, then hands out the config's
// validated admin pool. A Database never starts provisioning against a
// config that is not Ready or is being deleted: it reports InstanceNotReady.
func (c *connector) Connect(ctx context.Context, db *v1alpha1.Database) (managed.TypedExternalClient[*v1alpha1.Database], error) {
	if err := c.usage.Track(ctx, db); err != nil {
		return nil, errors.Wrap(err, errTrackUsage)
	}
	ref := db.GetProviderConfigReference()
	if ref == nil {
		return nil, errors.New(errNoConfigRef)
	}
	var cfg config.Object
	var key types.NamespacedName
	switch ref.Kind {
	case v1alpha1.ProviderConfigKind:
		cfg, key = &v1alpha1.ProviderConfig{}, types.NamespacedName{Namespace: db.GetNamespace(), Name: ref.Name}
	case v1alpha1.ClusterProviderConfigKind:
		cfg, key = &v1alpha1.ClusterProviderConfig{}, types.NamespacedName{Name: ref.Name}
	default:
		return nil, errors.New(errUnknownKind)
	}
	name := ref.Kind + " " + ref.Name
	if err := c.kube.Get(ctx, key, cfg); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, instanceNotReady(db, fmt.Sprintf("%s does not exist", name))
		}
		return nil, errors.Wrap(err, errGetConfig)
	}
	if v := tenancy.InstanceGate(meta.WasDeleted(cfg), cfg.GetCondition(xpv2.TypeReady), meta.WasDeleted(db)); v != "" {
		return nil, instanceNotReady(db, name+" "+v)
	}
	pool, ok := c.pools.Lookup(config.Ref(ref.Kind, key.Namespace, key.Name), cfg.GetUID())
	if !ok {
		return nil, instanceNotReady(db, name+" has no validated connection yet")
	}
	return &external{pool: pool}, nil
}

// instanceNotReady marks the Database Ready=False with reason
// InstanceNotReady (the managed reconciler persists it with the error).
func instanceNotReady(db *v1alpha1.Database, msg string) error {
	db.SetConditions(xpv2.Condition{
		Type:               xpv2.TypeReady,
		Status:             corev1.ConditionFalse,
		Reason:             tenancy.ReasonInstanceNotReady,
		Message:            msg,
		LastTransitionTime: metav1.Now(),
		ObservedGeneration: db.GetGeneration(),
	})
	return errors.New(msg)
}

// external acts on one Database's server. Until provisioning lands it changes
// nothing and says so on every call.
type external struct {
	pool *postgres.Pool
}

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
