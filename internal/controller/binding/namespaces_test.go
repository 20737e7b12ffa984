package binding

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// The ledger counts what a namespace holds and what it is taking, once
// each, and frees a slot the cache never showed after slotHold.
func TestSlotsCountEachDatabaseOnce(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		db       string
		held     []string
		at       time.Duration
		wantN    int
		wantTake bool
	}
	cases := map[string][]step{
		"TakenSlotsCountUntilTheCacheShowsThem": {
			{db: "a", wantN: 0, wantTake: true},
			{db: "b", wantN: 1, wantTake: true},
			// a and b are being created: c finds the namespace full.
			{db: "c", wantN: 2, wantTake: false},
			// The cache shows a: counted once, not as a slot and a
			// Database.
			{db: "c", held: []string{"a"}, wantN: 2, wantTake: false},
		},
		"ItsOwnDatabaseIsNotCounted": {
			{db: "a", wantN: 0, wantTake: true},
			{db: "a", held: []string{"a"}, wantN: 0, wantTake: true},
		},
		"ASlotTheCacheNeverShowsIsFreed": {
			{db: "a", wantN: 0, wantTake: true},
			{db: "b", wantN: 1, wantTake: true},
			{db: "c", at: slotHold + time.Second, wantN: 0, wantTake: true},
		},
		"HeldDatabasesFillIt": {
			{db: "c", held: []string{"x", "y"}, wantN: 2, wantTake: false},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewSlots()
			for i, st := range steps {
				held := map[string]bool{}
				for _, h := range st.held {
					held[h] = true
				}
				n, took := s.take("pg", "shop", st.db, held, 2, t0.Add(st.at))
				if n != st.wantN || took != st.wantTake {
					t.Errorf("step %d (%s): take = %d, %v; want %d, %v", i, st.db, n, took, st.wantN, st.wantTake)
				}
			}
		})
	}
	// Another namespace, or another server, has slots of its own.
	s := NewSlots()
	s.take("pg", "shop", "a", nil, 1, t0)
	if n, took := s.take("pg", "other", "b", nil, 1, t0); n != 0 || !took {
		t.Errorf("another namespace: %d, %v", n, took)
	}
	if n, took := s.take("pg2", "shop", "b", nil, 1, t0); n != 0 || !took {
		t.Errorf("another server: %d, %v", n, took)
	}
	s.release("pg", "shop", "a")
	if n, took := s.take("pg", "shop", "c", nil, 1, t0); n != 0 || !took {
		t.Errorf("after release: %d, %v", n, took)
	}
	// Slots of every namespace expire: the ledger holds only what is
	// being taken now.
	s.take("pg", "third", "d", nil, 1, t0.Add(slotHold+time.Second))
	if len(s.taken) != 1 || len(s.taken["pg/third"]) != 1 {
		t.Errorf("after every slot expired the ledger holds %v; want only the new slot", s.taken)
	}
}

// policyInstance registers a Ready ClusterProviderConfig with a namespace
// policy.
func policyInstance(t *testing.T, p *v1alpha1.NamespacePolicy) string {
	t.Helper()
	name := instance(t, v1alpha1.ReclaimRetain)
	cfg := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	testenv.Edit(t, env.Kube.Client, cfg, func(cfg *v1alpha1.ClusterProviderConfig) { cfg.Spec.Namespaces = p })
	return name
}

func dynamicBinding(t *testing.T, ns, inst, name string) *v1alpha1.DatabaseBinding {
	t.Helper()
	uid := tenant(t, ns, name, name+"-db")
	b := &v1alpha1.DatabaseBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-db"},
		Spec: v1alpha1.DatabaseBindingSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: inst}},
			ForProvider:         v1alpha1.DatabaseBindingParameters{Tenant: v1alpha1.TenantReference{Name: name, UID: uid}, Database: ptr.To(strings.ReplaceAll(name, "-", "_"))},
		},
	}
	create(t, b)
	return b
}

// heldBy lists the Databases on inst whose claim names namespace ns.
func heldBy(t *testing.T, inst, ns string) []string {
	t.Helper()
	l := &v1alpha1.DatabaseList{}
	if err := env.Kube.Client.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range l.Items {
		if d.Spec.ClaimRef != nil && d.Spec.ClaimRef.Namespace == ns && d.Spec.ProviderConfigReference.Name == inst {
			out = append(out, d.GetName())
		}
	}
	return out
}

// A server that serves labelled namespaces, two databases each: a Tenant
// elsewhere gets nothing and is told why; three Tenants at once in a
// served namespace get two databases, and the third is told the limit;
// the selector changed under bound Databases leaves them bound.
func TestNamespacePolicyOfTheServer(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	label := "tenants-" + suffix()
	inst := policyInstance(t, &v1alpha1.NamespacePolicy{
		Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}},
		MaxTenants: ptr.To[int32](2),
	})
	outside := namespace(t)
	served := namespace(t)
	testenv.Edit(t, env.Kube.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: served}}, func(n *corev1.Namespace) {
		n.Labels = map[string]string{label: "yes"}
	})

	refused := dynamicBinding(t, outside, inst, "elsewhere")
	awaitBinding(t, refused, "a Tenant outside the selector is refused", readyReason(tenancy.ReasonNamespaceNotAllowed))
	if m := refused.GetCondition(xpv2.TypeReady).Message; !strings.Contains(m, "does not serve namespace "+outside) || strings.Contains(m, label) {
		t.Errorf("the refusal says %q: it must name the namespace and not the admin's selector", m)
	}

	var bs []*v1alpha1.DatabaseBinding
	for i := range 3 {
		bs = append(bs, dynamicBinding(t, served, inst, fmt.Sprintf("app-%d", i)))
	}
	var limited *v1alpha1.DatabaseBinding
	err := testenv.WaitFor(ctx, timeout, func(context.Context) error {
		limited = nil
		for _, b := range bs {
			if err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Name}, b); err != nil {
				return err
			}
			if readyReason(tenancy.ReasonNamespaceLimitReached)(b) {
				limited = b
			}
		}
		if got := heldBy(t, inst, served); len(got) != 2 || limited == nil {
			return fmt.Errorf("Databases of %s: %v; limited: %v", served, got, limited != nil)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("two Databases are created and one binding is told the limit: %v", err)
	}
	if m := limited.GetCondition(xpv2.TypeReady).Message; !strings.Contains(m, "holds 2 of the 2 databases") {
		t.Errorf("the limit's message: %q", m)
	}
	// Some polls later: still two, still nothing for the refused.
	time.Sleep(3 * poll)
	if got := heldBy(t, inst, served); len(got) != 2 {
		t.Errorf("after a while the namespace holds %v; want 2", got)
	}
	if got := heldBy(t, inst, outside); len(got) != 0 {
		t.Errorf("the namespace outside the selector holds %v", got)
	}

	// The two become Ready; then the admin narrows the selector: they stay
	// bound and delivered.
	var bound []*v1alpha1.DatabaseBinding
	for _, b := range bs {
		if b != limited {
			bound = append(bound, b)
		}
	}
	for i, b := range bound {
		db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: tenancy.DynamicDatabaseName(b.Spec.ForProvider.Tenant.UID)}}
		testenv.Await(t, env.Kube.Client, db, timeout, "the Database exists", func(*v1alpha1.Database) bool { return true }, func(*v1alpha1.Database) string { return describeBinding(b) })
		makeReady(t, db, fmt.Sprintf("policy-secret-%d", i))
		awaitBinding(t, b, "the binding is Available", available)
	}
	testenv.Edit(t, env.Kube.Client, &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: inst}}, func(cfg *v1alpha1.ClusterProviderConfig) {
		cfg.Spec.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{label: "other"}}
	})
	awaitBinding(t, limited, "the waiting Tenant is now outside the selector", readyReason(tenancy.ReasonNamespaceNotAllowed))
	time.Sleep(3 * poll)
	for _, b := range bound {
		if err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Name}, b); err != nil {
			t.Fatal(err)
		}
		if !available(b) {
			t.Errorf("a bound Tenant lost its database when the selector changed: %s", describeBinding(b))
		}
	}
	if diff := cmp.Diff(2, len(heldBy(t, inst, served))); diff != "" {
		t.Errorf("Databases held after the selector changed (-want +got): %s", diff)
	}
	noSecretsIn(t, served, bound[0], "policy-secret-0", "policy-secret-1")
}
