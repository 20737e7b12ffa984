// Package config reconciles ClusterProviderConfigs (the instances): usage
// tracking, so that an instance in use cannot be deleted, and health.
package config

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// SetupGated registers the usage and status controllers once the config
// and usage CRDs exist.
func SetupGated(mgr ctrl.Manager, o controller.Options, so StatusOptions) error {
	o.Gate.Register(func() {
		if err := Setup(mgr, o); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the ClusterProviderConfig usage controller")
		}
		if err := SetupStatus(mgr, o, so); err != nil {
			mgr.GetLogger().Error(err, "cannot set up the ClusterProviderConfig status controller")
		}
	}, v1alpha1.ClusterProviderConfigGroupVersionKind, v1alpha1.ClusterProviderConfigUsageGroupVersionKind, v1alpha1.ProviderConfigUsageGroupVersionKind)
	return nil
}

// inUseFinalizer is Crossplane's finalizer of a provider config in use.
const inUseFinalizer = "in-use.crossplane.io"

// Setup adds the usage controller of ClusterProviderConfigs. A
// ClusterProviderConfig has two kinds of users: cluster-scoped Databases,
// which record a ClusterProviderConfigUsage, and DatabaseBindings that
// provision on it, which record a ProviderConfigUsage in their namespace
// (labelled with the config's kind and name). Crossplane's usage reconciler
// counts one kind only, so this one counts both; the config cannot be
// deleted while either exists.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	name := providerconfig.ControllerName(v1alpha1.ClusterProviderConfigGroupKind)
	r := &usageReconciler{
		kube:   mgr.GetClient(),
		log:    o.Logger.WithValues("controller", name),
		record: event.NewAPIRecorder(mgr.GetEventRecorderFor(name)), //nolint:staticcheck // crossplane-runtime's event package still takes the legacy recorder.
		pace:   newCountPacer(usageCountEvery),
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(o.ForControllerRuntime()).
		For(&v1alpha1.ClusterProviderConfig{}).
		Watches(&v1alpha1.ClusterProviderConfigUsage{}, &resource.EnqueueRequestForProviderConfig{Kind: v1alpha1.ClusterProviderConfigKind}).
		Watches(&v1alpha1.ProviderConfigUsage{}, &resource.EnqueueRequestForProviderConfig{Kind: v1alpha1.ClusterProviderConfigKind}).
		Complete(ratelimiter.NewReconciler(name, r, o.GlobalRateLimiter))
}

type usageReconciler struct {
	kube   client.Client
	log    logging.Logger
	record event.Recorder
	pace   *countPacer
}

// usageCountEvery is how often, at most, the usages of one config are
// counted. Every Database and binding that starts using a config writes a
// usage, and each usage event would otherwise count all of them again: a
// wave of 10,000 new Databases made 10,000 counts of up to 10,000 objects,
// which starved the Databases' own reconciles. Counting at most every 2 s
// delays the in-use finalizer and status.users by that much, and nothing
// else.
const usageCountEvery = 2 * time.Second

// countPacer spaces out the counts of each config.
type countPacer struct {
	mu    sync.Mutex
	every time.Duration
	last  map[string]time.Time
	now   func() time.Time
}

func newCountPacer(every time.Duration) *countPacer {
	return &countPacer{every: every, last: map[string]time.Time{}, now: time.Now}
}

// wait returns how long to wait before counting the config's usages
// (0: count now, which is recorded as its last count).
func (p *countPacer) wait(config string) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if last, ok := p.last[config]; ok && now.Sub(last) < p.every {
		return p.every - now.Sub(last)
	}
	p.last[config] = now
	return 0
}

// usageRetry is the wait after a failed list, delete or update.
const usageRetry = 30 * time.Second

func (r *usageReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := r.log.WithValues("config", req.Name)
	if d := r.pace.wait(req.Name); d > 0 {
		return reconcile.Result{RequeueAfter: d}, nil
	}
	pc := &v1alpha1.ClusterProviderConfig{}
	if err := r.kube.Get(ctx, req.NamespacedName, pc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	databases, err := r.count(ctx, &v1alpha1.ClusterProviderConfigUsageList{}, client.MatchingLabels{xpv2.LabelKeyProviderName: pc.GetName()})
	if err != nil {
		r.record.Event(pc, event.Warning("UsageAccounting", fmt.Errorf("cannot count the ClusterProviderConfigUsages: %w", err)))
		return reconcile.Result{RequeueAfter: usageRetry}, nil
	}
	bindings, err := r.count(ctx, &v1alpha1.ProviderConfigUsageList{}, client.MatchingLabels{
		xpv2.LabelKeyProviderName: pc.GetName(),
		xpv2.LabelKeyProviderKind: v1alpha1.ClusterProviderConfigKind,
	})
	if err != nil {
		r.record.Event(pc, event.Warning("UsageAccounting", fmt.Errorf("cannot count the ProviderConfigUsages: %w", err)))
		return reconcile.Result{RequeueAfter: usageRetry}, nil
	}
	v := tenancy.DecideConfigUsage(meta.WasDeleted(pc), databases, bindings)
	log = log.WithValues("databases", databases, "bindings", bindings)
	if !v.KeepFinalizer {
		meta.RemoveFinalizer(pc, inUseFinalizer)
		if err := r.kube.Update(ctx, pc); err != nil && !kerrors.IsNotFound(err) {
			log.Debug("cannot remove the in-use finalizer", "error", err)
			return reconcile.Result{RequeueAfter: usageRetry}, nil
		}
		return reconcile.Result{}, nil
	}
	if !meta.FinalizerExists(pc, inUseFinalizer) {
		meta.AddFinalizer(pc, inUseFinalizer)
		if err := r.kube.Update(ctx, pc); err != nil {
			log.Debug("cannot add the in-use finalizer", "error", err)
			return reconcile.Result{RequeueAfter: usageRetry}, nil
		}
	}
	if v.Blocked {
		pc.SetConditions(providerconfig.Terminating().WithMessage(v.Message))
		r.record.Event(pc, event.Warning("UsageAccounting", fmt.Errorf("%s", v.Message)))
	}
	if pc.Status.Users == v.Users && !v.Blocked {
		return reconcile.Result{}, nil
	}
	pc.Status.Users = v.Users
	// The usages are watched: a change requeues this config.
	return reconcile.Result{}, client.IgnoreNotFound(r.kube.Status().Update(ctx, pc))
}

// count returns how many usages of list's kind sel selects, deleting the ones
// without a controller reference: one stripped of it (by a restore, say)
// is stale or is written again when its user next connects.
func (r *usageReconciler) count(ctx context.Context, list resource.ProviderConfigUsageList, sel client.MatchingLabels) (int64, error) {
	if err := r.kube.List(ctx, list, sel); err != nil {
		return 0, err
	}
	var n int64
	for _, u := range list.GetItems() {
		if metav1.GetControllerOf(u) == nil {
			if err := r.kube.Delete(ctx, u); resource.IgnoreNotFound(err) != nil {
				return 0, err
			}
			continue
		}
		n++
	}
	return n, nil
}
