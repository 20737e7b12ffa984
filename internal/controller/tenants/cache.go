package tenants

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// ErrNotCached is returned when the cache does not hold the kind read (it
// is not served yet, the provider may not list and watch it, or its
// informer has not synced). The caller reads the API server instead.
var ErrNotCached = errors.New("the kind is not cached")

// CachedKinds are the Tenant kinds a Cache holds: the two a binding's
// controller reference may name. The legacy claim, read only for a binding
// without a controller, is always read from the API server.
var CachedKinds = []schema.GroupVersionKind{tenantGVK, legacyCompositeGVK}

// A Cache reads the Tenant kinds from the manager's watch-fed cache, once
// each kind is served and the provider may list and watch it; before that
// every read returns ErrNotCached. A cache can be behind the API server:
// what it says is only ever used to confirm that nothing changes (see
// the binding controller's Observe), never to act.
type Cache struct {
	cache ctrl.Cache
	log   logging.Logger

	mu    sync.RWMutex
	ready map[schema.GroupVersionKind]bool
}

// NewCache caches each Tenant kind once it is served: registered with
// gate when there is one (the kind's CRD comes with the Configuration,
// which may be installed after the provider), else polled for by a
// runnable of mgr. Nothing here keeps the provider from starting.
func NewCache(mgr manager.Manager, gate controller.Gate, log logging.Logger) (*Cache, error) {
	c := &Cache{cache: mgr.GetCache(), log: log, ready: map[schema.GroupVersionKind]bool{}}
	for _, gvk := range CachedKinds {
		if gate != nil {
			gate.Register(func() { go c.start(context.Background(), mgr, gvk) }, gvk)
			continue
		}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			// Without a gate: wait until the kind is served.
			_ = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(context.Context) (bool, error) {
				_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
				return err == nil, nil
			})
			c.start(ctx, mgr, gvk)
			return nil
		})); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// start starts the informer of gvk when the provider may list and watch
// it, and marks the kind cached once the informer has synced. Without the
// permission (an install that applied an older
// package/rbac/provider-tenants.yaml, which granted get only) it says so
// once and leaves the kind uncached: every read goes to the API server.
func (c *Cache) start(ctx context.Context, mgr manager.Manager, gvk schema.GroupVersionKind) {
	log := c.log.WithValues("kind", gvk.Kind, "apiVersion", gvk.GroupVersion().String())
	m, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		log.Info("Reading Tenants from the API server on every reconcile: the kind is not served", "error", err.Error())
		return
	}
	for _, verb := range []string{"list", "watch"} {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvk.Group, Version: gvk.Version, Resource: m.Resource.Resource},
		}}
		if err := mgr.GetClient().Create(ctx, r); err != nil {
			log.Info("Reading Tenants from the API server on every reconcile: cannot tell whether the provider may list and watch them", "error", err.Error())
			return
		}
		if !r.Status.Allowed {
			log.Info("Reading Tenants from the API server on every reconcile: the provider may not " + verb + " them; apply the current package/rbac/provider-tenants.yaml to read them from a watch-fed cache")
			return
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	inf, err := c.cache.GetInformer(ctx, u, ctrl.BlockUntilSynced(false))
	if err != nil {
		log.Info("Reading Tenants from the API server on every reconcile: cannot start their informer", "error", err.Error())
		return
	}
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return inf.HasSynced(), nil
	}); err != nil {
		return
	}
	c.mu.Lock()
	c.ready[gvk] = true
	c.mu.Unlock()
	log.Info("Reading Tenants from a watch-fed cache to confirm that nothing changes; every decision that acts reads the API server")
}

// Cached reports whether gvk is read from the cache.
func (c *Cache) Cached(gvk schema.GroupVersionKind) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready[gvk]
}

// Get reads obj from the cache, or returns ErrNotCached.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if !c.Cached(obj.GetObjectKind().GroupVersionKind()) {
		return ErrNotCached
	}
	return c.cache.Get(ctx, key, obj, opts...)
}

// List is not served from this cache.
func (c *Cache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return ErrNotCached
}
