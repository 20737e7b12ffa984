package testenv

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateTenant creates the Tenant ns/name, as an app team would, listing
// the DatabaseBindings named bindings among its composed resources (as
// Crossplane does before it creates them), and returns its UID. Without
// Crossplane, nothing composes it.
func CreateTenant(ctx context.Context, c client.Client, ns, name string, bindings ...string) (string, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("database.ayatori.ddupan.top/v1alpha1")
	u.SetKind("Tenant")
	u.SetNamespace(ns)
	u.SetName(name)
	refs := make([]any, 0, len(bindings))
	for _, b := range bindings {
		refs = append(refs, map[string]any{"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "DatabaseBinding", "name": b})
	}
	u.Object["spec"] = map[string]any{"databaseRef": "any", "crossplane": map[string]any{"resourceRefs": refs}}
	if err := c.Create(ctx, u); err != nil {
		return "", err
	}
	return string(u.GetUID()), nil
}
