package binding

import (
	"context"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// slotHold is how long a slot taken for a Database stays counted without
// the Database in the cache: long enough for a create and the watch that
// shows it, short enough that a slot a failed create left frees itself.
const slotHold = 2 * time.Minute

// Slots counts, per server and namespace, the Databases a namespace holds
// while they are being taken, so that bindings decided at once (or before
// the cache shows what the last one created) cannot take more than the
// server's per-namespace limit between them. One per process: the
// provider runs one leader, and a new leader's cache is complete.
type Slots struct {
	mu sync.Mutex
	// taken: server/namespace → Database name → when taken.
	taken map[string]map[string]time.Time
}

// NewSlots returns an empty ledger.
func NewSlots() *Slots { return &Slots{taken: map[string]map[string]time.Time{}} }

// take counts what namespace ns holds on server instance (the Databases in
// held, and the slots taken for others and not yet in held) and, when that
// is below limit, takes a slot for database: it returns the count without
// database itself, and whether the slot is taken.
func (s *Slots) take(instance, ns, database string, held map[string]bool, limit int, now time.Time) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := instance + "/" + ns
	// Slots the cache never showed, of any namespace, go (a slot the
	// cache showed goes at the next take of its own namespace, below).
	for k, m := range s.taken {
		for name, at := range m {
			if now.Sub(at) > slotHold {
				delete(m, name)
			}
		}
		if len(m) == 0 && k != key {
			delete(s.taken, k)
		}
	}
	mine := s.taken[key]
	n := 0
	for name := range held {
		if name != database {
			n++
		}
	}
	for name, at := range mine {
		switch {
		case held[name] || now.Sub(at) > slotHold:
			delete(mine, name)
		case name != database:
			n++
		}
	}
	if n >= limit {
		delete(mine, database)
		return n, false
	}
	if mine == nil {
		mine = map[string]time.Time{}
		s.taken[key] = mine
	}
	mine[database] = now
	return n, true
}

// release gives back the slot taken for database, when it was not used.
func (s *Slots) release(instance, ns, database string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.taken[instance+"/"+ns], database)
}

// mayTake reports whether the binding may take a Database at this
// Observe: a new one (none exists yet), or an existing one no admin
// reserved. A bound binding, or one whose Database is reserved, never
// reads the namespace policy.
func mayTake(o tenancy.BindingObservation) bool {
	return !o.Deleting && (!o.Database.Present || o.Database.ClaimRef == nil)
}

// target is the Database the binding would take.
func (e *external) target() string {
	if e.spec.Static() {
		return e.spec.DatabaseRef
	}
	return tenancy.DynamicDatabaseName(e.spec.TenantUID)
}

// namespaceUse applies cfg's namespace policy to the binding's namespace:
// its selector against the namespace's labels (read from the API server,
// only when there is a selector), and its limit against the Databases on
// cfg the namespace holds (from the cache) and the slots taken for it.
func (e *external) namespaceUse(ctx context.Context, cfg *v1alpha1.ClusterProviderConfig) (tenancy.NamespaceUse, error) {
	u := tenancy.NamespaceUse{Read: true, Selected: true}
	p := cfg.Spec.Namespaces
	if p == nil {
		return u, nil
	}
	ns := e.spec.Namespace
	if p.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			u.Invalid = err.Error()
			return u, nil
		}
		if !sel.Empty() {
			l, err := e.namespaceLabels(ctx)
			if err != nil {
				return u, err
			}
			u.Selected = sel.Matches(labels.Set(l))
		}
	}
	if p.MaxTenants == nil || !u.Selected {
		return u, nil
	}
	u.Limited, u.Limit = true, int(*p.MaxTenants)
	l := &v1alpha1.DatabaseList{}
	// Read only, never kept: the cache's objects are not copied.
	if err := e.kube.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return u, errors.Errorf("cannot list Databases: %w", err)
	}
	held := map[string]bool{}
	for i := range l.Items {
		d := &l.Items[i]
		c := d.Spec.ClaimRef
		if c == nil || c.Namespace != ns || d.Spec.ProviderConfigReference == nil || d.Spec.ProviderConfigReference.Name != cfg.Name ||
			tenancy.ReleasedClaim(d.Status.Binding, c) {
			continue
		}
		held[d.Name] = true
	}
	if e.slots == nil {
		for name := range held {
			if name != e.target() {
				u.Held++
			}
		}
		return u, nil
	}
	var taken bool
	u.Held, taken = e.slots.take(cfg.Name, ns, e.target(), held, u.Limit, time.Now())
	if taken {
		e.slotInstance = cfg.Name
	}
	return u, nil
}

// settleSlot gives back a slot Observe took when it decided not to take
// the Database after all.
func (e *external) settleSlot(d tenancy.BindingDecision) {
	if e.slotInstance == "" || d.Action == tenancy.ActionCreateDynamic || d.Action == tenancy.ActionWriteClaim {
		return
	}
	e.slots.release(e.slotInstance, e.spec.Namespace, e.target())
	e.slotInstance = ""
}

// namespaceLabels reads the binding's namespace's labels from the API
// server (a namespace is not cached), once per Observe.
func (e *external) namespaceLabels(ctx context.Context) (map[string]string, error) {
	if e.nsLabels != nil {
		return e.nsLabels, nil
	}
	n := &corev1.Namespace{}
	if err := e.reader.Get(ctx, types.NamespacedName{Name: e.spec.Namespace}, n); err != nil {
		return nil, errors.Errorf("cannot read namespace %s: %w", e.spec.Namespace, err)
	}
	e.nsLabels = n.Labels
	if e.nsLabels == nil {
		e.nsLabels = map[string]string{}
	}
	return e.nsLabels, nil
}

// chooseDefault reads which servers are the default of the binding's
// namespace: the configs marked default (from the cache), and the
// namespace's labels only when one of them has a selector.
func (e *external) chooseDefault(ctx context.Context) (tenancy.DefaultChoice, error) {
	l := &v1alpha1.ClusterProviderConfigList{}
	// Read only, never kept: the cache's objects are not copied.
	if err := e.kube.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return tenancy.DefaultChoice{}, errors.Errorf("cannot list ClusterProviderConfigs: %w", err)
	}
	var candidates []tenancy.DefaultCandidate
	for i := range l.Items {
		c := &l.Items[i]
		if p := c.Spec.Namespaces; p != nil && p.Default {
			candidates = append(candidates, tenancy.DefaultCandidate{Name: c.Name, Deleting: c.GetDeletionTimestamp() != nil, Selector: p.Selector})
		}
	}
	var nsLabels map[string]string
	if tenancy.NeedsNamespaceLabels(candidates) {
		var err error
		if nsLabels, err = e.namespaceLabels(ctx); err != nil {
			return tenancy.DefaultChoice{}, err
		}
	}
	return tenancy.ChooseDefault(nsLabels, candidates), nil
}
