package database

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// names are the effective names of a Database.
type names struct {
	database, role, path string
	// roles is where the data roles' records live (<roles>/roles/<name>)
	// and whose metadata lists them: the Database's own record, or, for
	// an import (whose record is the admin's), a metadata-only entry at
	// the path a provisioning Database's record would have.
	roles     string
	importing bool
}

// policies resolves db's management policies as the managed reconciler
// does. The feature is on: Setup refuses to start without it.
func policies(db *v1alpha1.Database) managed.ManagementPoliciesChecker {
	return managed.NewManagementPoliciesResolver(true, db.GetManagementPolicies())
}

// resolve returns the effective names, or an error with a Ready condition
// (InvalidSpec) already set.
func (e *external) resolve(db *v1alpha1.Database) (names, error) {
	n := names{importing: !policies(db).ShouldCreate(), database: db.Spec.ForProvider.Database}
	n.role = n.database
	if r := db.Spec.ForProvider.LoginRole; r != nil {
		n.role = *r
	}
	for field, v := range map[string]string{"database": n.database, "loginRole": n.role} {
		if err := tenancy.ValidateName("spec.forProvider."+field, v); err != nil {
			return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
		}
	}
	if err := tenancy.ValidateLimits("spec.forProvider.limits", db.Spec.ForProvider.Limits); err != nil {
		return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
	}
	if err := tenancy.ValidateLimits("the ClusterProviderConfig's spec.tenantLimits", e.cfgLimits); err != nil {
		return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
	}
	for _, x := range db.Spec.ForProvider.Extensions {
		if err := tenancy.ValidateIdentifier("extension", x); err != nil {
			return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
		}
	}
	derived := tenancy.CredentialPath(e.opts.OpenBao.DatabaseBasePath, db.GetName())
	cp := db.Spec.ForProvider.CredentialPath
	switch {
	case n.importing && cp == nil:
		return n, fail(db, tenancy.ReasonInvalidSpec, "an import (managementPolicies without Create) must name the existing credential record in spec.forProvider.credentialPath")
	case n.importing:
		n.path = *cp
	case cp != nil && *cp != derived:
		return n, fail(db, tenancy.ReasonInvalidSpec, fmt.Sprintf("spec.forProvider.credentialPath may not be chosen by a provisioning Database: it is derived as %q", derived))
	default:
		n.path = derived
	}
	if err := tenancy.ValidatePath("spec.forProvider.credentialPath", n.path); err != nil {
		return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
	}
	n.roles = derived
	if n.importing && len(db.Spec.ForProvider.DataRoles) > 0 && !policies(db).ShouldUpdate() {
		return n, fail(db, tenancy.ReasonInvalidSpec, "spec.forProvider.dataRoles: a read-only import never changes the database's grants, and data roles are granted the owner's data; add Update to spec.managementPolicies to have them made, or remove spec.forProvider.dataRoles; nothing was created or changed")
	}
	if n.importing {
		if err := tenancy.ValidateImportPath("spec.forProvider.credentialPath", n.path, e.opts.OpenBao.TenantBasePath); err != nil {
			return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
		}
	}
	return n, nil
}

// wantData is the record a Database keeps (password aside): its names and
// the endpoint its admin pool connects to.
func (e *external) wantData(n names) map[string]string {
	m := map[string]string{"username": n.role, "database": n.database}
	for k, v := range e.id.Endpoint {
		m[k] = v
	}
	return m
}
