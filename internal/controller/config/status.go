package config

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// conflictRetry is how soon a status update that lost an update conflict
// is tried again.
const conflictRetry = 100 * time.Millisecond

// Object is what the status controller and the Database controller use of
// a ClusterProviderConfig.
type Object interface {
	resource.ProviderConfig
	ConfigSpec() *v1alpha1.ProviderConfigSpec
	ConfigStatus() *v1alpha1.ProviderConfigStatus
}

// TargetOf returns the pool target of an endpoint.
func TargetOf(e v1alpha1.Endpoint) postgres.Target {
	return postgres.Target{Host: e.Host, Hostaddr: e.Hostaddr, Port: int(e.Port), Database: e.Database, SSLMode: postgres.SSLMode(e.SSLMode)}
}

// StatusOptions configure the status controllers.
type StatusOptions struct {
	// Namespace is the provider's own namespace.
	Namespace string
	// Pools holds the admin pools shared with the Database controller.
	Pools *postgres.Manager
	// Interval between health checks of a Ready config.
	Interval time.Duration
	// RetryInterval between health checks of a config that is not Ready.
	RetryInterval time.Duration
	// Sizes, when set, receives the sizes of each Ready config's
	// databases, measured at most every SizeInterval (default
	// DefaultSizeInterval) at a health check.
	Sizes        *memo.Sizes
	SizeInterval time.Duration
	// SizeRetryBase is the backoff base of a database whose size could not
	// be measured (0: tenancy.SizeRetryBase): shorter in tests.
	SizeRetryBase time.Duration
}

// SetupStatus adds the health/status controller of ClusterProviderConfigs,
// beside the usage controller.
func SetupStatus(mgr ctrl.Manager, o controller.Options, so StatusOptions) error {
	if so.Interval <= 0 {
		so.Interval = time.Minute
	}
	if so.RetryInterval <= 0 || so.RetryInterval > so.Interval {
		so.RetryInterval = min(so.Interval, 15*time.Second)
	}
	if so.SizeInterval <= 0 {
		so.SizeInterval = DefaultSizeInterval
	}
	kind := v1alpha1.ClusterProviderConfigKind
	name := "status/" + strings.ToLower(kind) + "." + v1alpha1.Group
	r := &statusReconciler{
		kube:     mgr.GetClient(),
		secrets:  mgr.GetAPIReader(),
		kind:     kind,
		opts:     so,
		log:      o.Logger.WithValues("controller", name),
		record:   event.NewAPIRecorder(mgr.GetEventRecorderFor(name)), //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
		warnedSU: map[string]bool{},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		For(&v1alpha1.ClusterProviderConfig{}).
		// Only the metadata of Secrets is cached: every change of a
		// Secret bumps its resourceVersion, which is all the trigger
		// needs; the data is read directly when reconciling.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, s client.Object) []reconcile.Request {
			return configsUsingSecret(ctx, mgr.GetClient(), s.GetNamespace(), s.GetName())
		})).
		Complete(r)
}

func configsUsingSecret(ctx context.Context, c client.Reader, ns, name string) []reconcile.Request {
	l := &v1alpha1.ClusterProviderConfigList{}
	if err := c.List(ctx, l); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, o := range l.Items {
		ref := o.Spec.Credentials.SecretRef
		if ref.Namespace == ns && ref.Name == name {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetName()}})
		}
	}
	return out
}

type statusReconciler struct {
	kube    client.Client
	secrets client.Reader
	kind    string
	opts    StatusOptions
	log     logging.Logger
	record  event.Recorder

	mu       sync.Mutex
	warnedSU map[string]bool
}

func (r *statusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ref := memo.PoolRef(r.kind, req.Namespace, req.Name)
	log := r.log.WithValues("config", ref)

	obj := &v1alpha1.ClusterProviderConfig{}
	if err := r.kube.Get(ctx, req.NamespacedName, obj); err != nil {
		if kerrors.IsNotFound(err) {
			// Gone: its pool goes too.
			r.opts.Pools.Remove(ref)
			r.forgetWarning(ref)
			if r.opts.Sizes != nil {
				r.opts.Sizes.ForgetName(req.Name)
			}
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	spec, st := obj.ConfigSpec(), obj.ConfigStatus()
	o := tenancy.ConfigObservation{
		Deleting: meta.WasDeleted(obj),
		Users:    st.Users,
		Target:   describeEndpoint(spec.Endpoint),
	}
	if !o.Deleting {
		// While deleting, the existing pool stays usable for Databases that
		// are being deleted; it is closed when the config is gone.
		r.observe(ctx, obj, ref, &o)
	}

	v := tenancy.DecideConfig(o)
	prev := obj.GetCondition(xpv2.TypeReady)
	changed := r.apply(obj, v, o)
	if v.Ready && r.refreshSizes(ctx, obj, ref) {
		changed = true
	}
	log = log.WithValues("phase", v.Phase, "reason", v.Reason, "generation", obj.GetGeneration())
	if changed {
		if err := r.kube.Status().Update(ctx, obj); err != nil {
			if kerrors.IsConflict(err) {
				// Another writer changed the object since it was read: try
				// again soon on a fresh read, without logging an error.
				return reconcile.Result{RequeueAfter: conflictRetry}, nil
			}
			return reconcile.Result{}, err
		}
		r.events(obj, prev, v, o)
		log.Info("Config status changed", "ready", v.Ready)
	} else {
		log.Debug("Config status unchanged", "ready", v.Ready)
	}
	if v.Ready {
		return reconcile.Result{RequeueAfter: r.opts.Interval}, nil
	}
	if v.Phase != v1alpha1.ConfigPhaseDeleting {
		metrics.Failure("config", v.Reason)
	}
	return reconcile.Result{RequeueAfter: r.opts.RetryInterval}, nil
}

// observe fills o: validation of the spec, the Secret, the pool and its
// health check.
func (r *statusReconciler) observe(ctx context.Context, obj Object, ref string, o *tenancy.ConfigObservation) {
	spec := obj.ConfigSpec()
	sns, sname, ok := r.validate(spec, o)
	if !ok {
		return
	}
	pool := r.adminPool(ctx, obj, ref, sns, sname, o)
	if pool == nil {
		return
	}

	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	r.checkServer(ctx, pool, spec, ref, o)
}

// validate checks the endpoint, the tenant limits and the reference to
// the admin Secret, and returns where that Secret is. ok is false (and
// o.Invalid says why) when the spec is invalid.
func (r *statusReconciler) validate(spec *v1alpha1.ProviderConfigSpec, o *tenancy.ConfigObservation) (ns, name string, ok bool) {
	if msg := tenancy.ValidateEndpoint(spec.Endpoint); msg != "" {
		o.Invalid = msg
		return "", "", false
	}
	if err := tenancy.ValidateLimits("spec.tenantLimits", spec.TenantLimits); err != nil {
		o.Invalid = err.Error()
		return "", "", false
	}
	sns, sname, invalid := tenancy.SecretRefOf(r.opts.Namespace, spec.Credentials.SecretRef)
	if invalid != "" {
		o.Invalid = invalid
		return "", "", false
	}
	return sns, sname, true
}

// adminPool reads the admin Secret and returns the config's pool: a new
// or rebuilt one, or, while the Secret is missing, the one that worked
// before. nil (and o says why) when there is no pool to check.
func (r *statusReconciler) adminPool(ctx context.Context, obj Object, ref, sns, sname string, o *tenancy.ConfigObservation) *postgres.Pool {
	spec := obj.ConfigSpec()
	target := TargetOf(spec.Endpoint)

	cred, problem, err := r.credential(ctx, sns, sname, spec.Credentials)
	if err != nil {
		o.Checked, o.CheckClass, o.CheckMessage = true, string(postgres.ClassUnavailable), "cannot read the admin Secret from the API server"
		return nil
	}
	if problem != "" {
		o.SecretMissing, o.SecretProblem = true, problem
		// A pool that worked keeps the config usable through a Secret
		// outage, as long as nothing else changed.
		p, ok := r.opts.Pools.Lookup(ref, obj.GetUID())
		if !ok || p.Target() != target {
			return nil
		}
		o.PoolKept = true
		return p
	}
	p, rebuilt, err := r.opts.Pools.Get(ref, obj.GetUID(), target, cred)
	if err != nil {
		o.Checked, o.CheckClass, o.CheckMessage = true, string(postgres.ClassOf(err)), err.Error()
		return nil
	}
	if rebuilt && obj.ConfigStatus().Phase != "" {
		r.record.Event(obj, event.Normal("ConnectionPoolReplaced", "The endpoint, admin credential or CA bundle changed: a new connection pool replaces the old one"))
	}
	return p
}

// checkServer runs the health check over the pool, then reads the
// template databases, the connection budget and the server's identity.
func (r *statusReconciler) checkServer(ctx context.Context, pool *postgres.Pool, spec *v1alpha1.ProviderConfigSpec, ref string, o *tenancy.ConfigObservation) {
	h, err := pool.Check(ctx)
	o.Checked = true
	if err != nil {
		o.CheckClass, o.CheckMessage = string(postgres.ClassOf(err)), err.Error()
		return
	}
	o.Version, o.Superuser, o.Warning = h.Version, h.Superuser, h.Warning()
	if err := h.Privileges(); err != nil {
		o.Privileges = err.Error()
	}
	ts, err := pool.Templates(ctx)
	if err != nil {
		o.CheckClass, o.CheckMessage = string(postgres.ClassOf(err)), "cannot check the template databases: "+err.Error()
		return
	}
	o.Templates, o.TemplatesWarning = tenancy.TemplateVerdict(ts, spec.UnhardenedTemplate1)
	r.readBudget(ctx, pool, spec, ref, o)
	// The identity is a report: a failure to read it is logged, and the
	// identity recorded earlier is kept.
	id, err := pool.SystemIdentifier(ctx)
	if err != nil {
		r.log.Debug("cannot read the server's system identifier", "config", ref, "error", err)
		return
	}
	o.ServerIdentity = id
}

// readBudget reads the server's connection budget and decides whether the
// config's tenants fit in it. The budget is a report: a failure to read it
// is logged, and the budget shown earlier is kept.
func (r *statusReconciler) readBudget(ctx context.Context, pool *postgres.Pool, spec *v1alpha1.ProviderConfigSpec, ref string, o *tenancy.ConfigObservation) {
	b, err := pool.ConnectionBudget(ctx)
	if err != nil {
		r.log.Debug("cannot read the connection budget", "config", ref, "error", err)
		return
	}
	if p := spec.Namespaces; p != nil {
		b.MaxTenants = p.MaxTenants
	}
	if l := spec.TenantLimits; l != nil {
		b.ConnectionLimit = l.ConnectionLimit
	}
	bv := tenancy.DecideConnectionBudget(b)
	o.Budget = &bv
}

// credential reads the admin Secret. problem is set (and err nil) when the
// Secret or a key is missing; err only for API failures.
func (r *statusReconciler) credential(ctx context.Context, ns, name string, c v1alpha1.Credentials) (postgres.Credential, string, error) {
	s := &corev1.Secret{}
	if err := r.secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		if kerrors.IsNotFound(err) {
			return postgres.Credential{}, fmt.Sprintf("the admin Secret %s/%s does not exist: create it with the keys %q and %q", ns, name, c.UsernameKey, c.PasswordKey), nil
		}
		return postgres.Credential{}, "", err
	}
	u, p := string(s.Data[c.UsernameKey]), string(s.Data[c.PasswordKey])
	var missing []string
	if u == "" {
		missing = append(missing, c.UsernameKey)
	}
	if p == "" {
		missing = append(missing, c.PasswordKey)
	}
	if len(missing) > 0 {
		return postgres.Credential{}, fmt.Sprintf("the admin Secret %s/%s has no (or an empty) %s key", ns, name, strings.Join(missing, " and ")), nil
	}
	return postgres.Credential{Username: u, Password: p}, "", nil
}

// apply writes the verdict into the object's status and reports whether
// anything changed.
func (r *statusReconciler) apply(obj Object, v tenancy.ConfigVerdict, o tenancy.ConfigObservation) bool {
	st := obj.ConfigStatus()
	before := st.DeepCopy()
	st.Phase = v.Phase
	if o.Version != "" {
		st.PostgreSQLVersion = o.Version
	}
	if o.ServerIdentity != "" {
		if st.ServerIdentity != "" && st.ServerIdentity != o.ServerIdentity {
			r.record.Event(obj, event.Warning("ServerIdentityChanged", fmt.Errorf("the server at %s is another PostgreSQL cluster than before (system identifier %s, recorded %s): Databases provisioned on the earlier one will report what they miss", o.Target, o.ServerIdentity, st.ServerIdentity)))
		}
		st.ServerIdentity = o.ServerIdentity
	}
	st.ObservedGeneration = obj.GetGeneration()
	c := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ConditionReason(v.Reason), Message: v.Message, LastTransitionTime: metav1.Now(), ObservedGeneration: obj.GetGeneration()}
	if v.Ready {
		c.Status = corev1.ConditionTrue
	}
	obj.SetConditions(c)
	r.applyBudget(obj, o.Budget)
	return !equalStatus(before, st)
}

// applyBudget shows the connection budget in status.connections and the
// ConnectionBudget condition, with a Warning Event when it stops fitting.
// It never touches Ready: an overcommitted server still serves.
func (r *statusReconciler) applyBudget(obj Object, b *tenancy.BudgetVerdict) {
	if b == nil {
		return
	}
	st := obj.ConfigStatus()
	st.Connections = b.Status
	status := corev1.ConditionFalse
	if b.Fits {
		status = corev1.ConditionTrue
	}
	prev := obj.GetCondition(tenancy.ConditionConnectionBudget)
	c := xpv2.Condition{Type: tenancy.ConditionConnectionBudget, Status: status, Reason: xpv2.ConditionReason(b.Reason), Message: b.Message,
		LastTransitionTime: metav1.Now(), ObservedGeneration: obj.GetGeneration()}
	if prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message {
		return
	}
	obj.SetConditions(c)
	if !b.Fits && prev.Reason != c.Reason {
		r.record.Event(obj, event.Warning(event.Reason(b.Reason), fmt.Errorf("%s", b.Message)))
	}
}

func equalStatus(a, b *v1alpha1.ProviderConfigStatus) bool {
	if a.Phase != b.Phase || a.PostgreSQLVersion != b.PostgreSQLVersion || a.ServerIdentity != b.ServerIdentity || a.ObservedGeneration != b.ObservedGeneration {
		return false
	}
	if !equality.Semantic.DeepEqual(a.Connections, b.Connections) {
		return false
	}
	ca, cb := a.GetCondition(xpv2.TypeReady), b.GetCondition(xpv2.TypeReady)
	ba, bb := a.GetCondition(tenancy.ConditionConnectionBudget), b.GetCondition(tenancy.ConditionConnectionBudget)
	return ca.Equal(cb) && ba.Equal(bb)
}

// events records the transitions a human cares about.
func (r *statusReconciler) events(obj Object, prev xpv2.Condition, v tenancy.ConfigVerdict, o tenancy.ConfigObservation) {
	if string(prev.Reason) == v.Reason && (prev.Status == corev1.ConditionTrue) == v.Ready {
		return
	}
	switch {
	case v.Ready:
		r.record.Event(obj, event.Normal("Ready", v.Message))
		if o.Superuser && r.warnOnce(memo.PoolRef(r.kind, obj.GetNamespace(), obj.GetName())) {
			r.record.Event(obj, event.Warning("SuperuserAdmin", fmt.Errorf("the admin role is a superuser; the provider needs only CREATEDB and CREATEROLE: use a less privileged role")))
		}
	case v.Phase == v1alpha1.ConfigPhaseDeleting:
		r.record.Event(obj, event.Normal("Deleting", v.Message))
	default:
		r.record.Event(obj, event.Warning(event.Reason(v.Reason), fmt.Errorf("%s", v.Message)))
	}
}

func (r *statusReconciler) warnOnce(ref string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warnedSU[ref] {
		return false
	}
	r.warnedSU[ref] = true
	return true
}

func (r *statusReconciler) forgetWarning(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.warnedSU, ref)
}

// describeEndpoint names an endpoint for messages: "host (hostaddr:port)",
// or "host:port" without a hostaddr.
func describeEndpoint(e v1alpha1.Endpoint) string {
	if e.Hostaddr == "" {
		return fmt.Sprintf("%s:%d", e.Host, e.Port)
	}
	return fmt.Sprintf("%s (%s:%d)", e.Host, e.Hostaddr, e.Port)
}
