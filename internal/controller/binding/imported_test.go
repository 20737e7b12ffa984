package binding

import (
	"context"
	"maps"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestImportedRecordLackingTheEndpointIsDeliveredWhole: a Database that
// imports a record holding only a username and a password (what another
// tool, provider-sql's connection Secret for one, gives) is delivered with
// where to connect taken from what the provider knows: the Database's
// database name and its server config's host, port and sslmode. The
// imported record itself is not touched.
func TestImportedRecordLackingTheEndpointIsDeliveredWhole(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	ns := namespace(t)
	inst := instance(t, v1alpha1.ReclaimRetain)
	name := "db-" + suffix()
	imported := opts.OpenBao.DatabaseBasePath + "/imports/" + name
	db := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: inst}},
			ForProvider:                v1alpha1.DatabaseParameters{Database: strings.ReplaceAll(name, "-", "_"), CredentialPath: ptr.To(imported)},
			ReclaimPolicy:              v1alpha1.ReclaimRetain,
		},
	}
	if err := env.Kube.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	given := map[string]string{"username": "legacy_owner", "password": "legacy-pw"}
	ver, err := admin.Write(ctx, imported, given, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Ready with the record, as the Database controller makes an import
	// whose credential logs in.
	markReady(t, db, imported, ver)
	uid := tenant(t, ns, "legacy", "legacy-db")
	create(t, staticBinding(ns, "legacy", uid, inst, db.GetName()))
	got := awaitCopy(t, copyPath(ns, "legacy"), "the imported credential is delivered", func(r *openbao.Record) bool {
		return r != nil && r.Data["password"] == "legacy-pw"
	})
	want := map[string]string{
		"username": "legacy_owner", "password": "legacy-pw", "database": db.Spec.ForProvider.Database,
		"host": "db.example", "hostaddr": "", "port": "5432", "sslmode": "verify-full",
	}
	if !maps.Equal(got.Data, want) {
		keys := []string{}
		for k, v := range got.Data {
			if k != "password" {
				keys = append(keys, k+"="+v)
			}
		}
		t.Errorf("the delivery copy holds %s, want every connection key filled from the Database and its server", strings.Join(keys, " "))
	}
	if r := readKV(t, imported); r.Version != ver || len(r.Data) != len(given) {
		t.Errorf("the imported record was changed: version %d (want %d), %d keys (want %d)", r.Version, ver, len(r.Data), len(given))
	}
}
