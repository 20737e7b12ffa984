package database

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// checkExtensions returns, one line each, why requested extensions cannot
// be created by the database owner: not available on the server, not
// trusted (they need a superuser, and the provider never creates an
// extension as the admin), outside a managed service's allow-list, or
// needing another extension that is neither requested nor installed; and
// what the server said of each.
func (e *external) checkExtensions(ctx context.Context, requested, installed []string) ([]string, map[string]postgres.Extension, error) {
	if len(requested) == 0 {
		return nil, nil, nil
	}
	if err := e.step(StepCheckExtensions); err != nil {
		return nil, nil, err
	}
	info, err := e.pool.Extensions(ctx, requested)
	if err != nil {
		return nil, nil, err
	}
	var missing, untrusted, denied, needs []string
	for _, x := range requested {
		i := info[x]
		switch {
		case !i.Available:
			missing = append(missing, x)
		case i.NotAllowed:
			denied = append(denied, x)
		case !i.OwnerMayCreate:
			untrusted = append(untrusted, x)
		}
		for _, r := range i.Requires {
			if !slices.Contains(requested, r) && !slices.Contains(installed, r) && r != "plpgsql" {
				needs = append(needs, fmt.Sprintf("%s needs %s", x, r))
			}
		}
	}
	var p []string
	if len(missing) > 0 {
		p = append(p, fmt.Sprintf("extensions %v are not available on this server (pg_available_extensions)", missing))
	}
	if len(denied) > 0 {
		p = append(p, fmt.Sprintf("extensions %v are not in the server's extension allow-list (rds.allowed_extensions or azure.extensions): the platform team must allow them first", denied))
	}
	if len(untrusted) > 0 {
		p = append(p, fmt.Sprintf("extensions %v are not trusted: only a superuser can create them and the database owner is none; the provider never creates extensions as the admin, so a platform admin must install them by hand or choose trusted ones", untrusted))
	}
	if len(needs) > 0 {
		p = append(p, fmt.Sprintf("requested extensions need others that are not requested (%s): add them to spec.forProvider.extensions", strings.Join(needs, ", ")))
	}
	return p, info, nil
}

// installExtensions logs in as the role and creates, as the owner, the
// requested extensions the database lacks, each after those it requires
// (info: what the server said of them, when it was asked).
func (e *external) installExtensions(ctx context.Context, db *v1alpha1.Database, n names, password string, info map[string]postgres.Extension) error {
	if err := e.step(StepExtensions); err != nil {
		return failFrom(db, StepExtensions, err)
	}
	c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: password})
	if err != nil {
		return failFrom(db, "login as the role", err)
	}
	defer c.Close(ctx) //nolint:errcheck // best effort
	have, err := c.Extensions(ctx)
	if err != nil {
		return failFrom(db, StepExtensions, err)
	}
	for _, x := range requirementsFirst(tenancy.Missing(db.Spec.ForProvider.Extensions, have), info) {
		if err := c.CreateExtension(ctx, x); err != nil {
			return failFrom(db, StepExtensions+" "+x, err)
		}
	}
	return nil
}

// requirementsFirst orders extensions so that each comes after the ones it
// requires (when known), otherwise keeping the given order.
func requirementsFirst(names []string, info map[string]postgres.Extension) []string {
	out := make([]string, 0, len(names))
	done := map[string]bool{}
	var visit func(n string, depth int)
	visit = func(n string, depth int) {
		if done[n] || depth > len(names) {
			return
		}
		for _, r := range info[n].Requires {
			if slices.Contains(names, r) {
				visit(r, depth+1)
			}
		}
		if !done[n] {
			done[n] = true
			out = append(out, n)
		}
	}
	for _, n := range names {
		visit(n, 0)
	}
	return out
}
