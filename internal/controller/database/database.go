// Package database reconciles Database managed resources.
package database

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/quiet"
	"ddupan.top/provider-postgresql-tenant/internal/controller/requeue"
	"ddupan.top/provider-postgresql-tenant/internal/controller/tenants"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

const (
	errTrackUsage   = "cannot track ClusterProviderConfig usage"
	errGetConfig    = "cannot get the referenced ClusterProviderConfig"
	errNoConfigRef  = "spec.providerConfigRef is required"
	errBindings     = "cannot tell whether the claim's Tenant holds the claim"
	errClaimUnknown = "cannot tell whether the Tenant spec.claimRef names still holds the claim (the provider's log says why): the deletion waits; nothing was dropped"
	errRecord       = "cannot record the reclaim policy in effect for the deletion"
)

// AnnotationReclaimAtDeletion records the reclaim policy in effect when a
// Database's deletion started. It is written by the controller on the
// first pass that sees the deletion timestamp, and read instead of
// spec.reclaimPolicy from then on.
//
// Its value names the Database's UID and the deletion timestamp it was
// recorded for (tenancy.ReclaimRecord), and is trusted only when both match
// the object: anyone who can write the Database's metadata, a restore from
// a backup or a GitOps re-apply can set this annotation before a deletion
// starts, and such a value decides nothing (tenancy.ReclaimAtDeletion): it
// is replaced by the spec's policy at the start of the deletion, with a
// Warning Event. A pre-set or restored value never authorises a drop.
//
// An annotation, not status: status is a report that may be wiped and is
// rebuilt from observation, while this is a decision that must survive
// until the finalizer goes; metadata stays writable while an object is
// being deleted, and the write carries the resourceVersion read, so an
// edit that races it is re-read before anything is decided.
const AnnotationReclaimAtDeletion = v1alpha1.Group + "/reclaim-policy-at-deletion"

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
	// Logins is the memory of proven logins, shared with the
	// DatabaseBinding controller (nil: a memory of its own).
	Logins *memo.Logins
	// Sizes are the database sizes the config status controller measures
	// (nil: no sizes in status).
	Sizes *memo.Sizes
	// Tenants, when set, is read instead of the Tenant cache Setup makes
	// (tenants.NewCache): a reader that may be behind the API server
	// (fault injection for tests).
	Tenants client.Reader
	// PollObserver, when set, is told each Database's poll interval as
	// crossplane-runtime hands it to the poll hook (its
	// crossplane.io/poll-interval annotation, within the floor, or the
	// controller's): for tests.
	PollObserver func(name string, poll time.Duration)
}

func (d Deps) logins() *memo.Logins {
	if d.Logins != nil {
		return d.Logins
	}
	return memo.NewLogins()
}

// SetupGated registers the Database controller once its CRDs exist.
func SetupGated(mgr ctrl.Manager, o controller.Options, d Deps) error {
	o.Gate.Register(func() {
		if err := Setup(mgr, o, d); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the Database controller")
		}
	}, v1alpha1.DatabaseGroupVersionKind, v1alpha1.ClusterProviderConfigUsageGroupVersionKind, v1alpha1.DatabaseBindingGroupVersionKind)
	return nil
}

// Setup adds the Database controller to the manager.
func Setup(mgr ctrl.Manager, o controller.Options, d Deps) error {
	name := managed.ControllerName(v1alpha1.DatabaseGroupKind)
	recorder := event.NewAPIRecorder(mgr.GetEventRecorderFor(name)) //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
	if err := checkSetup(o, d); err != nil {
		return err
	}

	tc := d.Tenants
	if tc == nil {
		c, err := tenants.NewCache(mgr, o.Gate, o.Logger.WithValues("controller", name))
		if err != nil {
			return err
		}
		tc = c
	}

	confirm := newConfirmer()
	ro, err := reconcilerOptions(mgr, o, d, &connector{
		log:     o.Logger.WithValues("controller", name),
		kube:    mgr.GetClient(),
		reader:  mgr.GetAPIReader(),
		tenants: tc,
		usage:   resource.NewLegacyProviderConfigUsageTracker(mgr.GetClient(), &v1alpha1.ClusterProviderConfigUsage{}),
		deps:    d,
		record:  recorder,
		confirm: confirm,
		logins:  d.logins(),
	})
	if err != nil {
		return err
	}

	lost := requeue.NewLost()
	r := managed.NewReconciler(requeue.Manager{Manager: quiet.Manager{Manager: mgr}, Lost: lost}, resource.ManagedKind(v1alpha1.DatabaseGroupVersionKind), ro...)

	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		For(&v1alpha1.Database{}, builder.WithPredicates(desiredStateChanged())).
		// A DatabaseBinding that appears, goes or records its Database
		// changes whether that Database is Bound or Released.
		Watches(&v1alpha1.DatabaseBinding{}, handler.EnqueueRequestsFromMapFunc(databasesOfBinding), builder.WithPredicates(bindingChanged())).
		Complete(ratelimiter.NewReconciler(name, requeue.Reconciler(r, lost), o.GlobalRateLimiter))
}

// checkSetup refuses a setup the controller cannot run safely with.
func checkSetup(o controller.Options, d Deps) error {
	if d.Pools == nil || d.KV == nil {
		return errors.New("the Database controller needs the pool manager and the OpenBao client")
	}
	if d.Options.OpenBao.DatabaseBasePath == "" {
		return errors.New("the Database controller needs the OpenBao database base path")
	}
	// Management policies are always honoured: an import (without Create)
	// must never be provisioned.
	if o.Features == nil || !o.Features.Enabled(feature.EnableBetaManagementPolicies) {
		return errors.New("management policies must be enabled: imports (managementPolicies without Create) depend on them")
	}
	return nil
}

// reconcilerOptions are the managed reconciler's options for the
// connector c.
func reconcilerOptions(mgr ctrl.Manager, o controller.Options, d Deps, c *connector) ([]managed.ReconcilerOption, error) {
	name := managed.ControllerName(v1alpha1.DatabaseGroupKind)
	confirm := c.confirm
	ro := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.Database](c),
		managed.WithLogger(o.Logger.WithValues("controller", name)),
		managed.WithRecorder(c.record),
		managed.WithPollInterval(o.PollInterval),
		managed.WithPollIntervalHook(func(mg resource.Managed, poll time.Duration) time.Duration {
			if d.PollObserver != nil {
				d.PollObserver(mg.GetName(), poll)
			}
			return confirm.PollInterval(mg, poll)
		}),
		managed.WithManagementPolicies(),
		// The database name is deterministic (spec.forProvider.database),
		// so an interrupted create is resumed by Observe's ownership proofs
		// instead of being blocked.
		managed.WithDeterministicExternalName(true),
		// PostgreSQL's catalog and OpenBao are read-your-writes: there is no
		// eventual consistency to wait out after a create.
		managed.WithCreationGracePeriod(0),
		// No initializer: the names come from the spec only; the
		// external-name annotation is not used.
		managed.WithInitializers(),
	}
	// A crossplane.io/poll-interval annotation shorter than this is
	// raised to it: one resource must not poll a shared server at will.
	ro = append(ro, managed.WithMinPollInterval(d.Options.MinPollInterval))
	// Crossplane's change logs (--enable-changelogs): an entry for every
	// external create, update and delete.
	if o.ChangeLogOptions != nil && o.ChangeLogOptions.ChangeLogger != nil {
		ro = append(ro, managed.WithChangeLogger(o.ChangeLogOptions.ChangeLogger))
	}
	mo, err := metrics.ManagedOptions(mgr, o, "Database", &v1alpha1.DatabaseList{})
	if err != nil {
		return nil, err
	}
	return append(ro, mo...), nil

}

// A connector resolves a Database's ClusterProviderConfig and produces the
// external client that acts on its server.
type connector struct {
	log  logging.Logger
	kube client.Client
	// reader reads the API server itself: the Tenants that bindings
	// belong to.
	reader client.Reader
	// tenants reads Tenants from a watch-fed cache (tenants.Cache), which
	// may be behind the API server; nil: every read goes to reader.
	tenants client.Reader
	usage   resource.LegacyTracker
	deps    Deps
	record  event.Recorder
	confirm *confirmer
	logins  *memo.Logins
}

// Connect records the usage of the config, shows the binding, decides a
// deletion, then hands out the config's validated admin pool. A Database
// never starts provisioning against a config that is not Ready or is being
// deleted: it reports InstanceNotReady.
func (c *connector) Connect(ctx context.Context, db *v1alpha1.Database) (managed.TypedExternalClient[*v1alpha1.Database], error) {
	if err := c.usage.Track(ctx, db); err != nil {
		return nil, errors.Wrap(err, errTrackUsage)
	}
	live, lerr := c.claimancy(ctx, db)
	switch {
	case lerr != nil:
		c.log.Debug(errBindings, "name", db.GetName(), "error", lerr)
	case live != tenancy.ClaimPending:
		// Pending (a binding whose Tenant may yet list it, or a release
		// the binder is making): the binding status shown stays as it
		// was; the binder records Released, or the last binding goes.
		c.showBinding(db, live == tenancy.ClaimLive)
	}

	drop := false
	if meta.WasDeleted(db) {
		var err error
		if drop, err = c.dropAtDeletion(ctx, db, live, lerr); err != nil {
			return nil, err
		}
		if !drop {
			// Nothing is dropped: the server and OpenBao are not needed
			// (they may be down, or the config gone).
			return retain{}, nil
		}
	}

	ref := db.GetProviderConfigReference()
	if ref == nil || ref.Name == "" {
		return nil, errors.New(errNoConfigRef)
	}
	cfg := &v1alpha1.ClusterProviderConfig{}
	name := v1alpha1.ClusterProviderConfigKind + " " + ref.Name
	if err := c.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, cfg); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, instanceNotReady(db, fmt.Sprintf("%s does not exist", name))
		}
		return nil, errors.Wrap(err, errGetConfig)
	}
	if v := tenancy.InstanceGate(meta.WasDeleted(cfg), cfg.GetCondition(xpv2.TypeReady), meta.WasDeleted(db)); v != "" {
		return nil, instanceNotReady(db, name+" "+v)
	}
	pool, ok := c.deps.Pools.Lookup(memo.PoolRef(v1alpha1.ClusterProviderConfigKind, "", ref.Name), cfg.GetUID())
	if !ok {
		return nil, instanceNotReady(db, name+" has no validated connection yet")
	}
	log := c.log.WithValues("name", db.GetName(), "config", ref.Name, "generation", db.GetGeneration())
	return &external{
		log:     log,
		pool:    pool,
		kv:      c.deps.KV,
		opts:    c.deps.Options,
		hook:    c.deps.StepHook,
		record:  c.record,
		confirm: c.confirm,
		logins:  c.logins,
		kube:    c.kube,
		cfgVer:  cfg.ConfigStatus().PostgreSQLVersion,
		// The defaults in effect now: a change of them reaches each
		// Database at its next reconcile (its poll).
		cfgLimits:        cfg.Spec.TenantLimits,
		cfgCredentials:   cfg.Spec.CredentialPolicy,
		defaultConnLimit: defaultConnLimit(ctx, log, cfg, pool),
		drop:             drop,

		optionPolicy: cfg.Spec.DatabaseOptions,
		sizes:        c.deps.Sizes,
		cfgUID:       cfg.GetUID(),
		id: tenancy.Identity{
			Name: db.GetName(), UID: string(db.GetUID()),
			ConfigName: ref.Name, ConfigUID: string(cfg.GetUID()),
			Endpoint: endpointOf(pool.Target()),
		},
	}, nil
}

// dropAtDeletion decides whether a deleted Database drops what it owns:
// an error while the claim's use cannot be told or the decision is to
// wait.
func (c *connector) dropAtDeletion(ctx context.Context, db *v1alpha1.Database, live tenancy.Claimancy, lerr error) (bool, error) {
	reclaim, err := c.reclaimAtDeletion(ctx, db)
	if err != nil {
		return false, errors.Wrap(err, errRecord)
	}
	if lerr != nil {
		// Whether the claim is still in use cannot be told: wait. The
		// cause (logged by Connect) names the claim's namespace and
		// Tenant; this error also becomes an Event, in namespace default.
		return false, errors.New(errClaimUnknown)
	}
	d := tenancy.DecideDeletion(reclaim, policies(db).ShouldDelete(), db.Spec.ClaimRef, live != tenancy.ClaimNone)
	if d.Wait {
		return false, fail(db, d.Reason, d.Message)
	}
	return d.Drop, nil
}

// defaultConnLimit is the connection limit of the login roles the
// provider makes, when the config sets none: the server's default share.
// nil when the config sets one or the server's connections cannot be read.
func defaultConnLimit(ctx context.Context, log logging.Logger, cfg *v1alpha1.ClusterProviderConfig, pool *postgres.Pool) *int32 {
	if l := cfg.Spec.TenantLimits; l != nil && l.ConnectionLimit != nil {
		return nil
	}
	avail, err := pool.TenantConnections(ctx)
	if err != nil {
		log.Debug("cannot read the server's connections; no default connection limit this time", "error", err)
		return nil
	}
	d := tenancy.DefaultConnectionLimit(avail)
	return &d
}

// showBinding sets status.binding (persisted with the rest of the status)
// and records an Event when the Database becomes Bound or Released.
// Released is shown by the phase and the Event only: the Ready condition
// keeps reporting the database itself, which a Released Database still
// has.
// claimancy is whether the Database's claim is held. It is read first
// against the Tenant cache, which may be behind the API server, and that
// answer is kept only when it changes nothing: the Database is not being
// deleted and the binding status shown stays as it is. Anything else (a
// deletion, whose decision depends on it, or a new binding phase) is read
// against the API server, so a cache behind never moves or drops a
// Database; at worst it shows a change one poll late.
func (c *connector) claimancy(ctx context.Context, db *v1alpha1.Database) (tenancy.Claimancy, error) {
	released := tenancy.ReleasedClaim(db.Status.Binding, db.Spec.ClaimRef)
	if c.tenants != nil && !meta.WasDeleted(db) {
		live, err := tenants.Claimancy(ctx, c.kube, c.tenants, db.Spec.ClaimRef, released)
		if err == nil && !showsChange(db, live) {
			return live, nil
		}
	}
	return tenants.Claimancy(ctx, c.kube, c.reader, db.Spec.ClaimRef, released)
}

// showsChange reports whether live would change the binding status shown,
// or is Pending (a state in passing, decided by the API server).
func showsChange(db *v1alpha1.Database, live tenancy.Claimancy) bool {
	if live == tenancy.ClaimPending {
		return true
	}
	return !equality.Semantic.DeepEqual(tenancy.BindingOf(db.Spec.ClaimRef, db.Status.Binding, live == tenancy.ClaimLive), db.Status.Binding)
}

func (c *connector) showBinding(db *v1alpha1.Database, live bool) {
	prev := db.Status.Binding
	b := tenancy.BindingOf(db.Spec.ClaimRef, prev, live)
	db.Status.Binding = b
	if b.Phase == prev.Phase {
		return
	}
	switch b.Phase {
	// Events of a cluster-scoped object are recorded in namespace default:
	// they name no claim (status.binding and spec.claimRef do, for admins).
	case v1alpha1.BindingBound:
		c.record.Event(db, event.Normal("Bound", "bound to the Tenant its spec.claimRef names"))
	case v1alpha1.BindingReleased:
		c.record.Event(db, event.Normal("Released", "the Tenant its spec.claimRef names released its claim: the Database is kept as it is and is not bound again until an admin clears or replaces spec.claimRef"))
	}
}

// reclaimAtDeletion returns the reclaim policy in effect for a deleted
// Database, recording the spec's value in AnnotationReclaimAtDeletion on
// the first pass that sees the deletion, and in place of any value that
// was not recorded for this deletion.
func (c *connector) reclaimAtDeletion(ctx context.Context, db *v1alpha1.Database) (v1alpha1.ReclaimPolicy, error) {
	recorded, has := db.GetAnnotations()[AnnotationReclaimAtDeletion]
	var at time.Time
	if ts := db.GetDeletionTimestamp(); ts != nil {
		at = ts.Time
	}
	v := tenancy.ReclaimAtDeletion(recorded, has, db.Spec.ReclaimPolicy, string(db.GetUID()), at)
	if v.Record == "" {
		return v.Policy, nil
	}
	meta.AddAnnotations(db, map[string]string{AnnotationReclaimAtDeletion: v.Record})
	if err := c.kube.Update(ctx, db); err != nil {
		return "", err
	}
	if v.Ignored {
		c.record.Event(db, event.Warning(reasonReclaimRecordIgnored, errors.Errorf(
			"the annotation %s held a value not recorded for this deletion (set before the deletion started, or restored or re-applied from a copy): it decided nothing; spec.reclaimPolicy in effect now (%s) is recorded and applies",
			AnnotationReclaimAtDeletion, v.Policy)))
	}
	return v.Policy, nil
}

// reasonReclaimRecordIgnored is the Event reason of a reclaim annotation
// found at deletion that was not recorded for that deletion.
const reasonReclaimRecordIgnored event.Reason = "ReclaimRecordIgnored"

// retain is the external client of a deleted Database that drops nothing:
// it reports nothing to delete, so the finalizer goes.
type retain struct{}

func (retain) Observe(context.Context, *v1alpha1.Database) (managed.ExternalObservation, error) {
	return managed.ExternalObservation{ResourceExists: false}, nil
}

func (retain) Create(context.Context, *v1alpha1.Database) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

func (retain) Update(context.Context, *v1alpha1.Database) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, nil
}

func (retain) Delete(context.Context, *v1alpha1.Database) (managed.ExternalDelete, error) {
	return managed.ExternalDelete{}, nil
}

func (retain) Disconnect(context.Context) error { return nil }

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
