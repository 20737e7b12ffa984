package database

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// ClaimancyWith is the connector's claimancy with the given readers: kube
// lists DatabaseBindings, reader is the API server, cached the Tenant
// cache (test access).
func ClaimancyWith(ctx context.Context, kube client.Client, reader, cached client.Reader, db *v1alpha1.Database) (tenancy.Claimancy, error) {
	c := &connector{kube: kube, reader: reader, tenants: cached}
	return c.claimancy(ctx, db)
}
