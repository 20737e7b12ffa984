// Package configuration tests the Tenant XRD of the Configuration package on
// the real kube-apiserver: the XRD is converted to the CRD Crossplane would
// serve (crossplane xrd convert) and installed, so every rejection below is
// what `kubectl apply` of a Tenant answers.
package configuration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	if testenv.Short() {
		// No environment, whose stop would remove the directory.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ppt-xrd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	if err := testenv.ConvertXRDs(dir); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: test environment:", err)
		os.Exit(1)
	}
	// The converted XRDs' directory goes when the environment stops (the
	// hooks' stops run last to first, so this one last).
	removeDir := func(*testenv.Env) (func(), error) { return func() { _ = os.RemoveAll(dir) }, nil }
	testenv.Main(m, testenv.Options{Kube: true, ExtraCRDDirs: []string{dir}}, &env, removeDir, startRenderer)
}

const ns = "app"

// groups are the two Tenant kinds an app team can write: the namespaced v2
// composite and the legacy claim. Both must admit and reject the same input.
var groups = []string{"database.ayatori.ddupan.top", "legacy.database.ayatori.ddupan.top"}

func tenant(group, name, spec string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf("apiVersion: %s/v1alpha1\nkind: Tenant\nmetadata: {name: %q, namespace: %s}\nspec:\n%s", group, name, ns, spec)), &u.Object); err != nil {
		panic(err)
	}
	return u
}

func setup(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := env.Kube.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func TestTenantAdmits(t *testing.T) {
	testenv.Need(t)
	for _, g := range groups {
		t.Run(g, func(t *testing.T) { testTenantAdmits(t, g) })
	}
}

func testTenantAdmits(t *testing.T, g string) {
	cases := map[string]struct{ name, spec string }{
		"Dynamic": {name: "netbox", spec: "  instanceRef: shared\n  extensions: [pg_trgm]\n"},
		// '-' and '.' become '_': my-app.v2 makes the database my_app_v2.
		"NameMadeIdentifier": {name: "my-app.v2", spec: "  instanceRef: shared\n"},
		// A name that makes no identifier is fine with spec.database.
		"ExplicitDatabase": {name: "9lives", spec: "  instanceRef: shared\n  database: lives\n"},
		"ExplicitNames":    {name: "pg-stat", spec: "  instanceRef: shared\n  database: stats\n  loginRole: stats_owner\n"},
		"Static":           {name: "wiki", spec: "  databaseRef: legacy-wiki\n  extensions: [citext]\n"},
		"StaticAnyName":    {name: "postgres", spec: "  databaseRef: legacy-wiki\n"},
		"StaticSecretName": {name: "wiki2", spec: "  databaseRef: legacy-wiki\n  credential: {secretName: wiki-db}\n"},
		// Neither ref: a new database on the namespace's default server.
		"DefaultServer":          {name: "billing", spec: "  {}\n"},
		"DefaultServerWithNames": {name: "9lives2", spec: "  database: lives2\n  extensions: [pg_trgm]\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := setup(t)
			if err := env.Kube.Client.Create(ctx, tenant(g, tc.name, tc.spec)); err != nil {
				t.Errorf("rejected: %v", err)
			}
		})
	}
}

// An app team does not choose what deleting its Tenant drops: the field that
// let it is gone, so kubectl's strict field validation refuses it and a
// lenient client sees it pruned.
func TestTenantHasNoDeletionPolicy(t *testing.T) {
	testenv.Need(t)
	for _, g := range groups {
		t.Run(g, func(t *testing.T) {
			ctx := setup(t)
			const spec = "  instanceRef: shared\n  deletionPolicy: Delete\n"
			err := env.Kube.Client.Create(ctx, tenant(g, "reclaim1", spec), client.FieldValidation("Strict"))
			if err == nil || !strings.Contains(err.Error(), `unknown field "spec.deletionPolicy"`) {
				t.Errorf("strict create: %v, want unknown field spec.deletionPolicy", err)
			}
			u := tenant(g, "reclaim2", spec)
			if err := env.Kube.Client.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
			if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "deletionPolicy"); found {
				t.Errorf("spec.deletionPolicy stored as %v, want it pruned", v)
			}
		})
	}
}

func TestTenantRejectsBadInput(t *testing.T) {
	testenv.Need(t)
	for _, g := range groups {
		t.Run(g, func(t *testing.T) { testTenantRejectsBadInput(t, g) })
	}
}

func testTenantRejectsBadInput(t *testing.T, g string) {
	// A Tenant's name has at most 63 characters; an instanceRef of 190 pushes
	// the default Secret name past 253.
	long, longRef := strings.Repeat("a", 60), strings.Repeat("s", 190)
	cases := map[string]struct {
		name, spec, field, msg string
	}{
		"BothInstanceAndDatabase": {name: "a1", spec: "  instanceRef: shared\n  databaseRef: legacy-a1\n", field: "spec.instanceRef", msg: "set at most one of spec.instanceRef"},
		// A Tenant on the namespace's default server names its database as
		// one on a named server does.
		"DefaultServerNameIsReserved": {name: "postgres", spec: "  {}\n", field: "spec.database", msg: "PostgreSQL's own database and role names): set spec.database"},
		"StaticWithDatabase":          {name: "b1", spec: "  databaseRef: legacy-b1\n  database: b1\n", field: "spec.databaseRef", msg: "leave spec.database and spec.loginRole unset"},
		"StaticWithLoginRole":         {name: "b2", spec: "  databaseRef: legacy-b2\n  loginRole: b2\n", field: "spec.databaseRef", msg: "leave spec.database and spec.loginRole unset"},
		"BadDatabaseRef":              {name: "b3", spec: "  databaseRef: Legacy_B3\n", field: "spec.databaseRef", msg: "should match"},
		// A dynamic Tenant without spec.database needs a name that makes
		// an identifier, and not one of PostgreSQL's own.
		"NameNotAnIdentifier": {name: "9lives", spec: "  instanceRef: shared\n  loginRole: lives\n", field: "spec.database", msg: "does not make a PostgreSQL identifier"},
		"NameMakesReserved":   {name: "pg-stat", spec: "  instanceRef: shared\n", field: "spec.database", msg: "PostgreSQL's own database and role names): set spec.database"},
		"NameIsReserved":      {name: "postgres", spec: "  instanceRef: shared\n", field: "spec.database", msg: "PostgreSQL's own database and role names): set spec.database"},
		// Crossplane limits a Tenant's name to 63 characters (a label value).
		"NameTooLong":           {name: strings.Repeat("n", 64), spec: "  instanceRef: shared\n  database: nn\n", field: "metadata.name", msg: "Too long"},
		"DatabaseNotIdentifier": {name: "a2", spec: "  instanceRef: shared\n  database: Bad-Name\n", field: "spec.database", msg: "should match"},
		"SystemDatabase":        {name: "a3", spec: "  instanceRef: shared\n  database: postgres\n", field: "spec.database", msg: "PostgreSQL's own database and role names"},
		"ReservedAsARole":       {name: "a9", spec: "  instanceRef: shared\n  database: pg_catalog\n", field: "spec.database", msg: "must not start with pg_"},
		"ReservedLoginRole":     {name: "a4", spec: "  instanceRef: shared\n  loginRole: pg_read_all_data\n", field: "spec.loginRole", msg: "start with pg_"},
		"BadExtension":          {name: "a5", spec: "  instanceRef: shared\n  extensions: [uuid-ossp]\n", field: "spec.extensions[0]", msg: "should match"},
		"SecretNameTooLong":     {name: long + "b", spec: fmt.Sprintf("  instanceRef: %s\n", longRef), field: "spec.credential.secretName", msg: "241"},
		"StaticWithOptions":     {name: "b4", spec: "  databaseRef: legacy-b4\n  databaseOptions: {locale: C}\n", field: "spec.databaseOptions", msg: "takes that Database's encoding and locale"},
		"BadLocaleProvider":     {name: "a6", spec: "  instanceRef: shared\n  databaseOptions: {localeProvider: glibc}\n", field: "spec.databaseOptions.localeProvider", msg: "Unsupported value"},
		"QuoteInLocale":         {name: "a7", spec: "  instanceRef: shared\n  databaseOptions: {locale: \"C'x\"}\n", field: "spec.databaseOptions.locale", msg: "should match"},
		"BadSecretName":         {name: "a8", spec: "  instanceRef: shared\n  credential: {secretName: Not_A_Name}\n", field: "spec.credential.secretName", msg: "should match"},
		"DataRoleBadName":       {name: "c1", spec: "  instanceRef: shared\n  dataRoles: [{name: App, access: readWrite}]\n", field: "spec.dataRoles[0].name", msg: "should match"},
		"DataRoleBadAccess":     {name: "c2", spec: "  instanceRef: shared\n  dataRoles: [{name: app, access: admin}]\n", field: "spec.dataRoles[0].access", msg: "Unsupported value"},
		"DataRoleTwice":         {name: "c3", spec: "  instanceRef: shared\n  dataRoles: [{name: app, access: readWrite}, {name: app, access: readOnly}]\n", field: "spec.dataRoles[1]", msg: "Duplicate value"},
		// The login role defaults to the database name, which defaults to
		// the Tenant's name: 61 + 1 + 3 characters.
		"DataRoleLoginTooLong": {name: long + "c", spec: "  instanceRef: shared\n  dataRoles: [{name: app, access: readWrite}]\n", field: "spec.dataRoles", msg: "63 characters"},
		"DataRoleSecretTooLong": {name: long + "f", spec: fmt.Sprintf("  instanceRef: %s\n  database: x\n  dataRoles: [{name: reporting12, access: readOnly}]\n", strings.Repeat("s", 170)),
			field: "spec.dataRoles", msg: "set the role's secretName"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := setup(t)
			err := env.Kube.Client.Create(ctx, tenant(g, tc.name, tc.spec))
			if err == nil {
				t.Fatalf("accepted, want a rejection naming %s", tc.field)
			}
			if !strings.Contains(err.Error(), tc.field+":") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("rejection does not name %s with %q: %v", tc.field, tc.msg, err)
			}
		})
	}
	// With an explicit Secret name, a long Tenant name is fine; a static
	// Tenant's default Secret name has no instance in it.
	ctx := setup(t)
	ok := tenant(g, long+"d", fmt.Sprintf("  instanceRef: %s\n  credential: {secretName: short}\n", longRef))
	if err := env.Kube.Client.Create(ctx, ok); err != nil {
		t.Errorf("long names with an explicit secretName rejected: %v", err)
	}
	if err := env.Kube.Client.Create(ctx, tenant(g, long+"e", "  databaseRef: legacy\n")); err != nil {
		t.Errorf("a static Tenant with a long name rejected: %v", err)
	}
	// A static Tenant's login role is its Database's: not checked here.
	if err := env.Kube.Client.Create(ctx, tenant(g, long+"g", "  databaseRef: legacy\n  dataRoles: [{name: app, access: readWrite, secretName: app-db}]\n")); err != nil {
		t.Errorf("a static Tenant with a data role rejected: %v", err)
	}
}

func TestTenantImmutableFields(t *testing.T) {
	testenv.Need(t)
	for _, g := range groups {
		t.Run(g, func(t *testing.T) { testTenantImmutableFields(t, g) })
	}
}

func testTenantImmutableFields(t *testing.T, g string) {
	cases := map[string]struct {
		spec, field, msg string
		change           func(*unstructured.Unstructured)
	}{
		"Instance": {spec: "  instanceRef: shared\n", field: "spec.instanceRef", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "other", "spec", "instanceRef")
			}},
		"DatabaseRef": {spec: "  databaseRef: first\n", field: "spec.databaseRef", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "second", "spec", "databaseRef")
			}},
		// A dynamic Tenant does not become a static one (nor back).
		"DynamicToStatic": {spec: "  instanceRef: shared\n", field: "spec.databaseRef", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", "instanceRef")
				_ = unstructured.SetNestedField(u.Object, "legacy", "spec", "databaseRef")
			}},
		// A Tenant on the default server stays there: naming a server
		// later would move it.
		"DefaultToNamed": {spec: "  {}\n", field: "spec.instanceRef", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "shared", "spec", "instanceRef")
			}},
		"DefaultToStatic": {spec: "  {}\n", field: "spec.databaseRef", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "legacy", "spec", "databaseRef")
			}},
		"StaticToDynamic": {spec: "  databaseRef: legacy\n", field: "spec.instanceRef", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", "databaseRef")
				_ = unstructured.SetNestedField(u.Object, "shared", "spec", "instanceRef")
			}},
		"Database": {spec: "  instanceRef: shared\n  database: first\n", field: "spec.database", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "second", "spec", "database")
			}},
		"LoginRole": {spec: "  instanceRef: shared\n  loginRole: first\n", field: "spec.loginRole", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "second", "spec", "loginRole")
			}},
		"DatabaseOptions": {spec: "  instanceRef: shared\n  databaseOptions: {locale: C}\n", field: "spec.databaseOptions", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "C.UTF-8", "spec", "databaseOptions", "locale")
			}},
		"DatabaseOptionsAdded": {spec: "  instanceRef: shared\n", field: "spec.databaseOptions", msg: "immutable",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "C", "spec", "databaseOptions", "locale")
			}},
		"DataRoleAccess": {spec: "  instanceRef: shared\n  dataRoles: [{name: app, access: readWrite}]\n", field: "spec.dataRoles[0].access", msg: "access is fixed",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "app", "access": "readOnly"}}, "spec", "dataRoles")
			}},
		"ExtensionRemoved": {spec: "  instanceRef: shared\n  extensions: [pg_trgm, citext]\n", field: "spec.extensions", msg: "append-only",
			change: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedStringSlice(u.Object, []string{"citext"}, "spec", "extensions")
			}},
	}
	i := 0
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := setup(t)
			i++
			u := tenant(g, fmt.Sprintf("imm%d", i), tc.spec)
			if err := env.Kube.Client.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
			tc.change(u)
			// unguarded-update: only the kube-apiserver runs here (the XRDs served as CRDs, no Crossplane): nothing else writes the Tenant the test made; the test checks what the API server admits
			err := env.Kube.Client.Update(ctx, u)
			if err == nil || !strings.Contains(err.Error(), tc.field+":") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("update: %v, want a rejection naming %s", err, tc.field)
			}
		})
	}
}

// The XR Crossplane makes from a legacy claim has a generated name that is no
// identifier; the name rules are the claim's, so it is admitted.
func TestLegacyXRWithGeneratedName(t *testing.T) {
	testenv.Need(t)
	ctx := setup(t)
	xr := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1
kind: XTenant
metadata: {name: my-app-x7k2p}
spec:
  instanceRef: shared
  claimRef: {apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1, kind: Tenant, namespace: app, name: netbox}
`), &xr.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Create(ctx, xr); err != nil {
		t.Errorf("the XR of a claim was rejected: %v", err)
	}
}

// The claim's schema is the Tenant's: a change to one XRD that is not made to
// the other fails here.
func TestLegacySchemaMatchesTenant(t *testing.T) {
	load := func(file string) map[string]any {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "package", "configuration", file))
		if err != nil {
			t.Fatal(err)
		}
		xrd := map[string]any{}
		if err := yaml.Unmarshal(b, &xrd); err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(xrd, "spec", "versions")
		if len(versions) != 1 {
			t.Fatalf("%s: %d versions, want 1", file, len(versions))
		}
		v := versions[0].(map[string]any)
		props, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema", "properties")
		return map[string]any{"properties": props, "printerColumns": v["additionalPrinterColumns"], "name": v["name"]}
	}
	if diff := cmp.Diff(load("xrd.yaml"), load(filepath.Join("legacy", "xrd.yaml"))); diff != "" {
		t.Errorf("Tenant vs legacy claim schema: -tenant +legacy:\n%s", diff)
	}
}

// The example Tenants an app team copies are admitted as they stand.
func TestExampleTenantsAdmitted(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range []string{filepath.Join("tenant", "tenant.yaml"), filepath.Join("database", "tenant.yaml")} {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := env.Kube.EnsureNamespace(ctx, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
		if err := env.Kube.Client.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
			t.Errorf("%s rejected: %v", f, err)
		}
	}
}
