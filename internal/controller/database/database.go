// Package database reconciles Database managed resources.
package database

import (
	"context"
	"fmt"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
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
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/config"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

const (
	errTrackUsage  = "cannot track ProviderConfig usage"
	errGetConfig   = "cannot get the referenced provider config"
	errNoConfigRef = "spec.providerConfigRef is required"
	errUnknownKind = "spec.providerConfigRef.kind must be ProviderConfig or ClusterProviderConfig"
)

// KV is what the Database controller needs of OpenBao (openbao.Client).
type KV interface {
	Read(ctx context.Context, path string) (*openbao.Record, error)
	ReadVersion(ctx context.Context, path string, version int) (map[string]string, error)
	SetOwner(ctx context.Context, path string, owner map[string]string) error
	Write(ctx context.Context, path string, data map[string]string, cas int) (int, error)
	Delete(ctx context.Context, path string) error
}

// Deps are what the Database controller works with.
type Deps struct {
	Options options.Options
	Pools   *postgres.Manager
	KV      KV
	// StepHook, when set, runs before every external write step with the
	// step's name; an error fails the step (fault injection for tests).
	StepHook func(step string) error
}

// SetupGated registers the Database controller once its CRDs exist.
func SetupGated(mgr ctrl.Manager, o controller.Options, d Deps) error {
	o.Gate.Register(func() {
		if err := Setup(mgr, o, d); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the Database controller")
		}
	}, v1alpha1.DatabaseGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind)
	return nil
}

// Setup adds the Database controller to the manager.
func Setup(mgr ctrl.Manager, o controller.Options, d Deps) error {
	name := managed.ControllerName(v1alpha1.DatabaseGroupKind)
	recorder := event.NewAPIRecorder(mgr.GetEventRecorderFor(name)) //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
	if d.Pools == nil || d.KV == nil {
		return errors.New("the Database controller needs the pool manager and the OpenBao client")
	}

	// Management policies are always honoured: without them Crossplane
	// would treat every Database as "*" and drop data on delete.
	if o.Features == nil || !o.Features.Enabled(feature.EnableBetaManagementPolicies) {
		return errors.New("management policies must be enabled: the Database default (no Delete) depends on them")
	}

	confirm := newConfirmer()
	ro := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.Database](&connector{
			log:     o.Logger.WithValues("controller", name),
			kube:    mgr.GetClient(),
			usage:   resource.NewProviderConfigUsageTracker(mgr.GetClient(), &v1alpha1.ProviderConfigUsage{}),
			deps:    d,
			record:  recorder,
			confirm: confirm,
		}),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithPollInterval(o.PollInterval),
		managed.WithPollIntervalHook(confirm.PollInterval),
		managed.WithRecorder(recorder),
		managed.WithManagementPolicies(),
		// The database name is deterministic (never generated), so an
		// interrupted create is resumed by Observe's ownership proofs
		// instead of being blocked.
		managed.WithDeterministicExternalName(true),
		// PostgreSQL's catalog and OpenBao are read-your-writes: there is no
		// eventual consistency to wait out after a create.
		managed.WithCreationGracePeriod(0),
		managed.WithInitializers(externalNameInitializer(mgr.GetClient())),
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
		WithEventFilter(desiredStateChanged()).
		For(&v1alpha1.Database{}).
		Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
}

// A connector resolves a Database's provider config and produces the
// external client that acts on its server.
type connector struct {
	log     logging.Logger
	kube    client.Client
	usage   resource.ModernTracker
	deps    Deps
	record  event.Recorder
	confirm *confirmer
}

// deletingInTerminatingNamespace is true when a Database being deleted cannot
// record its config usage because its namespace is being deleted: the
// namespace controller removed the usage record and refuses new objects.
// The Database must still finish its deletion (with Delete: drop what it
// owns), or the namespace could never go away.
func deletingInTerminatingNamespace(db *v1alpha1.Database, err error) bool {
	return meta.WasDeleted(db) && kerrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// Connect records the usage of the config, then hands out the config's
// validated admin pool. A Database never starts provisioning against a
// config that is not Ready or is being deleted: it reports InstanceNotReady.
func (c *connector) Connect(ctx context.Context, db *v1alpha1.Database) (managed.TypedExternalClient[*v1alpha1.Database], error) {
	if err := c.usage.Track(ctx, db); err != nil && !deletingInTerminatingNamespace(db, err) {
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
	pool, ok := c.deps.Pools.Lookup(config.Ref(ref.Kind, key.Namespace, key.Name), cfg.GetUID())
	if !ok {
		return nil, instanceNotReady(db, name+" has no validated connection yet")
	}
	return &external{
		log:     c.log.WithValues("namespace", db.GetNamespace(), "name", db.GetName(), "config", name, "generation", db.GetGeneration()),
		pool:    pool,
		kv:      c.deps.KV,
		opts:    c.deps.Options,
		hook:    c.deps.StepHook,
		record:  c.record,
		confirm: c.confirm,
		kube:    c.kube,
		cfgVer:  cfg.ConfigStatus().PostgreSQLVersion,
		id: tenancy.Identity{
			Namespace: db.GetNamespace(), Name: db.GetName(), UID: string(db.GetUID()),
			ConfigKind: ref.Kind, ConfigName: ref.Name, ConfigUID: string(cfg.GetUID()),
			Endpoint: endpointOf(pool.Target()),
		},
	}, nil
}

// instanceNotReady marks the Database Ready=False with reason
// InstanceNotReady (the managed reconciler persists it with the error).
func instanceNotReady(db *v1alpha1.Database, msg string) error {
	metrics.Failure("database", tenancy.ReasonInstanceNotReady)
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

// endpointOf is where a pool connects, keyed like a credential's fields: a
// tenant's password is only sent where the pool connects, and only when
// that is the endpoint recorded with it.
func endpointOf(t postgres.Target) map[string]string {
	return map[string]string{"host": t.Host, "hostaddr": t.Hostaddr, "port": strconv.Itoa(t.Port), "sslmode": string(t.SSLMode)}
}
