package configuration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// renderer runs the real functions (started by TestMain).
var renderer *testenv.Renderer

func startRenderer(e *testenv.Env) (func(), error) {
	r, err := testenv.StartRenderer(e.Dir)
	if err != nil {
		return nil, err
	}
	renderer = r
	return r.Stop, nil
}

// variant is one of the two ways to ask for a Tenant: the namespaced v2
// composite, or the legacy claim whose cluster-scoped XR has a generated name.
type variant struct {
	composition string
	xr          func(name, spec string) *unstructured.Unstructured
}

var variants = map[string]variant{
	"Tenant": {
		composition: "composition.yaml",
		xr: func(name, spec string) *unstructured.Unstructured {
			return obj(fmt.Sprintf("apiVersion: database.ayatori.ddupan.top/v1alpha1\nkind: Tenant\nmetadata: {name: %s, namespace: %s}\nspec:\n%s", name, ns, spec))
		},
	},
	"LegacyClaim": {
		composition: "legacy/composition.yaml",
		xr: func(name, spec string) *unstructured.Unstructured {
			return obj(fmt.Sprintf("apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1\nkind: XTenant\nmetadata: {name: %s-x7k2p}\nspec:\n%s  claimRef: {apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1, kind: Tenant, namespace: %s, name: %s}\n", name, spec, ns, name))
		},
	},
}

func obj(y string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		panic(fmt.Sprintf("%v\n%s", err, y))
	}
	return u
}

// Observed composed resources, as the provider and ESO would report them.

const path = "postgresql-tenants/app/netbox"

func observedDatabase(name, phase, ready string) *unstructured.Unstructured {
	return obj(fmt.Sprintf(`apiVersion: database.ayatori.ddupan.top/v1alpha1
kind: Database
metadata: {name: %[1]s, namespace: %[2]s, annotations: {crossplane.io/composition-resource-name: database}}
spec: {forProvider: {database: %[1]s, loginRole: %[1]s}}
status:
  conditions: [{type: Ready, status: %[4]q, reason: Whatever, lastTransitionTime: "2026-01-01T00:00:00Z"}]
  atProvider:
    phase: %[3]s
    credential: {path: %[5]s, openBaoURL: "https://bao.example:8200/v1/kv/data/%[5]s"}
`, name, ns, phase, ready, path))
}

// wipedDatabase is a Database whose status someone removed.
func wipedDatabase(name string) *unstructured.Unstructured {
	return obj(fmt.Sprintf("apiVersion: database.ayatori.ddupan.top/v1alpha1\nkind: Database\nmetadata: {name: %[1]s, namespace: %[2]s, annotations: {crossplane.io/composition-resource-name: database}}\nspec: {forProvider: {database: %[1]s, loginRole: %[1]s}}\n", name, ns))
}

// observedExternalSecret reports ESO's view: binding is the Secret ESO wrote
// ("" = none yet), cond the Ready condition ("" = ESO has not looked yet).
func observedExternalSecret(name, binding, status, reason string) *unstructured.Unstructured {
	u := obj(fmt.Sprintf("apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: %s, namespace: %s, annotations: {crossplane.io/composition-resource-name: externalsecret}}\n", name, ns))
	if binding != "" {
		_ = unstructured.SetNestedField(u.Object, binding, "status", "binding", "name")
	}
	if status != "" {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": status, "reason": reason}}, "status", "conditions")
	}
	return u
}

func observedUsage(name string) *unstructured.Unstructured {
	return obj(fmt.Sprintf("apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {name: %s-credential-before-database, namespace: %s, annotations: {crossplane.io/composition-resource-name: usage}}\nstatus: {conditions: [{type: Ready, status: \"True\", reason: Available}]}\n", name, ns))
}

// tenantView is what a user sees of a rendered Tenant, and which objects
// Crossplane would compose.
type tenantView struct {
	Phase, Ready, Database, LoginRole, Secret, OpenBaoURL string
	Composed                                              []string
}

func view(xr *unstructured.Unstructured, composed []*unstructured.Unstructured) tenantView {
	s := func(f ...string) string { v, _, _ := unstructured.NestedString(xr.Object, f...); return v }
	v := tenantView{
		Phase: s("status", "phase"), Database: s("status", "database"), LoginRole: s("status", "loginRole"),
		Secret: s("status", "credential", "secretRef", "name"), OpenBaoURL: s("status", "credential", "openBaoURL"),
	}
	conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			v.Ready = fmt.Sprint(m["status"])
		}
	}
	for _, c := range composed {
		v.Composed = append(v.Composed, c.GetKind()+" "+c.GetNamespace()+"/"+c.GetName())
	}
	return v
}

func find(composed []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, c := range composed {
		if c.GetKind() == kind {
			return c
		}
	}
	return nil
}

var (
	retain     = []any{"Observe", "Create", "Update", "LateInitialize"}
	withDelete = []any{"Observe", "Create", "Update", "LateInitialize", "Delete"}
	url        = "https://bao.example:8200/v1/kv/data/" + path
)

func TestRenderTenant(t *testing.T) {
	const es = "shared-netbox-postgresql"
	dbOnly := []string{"Database app/netbox"}
	all := []string{"Database app/netbox", "ExternalSecret app/" + es, "Usage app/netbox-credential-before-database"}
	cases := map[string]struct {
		name, spec string
		// status is the Tenant's recorded status.phase (none when empty).
		status   string
		observed []*unstructured.Unstructured
		want     tenantView
		// wantDatabase is the Database's spec; wantES the ExternalSecret's
		// spec (checked when the case composes one).
		wantDatabase map[string]any
		wantES       map[string]any
	}{
		"DefaultsBeforeAnything": {
			name: "netbox", spec: "  instanceRef: shared\n  extensions: [pg_trgm]\n  deletionPolicy: Retain\n",
			want: tenantView{Phase: "Pending", Ready: "False", Composed: dbOnly},
			wantDatabase: map[string]any{
				"providerConfigRef":  map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider":        map[string]any{"database": "netbox", "loginRole": "netbox", "extensions": []any{"pg_trgm"}},
				"managementPolicies": retain,
			},
		},
		"ExplicitNamesAndDelete": {
			name: "my-app", spec: "  instanceRef: shared\n  database: my_app\n  loginRole: my_owner\n  deletionPolicy: Delete\n",
			want: tenantView{Phase: "Pending", Ready: "False", Composed: []string{"Database app/my-app"}},
			wantDatabase: map[string]any{
				"providerConfigRef":  map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider":        map[string]any{"database": "my_app", "loginRole": "my_owner"},
				"managementPolicies": withDelete,
			},
		},
		"DatabaseProvisioning": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "RoleCreated", "False")},
			want:     tenantView{Phase: "RoleCreated", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: dbOnly},
		},
		// A Conflict never reaches Ready: nothing is projected for a
		// database the provider could not prove to be this Tenant's.
		"DatabaseConflictGetsNoSecret": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Pending", "False")},
			want:     tenantView{Phase: "Pending", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: dbOnly},
		},
		"DatabaseReadyComposesExternalSecret": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "True")},
			want:     tenantView{Phase: "DatabaseCreated", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: all},
			wantES: map[string]any{
				"refreshInterval": "1h",
				"secretStoreRef":  map[string]any{"kind": "ClusterSecretStore", "name": "openbao-tenants"},
				"target":          map[string]any{"name": es, "creationPolicy": "Owner", "deletionPolicy": "Retain"},
				"data":            sevenKeys(path),
			},
		},
		"ExplicitSecretName": {
			name: "netbox", spec: "  instanceRef: shared\n  credential: {secretName: netbox-db}\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "True")},
			want:     tenantView{Phase: "DatabaseCreated", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: all},
			wantES: map[string]any{
				"refreshInterval": "1h",
				"secretStoreRef":  map[string]any{"kind": "ClusterSecretStore", "name": "openbao-tenants"},
				"target":          map[string]any{"name": "netbox-db", "creationPolicy": "Owner", "deletionPolicy": "Retain"},
				"data":            sevenKeys(path),
			},
		},
		"ExternalSecretCreated": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "True"), observedExternalSecret(es, "", "", ""), observedUsage("netbox")},
			want:     tenantView{Phase: "ExternalSecretCreated", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: all},
		},
		"ExternalSecretFailing": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "True"), observedExternalSecret(es, "", "False", "SecretSyncedError"), observedUsage("netbox")},
			want:     tenantView{Phase: "ExternalSecretCreated", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: all},
		},
		"Ready": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "True"), observedExternalSecret(es, es, "True", "SecretSynced"), observedUsage("netbox")},
			want:     tenantView{Phase: "Ready", Ready: "True", Database: "netbox", LoginRole: "netbox", Secret: es, OpenBaoURL: url, Composed: all},
		},
		// The Secret was projected once, ESO now fails to refresh it.
		"ProjectedThenFailing": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "True"), observedExternalSecret(es, es, "False", "SecretSyncedError"), observedUsage("netbox")},
			want:     tenantView{Phase: "CredentialProjected", Ready: "False", Database: "netbox", LoginRole: "netbox", Secret: es, OpenBaoURL: url, Composed: all},
		},
		// The Database stops being Ready (say, drift being repaired): the
		// Tenant is not Ready, and the app's Secret stays where it is.
		"DatabaseNotReadyKeepsSecret": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "False"), observedExternalSecret(es, es, "True", "SecretSynced"), observedUsage("netbox")},
			want:     tenantView{Phase: "Ready", Ready: "False", Database: "netbox", LoginRole: "netbox", Secret: es, OpenBaoURL: url, Composed: all},
		},
		"DatabaseStatusWipedKeepsExternalSecret": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n",
			observed: []*unstructured.Unstructured{wipedDatabase("netbox"), observedExternalSecret(es, es, "True", "SecretSynced"), observedUsage("netbox")},
			want:     tenantView{Phase: "Ready", Ready: "False", Database: "netbox", LoginRole: "netbox", Secret: es, Composed: all},
		},
		// The Tenant got as far as DatabaseCreated before; now the render
		// sees the Database not Ready and the new resources not yet: they
		// are still composed, and nothing marks the Tenant unready for good.
		"GateStaysOpenOnceDatabaseCreated": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n", status: "DatabaseCreated",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "DatabaseCreated", "False")},
			want:     tenantView{Phase: "DatabaseCreated", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: all},
		},
		// Before that, a Database that is not Ready gets nothing composed.
		"GateClosedBeforeDatabaseCreated": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Retain\n", status: "RoleCreated",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "RoleCreated", "False")},
			want:     tenantView{Phase: "RoleCreated", Ready: "False", Database: "netbox", LoginRole: "netbox", OpenBaoURL: url, Composed: dbOnly},
		},
		"DeletionPolicyChangedToDelete": {
			name: "netbox", spec: "  instanceRef: shared\n  deletionPolicy: Delete\n",
			observed: []*unstructured.Unstructured{observedDatabase("netbox", "Ready", "True"), observedExternalSecret(es, es, "True", "SecretSynced"), observedUsage("netbox")},
			want:     tenantView{Phase: "Ready", Ready: "True", Database: "netbox", LoginRole: "netbox", Secret: es, OpenBaoURL: url, Composed: all},
			wantDatabase: map[string]any{
				"providerConfigRef":  map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider":        map[string]any{"database": "netbox", "loginRole": "netbox"},
				"managementPolicies": withDelete,
			},
		},
	}
	for vname, v := range variants {
		for name, tc := range cases {
			t.Run(vname+"/"+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				in := v.xr(tc.name, tc.spec)
				if tc.status != "" {
					_ = unstructured.SetNestedField(in.Object, tc.status, "status", "phase")
				}
				xr, composed, err := renderer.Render(ctx, in, filepath.Join(testenv.RepoRoot(), "package", "configuration", v.composition), tc.observed...)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, view(xr, composed)); diff != "" {
					t.Errorf("rendered Tenant: -want +got:\n%s", diff)
				}
				if tc.wantDatabase != nil {
					db := find(composed, "Database")
					if diff := cmp.Diff(tc.wantDatabase, db.Object["spec"]); diff != "" {
						t.Errorf("Database spec: -want +got:\n%s", diff)
					}
				}
				if tc.wantES != nil {
					if diff := cmp.Diff(tc.wantES, find(composed, "ExternalSecret").Object["spec"]); diff != "" {
						t.Errorf("ExternalSecret spec: -want +got:\n%s", diff)
					}
				}
				if u := find(composed, "Usage"); u != nil {
					want := map[string]any{
						"reason": "the ExternalSecret projects this Database's credential",
						"of":     map[string]any{"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "Database", "resourceRef": map[string]any{"name": tc.name}},
						"by":     map[string]any{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "resourceRef": map[string]any{"name": "shared-" + tc.name + "-postgresql"}},
					}
					if diff := cmp.Diff(want, u.Object["spec"]); diff != "" {
						t.Errorf("Usage spec: -want +got:\n%s", diff)
					}
				}
			})
		}
	}
}

func sevenKeys(key string) []any {
	var out []any
	for _, k := range []string{"username", "password", "database", "host", "hostaddr", "port", "sslmode"} {
		out = append(out, map[string]any{"secretKey": k, "remoteRef": map[string]any{"key": key, "property": k}})
	}
	return out
}

// An XTenant made without a claim has no namespace to compose into: it
// composes nothing and is not Ready.
func TestRenderLegacyWithoutClaim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	xr := obj("apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1\nkind: XTenant\nmetadata: {name: orphan}\nspec: {instanceRef: shared, deletionPolicy: Retain}\n")
	got, composed, err := renderer.Render(ctx, xr, filepath.Join(testenv.RepoRoot(), "package", "configuration", "legacy", "composition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tenantView{Phase: "Pending", Ready: "False"}, view(got, composed)); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}
