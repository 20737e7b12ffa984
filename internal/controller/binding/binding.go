// Package binding reconciles DatabaseBindings: a Tenant's half of its
// binding to a cluster-scoped Database. It provisions a Database
// dynamically or claims an existing one, copies the bound Database's
// credential to the Tenant's namespace, and releases the Database when the
// binding is deleted.
package binding

import (
	"fmt"
	"time"

	"context"
	"maps"
	"slices"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpevent "github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/controller/quiet"
	"ddupan.top/provider-postgresql-tenant/internal/controller/requeue"
	"ddupan.top/provider-postgresql-tenant/internal/controller/tenants"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

const errTrackUsage = "cannot track the ClusterProviderConfig usage"

// KV is what the binder needs of OpenBao (openbao.Client).
type KV interface {
	Read(ctx context.Context, path string) (*openbao.Record, error)
	Write(ctx context.Context, path string, data map[string]string, cas int) (int, error)
	SetOwner(ctx context.Context, path string, owner map[string]string) error
	ClaimPath(ctx context.Context, path string, owner map[string]string) error
	Delete(ctx context.Context, path string) error
}

// Deps are what the DatabaseBinding controller works with.
type Deps struct {
	Options options.Options
	KV      KV
	// StepHook, when set, runs before the binder's write steps with the
	// step's name; an error fails the step (fault injection for tests).
	StepHook func(step string) error
	// Tenants, when set, is read instead of the Tenant cache Setup makes
	// (tenants.NewCache): a reader that may be behind the API server
	// (fault injection for tests).
	Tenants client.Reader
	// Records, when set, is the Database controller's memory of proven
	// logins: while it proves the record version the delivery copy was
	// last found in sync with, the binder reads neither from OpenBao
	// until the periodic check (Options.LoginCheckInterval) is due.
	Records RecordVersions
}

// StepRecordBinding is the step that records, in the binding's status, a
// claim already written on the Database: a fault before it leaves a
// one-sided record that the next reconcile must complete.
const StepRecordBinding = "RecordBinding"

// The steps of the delivery copy's write: a fault before StepCopyCredential
// leaves no copy (or the previous version), before StepCopyOwner a copy
// whose ownership keys are those written when the path was claimed; the
// next reconcile finishes either.
const (
	StepCopyCredential = "CopyCredential" //nolint:gosec // a step name, not a credential
	StepCopyOwner      = "CopyOwner"
)

// SetupGated registers the DatabaseBinding controller once its CRDs exist.
func SetupGated(mgr ctrl.Manager, o controller.Options, d Deps) error {
	o.Gate.Register(func() {
		if err := Setup(mgr, o, d); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the DatabaseBinding controller")
		}
	}, v1alpha1.DatabaseBindingGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind)
	return nil
}

// Setup adds the DatabaseBinding controller to the manager.
func Setup(mgr ctrl.Manager, o controller.Options, d Deps) error {
	name := managed.ControllerName(v1alpha1.DatabaseBindingGroupKind)
	if d.KV == nil {
		return errors.New("the DatabaseBinding controller needs the OpenBao client")
	}
	creating := &sync.Map{}
	recorder := xpevent.NewAPIRecorder(mgr.GetEventRecorderFor(name)) //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
	log := o.Logger.WithValues("controller", name)
	tc := d.Tenants
	if tc == nil {
		c, err := tenants.NewCache(mgr, o.Gate, log)
		if err != nil {
			return err
		}
		tc = c
	}
	ro := []managed.ReconcilerOption{
		managed.WithTypedExternalConnector[*v1alpha1.DatabaseBinding](&connector{
			log:      log,
			kube:     mgr.GetClient(),
			reader:   mgr.GetAPIReader(),
			tenants:  tc,
			usage:    resource.NewProviderConfigUsageTracker(mgr.GetClient(), &v1alpha1.ProviderConfigUsage{}),
			deps:     d,
			proofs:   memo.New(nil, func(p tenancy.DeliveryProof) time.Time { return p.Due }),
			creating: creating,
			slots:    NewSlots(),
		}),
		// The finalizer goes with the first write a create needs anyway.
		managed.WithFinalizer(finalizer{Finalizer: resource.NewAPIFinalizer(quiet.Manager{Manager: mgr}.GetClient(), managed.FinalizerName), creating: creating}),
		managed.WithLogger(log),
		managed.WithPollInterval(o.PollInterval),
		managed.WithPollIntervalHook(waitingForTenant),
		managed.WithRecorder(recorder),
		managed.WithManagementPolicies(),
		// A binding has no external name: the Database it binds is named
		// by databaseRef or derived from the Tenant's UID.
		managed.WithInitializers(),
		// Create is idempotent (the dynamic name is deterministic, a claim
		// write carries the resourceVersion read): an interrupted create
		// is decided afresh, not blocked.
		managed.WithDeterministicExternalName(true),
		// The Kubernetes API is read-your-writes through the API reader;
		// a stale cache only makes a retry lose a conflict.
		managed.WithCreationGracePeriod(0),
		// The external-create-succeeded annotation guards a create whose
		// result (an external name) could be lost; a binding's create is
		// decided afresh from what exists (above), so the annotation
		// protects nothing. Not writing it saves a write of the binding per
		// Tenant, and every write of a composed binding makes Crossplane
		// render its Tenant again.
		managed.WithCriticalAnnotationUpdater(managed.CriticalAnnotationUpdateFn(func(context.Context, client.Object) error { return nil })),
	}
	// A crossplane.io/poll-interval annotation shorter than this is
	// raised to it: one resource must not poll a shared server at will.
	ro = append(ro, managed.WithMinPollInterval(d.Options.MinPollInterval))
	// Crossplane's change logs (--enable-changelogs): an entry for every
	// external create, update and delete.
	if o.ChangeLogOptions != nil && o.ChangeLogOptions.ChangeLogger != nil {
		ro = append(ro, managed.WithChangeLogger(o.ChangeLogOptions.ChangeLogger))
	}
	mo, err := metrics.ManagedOptions(mgr, o, "DatabaseBinding", &v1alpha1.DatabaseBindingList{})
	if err != nil {
		return err
	}
	ro = append(ro, mo...)

	lost := requeue.NewLost()
	r := managed.NewReconciler(requeue.Manager{Manager: quiet.Manager{Manager: mgr}, Lost: lost}, resource.ManagedKind(v1alpha1.DatabaseBindingGroupVersionKind), ro...)

	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		For(&v1alpha1.DatabaseBinding{}, builder.WithPredicates(bindingChanged())).
		Watches(&v1alpha1.Database{}, handler.EnqueueRequestsFromMapFunc(bindingsOf(mgr.GetClient(), log)), builder.WithPredicates(databaseChanged())).
		Complete(ratelimiter.NewReconciler(name, requeue.Reconciler(r, lost), o.GlobalRateLimiter))
}

// TenantWait is how soon a binding whose Tenant does not list it yet is
// looked at again: Crossplane writes the Tenant's resource references
// before it creates the binding, so only a cache behind makes it wait, and
// the first Secret should not wait a whole poll for that.
const TenantWait = 2 * time.Second

// waitingForTenant shortens the poll of a binding waiting for its Tenant.
func waitingForTenant(mg resource.Managed, poll time.Duration) time.Duration {
	if c := mg.GetCondition(xpv2.TypeReady); c.Reason == tenancy.ReasonWaitingForTenant && poll > TenantWait {
		return TenantWait
	}
	return poll
}

// bindingChanged passes the DatabaseBinding events that can change what a
// reconcile decides: anything but a status write, and the status write that
// records the bound Database (the next step, the copy, may already be due).
// The binding's other status writes are its own progress reports; each
// reconcile that follows one only decides the same again, and takes a
// token of the global rate limiter. Each step that needs a next one
// requeues itself, or is started by its Database's events (below).
func bindingChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.DatabaseBinding)
		n, ok2 := e.ObjectNew.(*v1alpha1.DatabaseBinding)
		if !ok1 || !ok2 {
			return true
		}
		return o.GetGeneration() != n.GetGeneration() ||
			meta.WasDeleted(o) != meta.WasDeleted(n) ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) ||
			!maps.Equal(desiredAnnotations(o), desiredAnnotations(n)) ||
			!slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
			o.Status.AtProvider.DatabaseName != n.Status.AtProvider.DatabaseName ||
			o.Status.AtProvider.DatabaseUID != n.Status.AtProvider.DatabaseUID
	}}
}

// desiredAnnotations are an object's annotations without the ones the
// managed reconciler writes about its own create (it requeues by itself).
func desiredAnnotations(o client.Object) map[string]string {
	a := maps.Clone(o.GetAnnotations())
	for _, k := range []string{meta.AnnotationKeyExternalCreatePending, meta.AnnotationKeyExternalCreateSucceeded, meta.AnnotationKeyExternalCreateFailed} {
		delete(a, k)
	}
	return a
}

// databaseChanged passes the Database events a binding's decision can
// depend on: creation, deletion, and updates of what observeDatabase
// reads — the spec (generation: claimRef, reclaim policy, names, instance),
// the deletion mark, the claim protection, the Ready condition, the
// binding status and the record path. A Database being created writes
// itself six or more times (finalizer, annotations, status); each of those
// would otherwise reconcile every binding naming it, and each reconcile
// takes a token of the global rate limiter the Databases' creates need.
func databaseChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.Database)
		n, ok2 := e.ObjectNew.(*v1alpha1.Database)
		if !ok1 || !ok2 {
			return true
		}
		or, nr := o.GetCondition(xpv2.TypeReady), n.GetCondition(xpv2.TypeReady)
		return o.GetGeneration() != n.GetGeneration() ||
			meta.WasDeleted(o) != meta.WasDeleted(n) ||
			controllerutil.ContainsFinalizer(o, tenancy.ClaimProtectionFinalizer) != controllerutil.ContainsFinalizer(n, tenancy.ClaimProtectionFinalizer) ||
			or.Status != nr.Status || or.Reason != nr.Reason || or.Message != nr.Message ||
			!equality.Semantic.DeepEqual(o.Status.Binding, n.Status.Binding) ||
			o.Status.AtProvider.Credential.Path != n.Status.AtProvider.Credential.Path ||
			!slices.Equal(dataRoleCredentials(o), dataRoleCredentials(n))
	}}
}

// dataRoleCredentials is what says a Database's data role's credential
// changed (a rotation, or its move to a login member): its binding copies
// the new one at once, instead of at its next poll, so that the app's
// Secret follows within the previous login's grace.
func dataRoleCredentials(d *v1alpha1.Database) []string {
	out := make([]string, 0, len(d.Status.AtProvider.DataRoles))
	for _, r := range d.Status.AtProvider.DataRoles {
		at := ""
		if r.PasswordSetAt != nil {
			at = r.PasswordSetAt.UTC().String()
		}
		out = append(out, fmt.Sprintf("%s %s %t %s", r.Name, r.LoginRole, r.Ready, at))
	}
	return out
}

// bindingsOf maps a Database to the bindings that name it (databaseRef or
// the dynamic name) or whose Tenant its claimRef names, so that a binding
// reacts when its Database becomes Ready, is claimed or released.
func bindingsOf(c client.Client, log logging.Logger) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		db, ok := o.(*v1alpha1.Database)
		if !ok {
			return nil
		}
		l := &v1alpha1.DatabaseBindingList{}
		var opts []client.ListOption
		if c := db.Spec.ClaimRef; c != nil && db.GetName() == tenancy.DynamicDatabaseName(c.UID) {
			opts = append(opts, client.InNamespace(c.Namespace))
		}
		if err := c.List(ctx, l, opts...); err != nil {
			log.Debug("cannot list DatabaseBindings for a Database event", "error", err)
			return nil
		}
		var out []reconcile.Request
		for i := range l.Items {
			b := &l.Items[i]
			s := specOf(b)
			cr := db.Spec.ClaimRef
			if s.DatabaseName() == db.GetName() || (cr != nil && cr.UID != "" && cr.UID == s.TenantUID && cr.Namespace == s.Namespace) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.GetNamespace(), Name: b.GetName()}})
			}
		}
		return out
	}
}

// A connector records the usage of a binding's instance and produces the
// external client that binds it.
type connector struct {
	log    logging.Logger
	kube   client.Client
	reader client.Reader
	// tenants reads Tenants from a watch-fed cache (external.tenants).
	tenants client.Reader
	usage   resource.ModernTracker
	deps    Deps
	proofs  *memo.Memo[tenancy.DeliveryProof]
	// creating: see finalizer.
	creating *sync.Map
	slots    *Slots
}

// Connect records the usage of the instance the binding names, when it
// names one. A binding being deleted in a namespace that is being deleted
// cannot record it any more, and must still release its Database.
func (c *connector) Connect(ctx context.Context, b *v1alpha1.DatabaseBinding) (managed.TypedExternalClient[*v1alpha1.DatabaseBinding], error) {
	if b.GetProviderConfigReference() != nil {
		if err := c.usage.Track(ctx, b); err != nil && !(meta.WasDeleted(b) && kerrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)) {
			return nil, errors.Wrap(err, errTrackUsage)
		}
	}
	return &external{
		log:      c.log.WithValues("namespace", b.GetNamespace(), "name", b.GetName()),
		kube:     c.kube,
		reader:   c.reader,
		tenants:  c.tenants,
		kv:       c.deps.KV,
		opts:     c.deps.Options,
		spec:     specOf(b),
		hook:     c.deps.StepHook,
		uid:      b.GetUID(),
		proofs:   c.proofs,
		records:  c.deps.Records,
		creating: c.creating,
		slots:    c.slots,
	}, nil
}

// specOf is what a binding asks for, as the decision core reads it.
func specOf(b *v1alpha1.DatabaseBinding) tenancy.BindingSpec { return tenants.SpecOf(b) }

// finalizer adds the managed reconciler's finalizer without a write of its
// own when the reconcile goes on to create: the managed reconciler then
// writes the binding (its external-create-pending annotation) before it
// calls Create, and that write carries the finalizer. A new binding is
// written once instead of twice before its first claim or Database, and
// each write of a composed binding makes Crossplane render its Tenant
// again. Nothing is created unless that write succeeded, so nothing is
// ever claimed or provisioned without the finalizer persisted; every other
// reconcile (one that updates, deletes or only observes) writes it first,
// as the API finalizer does.
type finalizer struct {
	resource.Finalizer
	// creating holds the UIDs of the bindings whose Observe just decided
	// to create (external.Observe); each is taken by the next
	// AddFinalizer.
	creating *sync.Map
}

func (f finalizer) AddFinalizer(ctx context.Context, obj resource.Object) error {
	_, creating := f.creating.LoadAndDelete(obj.GetUID())
	if meta.FinalizerExists(obj, managed.FinalizerName) {
		return nil
	}
	if creating {
		meta.AddFinalizer(obj, managed.FinalizerName)
		return nil
	}
	return f.Finalizer.AddFinalizer(ctx, obj)
}
