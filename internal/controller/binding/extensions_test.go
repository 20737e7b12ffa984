package binding

import (
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestStaticBindingReportsMissingExtensions: a Tenant that binds an
// existing Database and asks for an extension the Database does not have
// gets its credential, and its binding says which extension the platform
// team must install (ExtensionsMissing); once the Database shows it
// installed, the binding is Available.
func TestStaticBindingReportsMissingExtensions(t *testing.T) {
	testenv.Need(t)
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	db := database(t, inst, nil, v1alpha1.ReclaimRetain, "ext-pw")
	testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) { db.Status.AtProvider.Extensions = []string{"plpgsql"} })
	uid := tenant(t, ns, "exts", "exts-db")
	b := staticBinding(ns, "exts", uid, inst, db.GetName())
	b.Spec.ForProvider.Extensions = []string{"citext"}
	create(t, b)
	awaitBinding(t, b, "ExtensionsMissing naming citext, the credential delivered", func(b *v1alpha1.DatabaseBinding) bool {
		c := b.GetCondition(xpv2.TypeReady)
		return string(c.Reason) == tenancy.ReasonExtensionsMissing && strings.Contains(c.Message, "citext") && b.Status.AtProvider.Credential.Version > 0
	})
	if r := readKV(t, copyPath(ns, "exts")); r == nil || r.Data["password"] != "ext-pw" {
		t.Error("the credential was not delivered while an extension is missing")
	}
	testenv.EditStatus(t, env.Kube.Client, db, func(db *v1alpha1.Database) {
		db.Status.AtProvider.Extensions = []string{"citext", "plpgsql"}
	})
	awaitBinding(t, b, "Available once citext is installed", available)
}
