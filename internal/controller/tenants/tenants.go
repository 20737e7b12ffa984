// Package tenants reads the Tenant a DatabaseBinding says it belongs to,
// from the API server or (to confirm that nothing changes) a watch-fed
// Cache, so that the decision core can tell whether the binding counts as
// that Tenant's (tenancy.DecideStanding). It never trusts what the binding
// itself says about its Tenant beyond the names to look up.
package tenants

import (
	"context"
	"errors"
	"fmt"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// The kinds read, at the version the Configuration serves.
var (
	tenantGVK          = schema.FromAPIVersionAndKind(tenancy.TenantAPIVersion, tenancy.TenantKind)
	legacyCompositeGVK = schema.FromAPIVersionAndKind(tenancy.LegacyTenantAPIVersion, tenancy.LegacyCompositeKind)
	legacyClaimGVK     = schema.FromAPIVersionAndKind(tenancy.LegacyTenantAPIVersion, tenancy.LegacyClaimKind)
)

// SpecOf is what a binding asks for, as the decision core reads it.
func SpecOf(b *v1alpha1.DatabaseBinding) tenancy.BindingSpec {
	p := b.Spec.ForProvider
	s := tenancy.BindingSpec{
		Namespace: b.GetNamespace(), Name: b.GetName(), UID: string(b.GetUID()),
		TenantName: p.Tenant.Name, TenantUID: p.Tenant.UID,
		Extensions: p.Extensions, Options: p.Options, DataRoles: p.DataRoles,
	}
	if p.DatabaseRef != nil {
		s.DatabaseRef = *p.DatabaseRef
	}
	if p.Database != nil {
		s.Database = *p.Database
	}
	if p.LoginRole != nil {
		s.LoginRole = *p.LoginRole
	}
	if r := b.GetProviderConfigReference(); r != nil {
		s.InstanceKind, s.Instance = r.Kind, r.Name
	}
	if c := metav1.GetControllerOf(b); c != nil {
		s.Controller = tenancy.ControllerRef{APIVersion: c.APIVersion, Kind: c.Kind, Name: c.Name, UID: string(c.UID)}
	}
	return s
}

// Standing reads the binding's Tenant with r and decides whether the
// binding counts as that Tenant's. r reads the API server for any verdict
// that is acted on; a Cache may be behind, and its verdict only confirms
// that nothing changes. An error (the read failed, the kind is not
// served, the provider may not read it, ErrNotCached) decides nothing:
// the caller reads again or waits and retries.
func Standing(ctx context.Context, r client.Reader, b *v1alpha1.DatabaseBinding) (tenancy.StandingVerdict, error) {
	s := SpecOf(b)
	t, err := Read(ctx, r, s)
	if err != nil {
		return tenancy.StandingVerdict{}, err
	}
	return tenancy.DecideStanding(s, t), nil
}

// Read reads the Tenant of a binding: the object its controller reference
// names when that is one of the two served Tenant kinds (nothing is read
// for another kind: it is never a Tenant); without a controller reference
// (removed by the garbage collector when the Tenant was deleted with its
// dependents orphaned), the Tenant of the binding's namespace its spec
// names, or the legacy claim of that name and its composite.
func Read(ctx context.Context, r client.Reader, s tenancy.BindingSpec) (tenancy.ObservedTenant, error) {
	c := s.Controller
	switch {
	case c.UID == "":
		t, err := readTenant(ctx, r, s.Namespace, s.TenantName)
		if err != nil || t.Found {
			return t, err
		}
		return readLegacyClaim(ctx, r, s.Namespace, s.TenantName)
	case !tenancy.ControllerIsTenantKind(c):
		return tenancy.ObservedTenant{}, nil
	case c.Kind == tenancy.TenantKind:
		return readTenant(ctx, r, s.Namespace, c.Name)
	default:
		return readLegacyComposite(ctx, r, c.Name)
	}
}

// errNotServed: the API server does not serve the kind.
var errNotServed = errors.New("the kind is not served")

func get(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
	switch {
	case kerrors.IsNotFound(err):
		return nil, nil
	case apimeta.IsNoMatchError(err):
		return nil, fmt.Errorf("cannot read the %s of %s: %w (install the Tenant Configuration)", gvk.Kind, gvk.GroupVersion(), errNotServed)
	case err != nil:
		what := gvk.Kind + " " + name
		if ns != "" {
			what = fmt.Sprintf("%s %s/%s", gvk.Kind, ns, name)
		}
		return nil, fmt.Errorf("cannot read the %s of %s: %w", what, gvk.GroupVersion(), err)
	}
	return u, nil
}

func readTenant(ctx context.Context, r client.Reader, ns, name string) (tenancy.ObservedTenant, error) {
	u, err := get(ctx, r, tenantGVK, ns, name)
	if err != nil || u == nil {
		return tenancy.ObservedTenant{}, err
	}
	return tenancy.ObservedTenant{Found: true, UID: string(u.GetUID()), Namespace: u.GetNamespace(), Name: u.GetName(),
		ResourceRefs: refsAt(u, "spec", "crossplane", "resourceRefs")}, nil
}

func readLegacyComposite(ctx context.Context, r client.Reader, name string) (tenancy.ObservedTenant, error) {
	u, err := get(ctx, r, legacyCompositeGVK, "", name)
	if err != nil || u == nil {
		return tenancy.ObservedTenant{}, err
	}
	ns, _, _ := unstructured.NestedString(u.Object, "spec", "claimRef", "namespace")
	claim, _, _ := unstructured.NestedString(u.Object, "spec", "claimRef", "name")
	return tenancy.ObservedTenant{Found: true, Legacy: true, UID: string(u.GetUID()), Namespace: ns, Name: claim,
		ResourceRefs: refsAt(u, "spec", "resourceRefs")}, nil
}

// readLegacyClaim reads the legacy claim ns/name and the composite it
// names; a cluster without the legacy kinds has no such claim.
func readLegacyClaim(ctx context.Context, r client.Reader, ns, name string) (tenancy.ObservedTenant, error) {
	u, err := get(ctx, r, legacyClaimGVK, ns, name)
	if errors.Is(err, errNotServed) {
		return tenancy.ObservedTenant{}, nil
	}
	if err != nil || u == nil {
		return tenancy.ObservedTenant{}, err
	}
	xr, _, _ := unstructured.NestedString(u.Object, "spec", "resourceRef", "name")
	if xr == "" {
		return tenancy.ObservedTenant{}, nil
	}
	t, err := readLegacyComposite(ctx, r, xr)
	if err != nil || !t.Found || t.Namespace != ns || t.Name != name {
		return tenancy.ObservedTenant{}, err
	}
	return t, nil
}

func refsAt(u *unstructured.Unstructured, path ...string) []tenancy.ResourceRef {
	l, _, _ := unstructured.NestedSlice(u.Object, path...)
	out := make([]tenancy.ResourceRef, 0, len(l))
	for _, x := range l {
		m, ok := x.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, tenancy.ResourceRef{APIVersion: str("apiVersion"), Kind: str("kind"), Name: str("name"), Namespace: str("namespace")})
	}
	return out
}

// Claimancy is whether claim is held: its claimants (the DatabaseBindings
// of its Tenant's UID in its namespace, listed with list, which may be a
// cache) are each read against their Tenant with r (tenancy.LiveBinding);
// released: the Database records the claim Released. A claim without a
// UID is held by nobody.
func Claimancy(ctx context.Context, list client.Reader, r client.Reader, claim *v1alpha1.ClaimReference, released bool) (tenancy.Claimancy, error) {
	if claim == nil || claim.UID == "" {
		return tenancy.ClaimNone, nil
	}
	l := &v1alpha1.DatabaseBindingList{}
	if err := list.List(ctx, l, client.InNamespace(claim.Namespace)); err != nil {
		return "", fmt.Errorf("cannot list the DatabaseBindings of the claim's namespace: %w", err)
	}
	var cs []tenancy.Claimant
	for _, b := range tenancy.Claimants(l.Items, claim) {
		v, err := Standing(ctx, r, b)
		if err != nil {
			return "", err
		}
		cs = append(cs, tenancy.Claimant{Standing: v.Standing, Deleting: b.GetDeletionTimestamp() != nil})
	}
	return tenancy.LiveBinding(cs, released), nil
}
