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
// Both have the UID uid (for the claim, its XR's), which the binding carries
// as its tenant's.
type variant struct {
	composition string
	xr          func(name, spec string) *unstructured.Unstructured
}

var variants = map[string]variant{
	"Tenant": {
		composition: "composition.yaml",
		xr: func(name, spec string) *unstructured.Unstructured {
			return obj(fmt.Sprintf("apiVersion: database.ayatori.ddupan.top/v1alpha1\nkind: Tenant\nmetadata: {name: %s, namespace: %s, uid: %s}\nspec:\n%s", name, ns, uid, spec))
		},
	},
	"LegacyClaim": {
		composition: "legacy/composition.yaml",
		xr: func(name, spec string) *unstructured.Unstructured {
			return obj(fmt.Sprintf("apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1\nkind: XTenant\nmetadata: {name: %s-x7k2p, uid: %s}\nspec:\n%s  claimRef: {apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1, kind: Tenant, namespace: %s, name: %s}\n", name, uid, spec, ns, name))
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

const (
	uid = "6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2"
	// path is the delivery copy the binding reports: <tenant base>/<ns>/<name>.
	path = "postgresql-tenants/app/netbox"
	url  = "https://bao.example:8200/v1/kv/data/" + path
	// dynamicDB is the Database a dynamic binding provisions.
	dynamicDB = "tenant-" + uid
)

// cond is one status condition of an observed resource.
type cond struct{ typ, status, reason, message string }

var (
	synced = cond{"Synced", "True", "ReconcileSuccess", ""}
	ready  = cond{"Ready", "True", "Available", ""}
)

func conditions(cs []cond) []any {
	var out []any
	for _, c := range cs {
		m := map[string]any{"type": c.typ, "status": c.status, "reason": c.reason, "lastTransitionTime": "2026-01-01T00:00:00Z"}
		if c.message != "" {
			m["message"] = c.message
		}
		out = append(out, m)
	}
	return out
}

// binding is what the provider reports on a DatabaseBinding.
type binding struct {
	// static: the binding names an existing Database (databaseRef).
	static bool
	phase  string
	// bound: the binding recorded its Database and the delivery copy.
	bound bool
	conds []cond
}

func observedBinding(name string, b binding) *unstructured.Unstructured {
	fp := map[string]any{"tenant": map[string]any{"name": name, "uid": uid}}
	at := map[string]any{"phase": b.phase}
	dbName, pgName := dynamicDB, name
	if b.static {
		fp["databaseRef"] = "legacy-" + name
		dbName, pgName = "legacy-"+name, "legacy_"+name
	} else {
		fp["database"], fp["loginRole"] = name, name
	}
	if b.bound {
		at["databaseName"], at["databaseUID"], at["instance"] = dbName, "9a8b7c6d-0000-4000-8000-000000000001", "shared"
		at["database"], at["loginRole"] = pgName, pgName
		at["credential"] = map[string]any{"path": path, "openBaoURL": url}
	}
	u := obj(fmt.Sprintf("apiVersion: database.ayatori.ddupan.top/v1alpha1\nkind: DatabaseBinding\nmetadata: {name: %s, namespace: %s, annotations: {crossplane.io/composition-resource-name: binding}}\n", name, ns))
	u.Object["spec"] = map[string]any{"forProvider": fp}
	u.Object["status"] = map[string]any{"atProvider": at, "conditions": conditions(b.conds)}
	return u
}

// wipedBinding is a DatabaseBinding whose status someone removed.
func wipedBinding(name string) *unstructured.Unstructured {
	return obj(fmt.Sprintf("apiVersion: database.ayatori.ddupan.top/v1alpha1\nkind: DatabaseBinding\nmetadata: {name: %[1]s, namespace: %[2]s, annotations: {crossplane.io/composition-resource-name: binding}}\nspec: {forProvider: {tenant: {name: %[1]s, uid: %[3]s}, database: %[1]s, loginRole: %[1]s}}\n", name, ns, uid))
}

// observedExternalSecret reports ESO's view: secret is the Secret ESO wrote
// ("" = none yet), c its Ready condition (none when c.status is "").
func observedExternalSecret(name, secret string, c cond) *unstructured.Unstructured {
	u := obj(fmt.Sprintf("apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: %s, namespace: %s, annotations: {crossplane.io/composition-resource-name: externalsecret}}\n", name, ns))
	if secret != "" {
		_ = unstructured.SetNestedField(u.Object, secret, "status", "binding", "name")
	}
	if c.status != "" {
		_ = unstructured.SetNestedSlice(u.Object, conditions([]cond{c}), "status", "conditions")
	}
	return u
}

// observedUsage is the Usage Tenants composed before the binding waited
// for its ExternalSecret itself: an upgraded Tenant still has one, and
// the function no longer composes it (so Crossplane deletes it).
func observedUsage(name string) *unstructured.Unstructured {
	return obj(fmt.Sprintf("apiVersion: protection.crossplane.io/v1beta1\nkind: Usage\nmetadata: {name: %s-credential-before-binding, namespace: %s, annotations: {crossplane.io/composition-resource-name: usage}}\nstatus: {conditions: [{type: Ready, status: \"True\", reason: Available}]}\n", name, ns))
}

// tenantView is what a user sees of a rendered Tenant, and which objects
// Crossplane would compose.
type tenantView struct {
	Phase, Ready, Reason, Message               string
	Instance, DatabaseName, Database, LoginRole string
	Secret, OpenBaoURL                          string
	Composed                                    []string
}

func view(xr *unstructured.Unstructured, composed []*unstructured.Unstructured) tenantView {
	s := func(f ...string) string { v, _, _ := unstructured.NestedString(xr.Object, f...); return v }
	v := tenantView{
		Phase: s("status", "phase"), Reason: s("status", "reason"), Message: s("status", "message"),
		Instance: s("status", "instance"), DatabaseName: s("status", "databaseName"),
		Database: s("status", "database"), LoginRole: s("status", "loginRole"),
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

// tenantRef is the binding's spec.forProvider.tenant for a Tenant name.
func tenantRef(name string) map[string]any { return map[string]any{"name": name, "uid": uid} }

func TestRenderTenant(t *testing.T) {
	testenv.Need(t)
	const (
		dynamic = "  instanceRef: shared\n"
		static  = "  databaseRef: legacy-netbox\n"
		es      = "shared-netbox-postgresql"
		// staticES is a static Tenant's default: no instance in its name.
		staticES = "netbox-postgresql"
	)
	bindingOnly := []string{"DatabaseBinding app/netbox"}
	all := func(es string) []string {
		return []string{"DatabaseBinding app/netbox", "ExternalSecret app/" + es}
	}
	readyBinding := binding{phase: "Ready", bound: true, conds: []cond{ready, synced}}
	// Bound dynamic status, as every case after the binding is Ready shows it.
	bound := func(v tenantView) tenantView {
		v.Instance, v.DatabaseName, v.Database, v.LoginRole, v.OpenBaoURL = "shared", dynamicDB, "netbox", "netbox", url
		return v
	}
	esSpec := func(target string) map[string]any {
		return map[string]any{
			"refreshInterval": "1h",
			"secretStoreRef":  map[string]any{"kind": "ClusterSecretStore", "name": "openbao-tenants"},
			"target": map[string]any{"name": target, "creationPolicy": "Owner", "deletionPolicy": "Retain",
				"template": map[string]any{"engineVersion": "v2", "mergePolicy": "Replace", "data": sevenKeys()}},
			"dataFrom": []any{map[string]any{"extract": map[string]any{"key": path}}},
		}
	}
	cases := map[string]struct {
		name, spec string
		// status is the Tenant's recorded status.phase (none when empty).
		status   string
		observed []*unstructured.Unstructured
		want     tenantView
		// wantBinding is the binding's spec; wantES the ExternalSecret's
		// spec (checked when the case composes one).
		wantBinding map[string]any
		wantES      map[string]any
	}{
		"DynamicBeforeAnything": {
			name: "netbox", spec: dynamic + "  extensions: [pg_trgm]\n",
			want: tenantView{Phase: "Pending", Ready: "False", Instance: "shared", Database: "netbox", LoginRole: "netbox", Composed: bindingOnly},
			wantBinding: map[string]any{
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider":       map[string]any{"tenant": tenantRef("netbox"), "database": "netbox", "loginRole": "netbox", "extensions": []any{"pg_trgm"}},
			},
		},
		// The encoding and locale a Tenant asks reach the binding as they
		// are; the Database checks them against the config's allow-list.
		"DynamicDatabaseOptions": {
			name: "netbox", spec: dynamic + "  databaseOptions: {localeProvider: icu, icuLocale: de-DE, encoding: UTF8}\n",
			want: tenantView{Phase: "Pending", Ready: "False", Instance: "shared", Database: "netbox", LoginRole: "netbox", Composed: bindingOnly},
			wantBinding: map[string]any{
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider": map[string]any{"tenant": tenantRef("netbox"), "database": "netbox", "loginRole": "netbox",
					"options": map[string]any{"localeProvider": "icu", "icuLocale": "de-DE", "encoding": "UTF8"}},
			},
		},
		// A name that is no identifier as it stands makes one: '-' and
		// '.' become '_'.
		"DynamicNameMadeIdentifier": {
			name: "my-app.v2", spec: dynamic,
			want: tenantView{Phase: "Pending", Ready: "False", Instance: "shared", Database: "my_app_v2", LoginRole: "my_app_v2", Composed: []string{"DatabaseBinding app/my-app.v2"}},
			wantBinding: map[string]any{
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider":       map[string]any{"tenant": tenantRef("my-app.v2"), "database": "my_app_v2", "loginRole": "my_app_v2"},
			},
		},
		// The login role defaults to the database name, as on a Database.
		"DynamicExplicitDatabase": {
			name: "my-app", spec: dynamic + "  database: wiki\n",
			want: tenantView{Phase: "Pending", Ready: "False", Instance: "shared", Database: "wiki", LoginRole: "wiki", Composed: []string{"DatabaseBinding app/my-app"}},
			wantBinding: map[string]any{
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider":       map[string]any{"tenant": tenantRef("my-app"), "database": "wiki", "loginRole": "wiki"},
			},
		},
		"DynamicExplicitNames": {
			name: "my-app", spec: dynamic + "  database: my_app\n  loginRole: my_owner\n",
			want: tenantView{Phase: "Pending", Ready: "False", Instance: "shared", Database: "my_app", LoginRole: "my_owner", Composed: []string{"DatabaseBinding app/my-app"}},
			wantBinding: map[string]any{
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "shared"},
				"forProvider":       map[string]any{"tenant": tenantRef("my-app"), "database": "my_app", "loginRole": "my_owner"},
			},
		},
		// A static Tenant's binding names the Database and nothing else: no
		// instance, no names (the Database has them).
		"StaticBeforeAnything": {
			name: "netbox", spec: static + "  extensions: [citext]\n",
			want:        tenantView{Phase: "Pending", Ready: "False", Composed: bindingOnly},
			wantBinding: map[string]any{"forProvider": map[string]any{"tenant": tenantRef("netbox"), "databaseRef": "legacy-netbox", "extensions": []any{"citext"}}},
		},
		"BindingProvisioning": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Provisioning", bound: true, conds: []cond{{"Ready", "False", "Creating", ""}, synced}})},
			want:     bound(tenantView{Phase: "Provisioning", Ready: "False", Composed: bindingOnly}),
		},
		// The binding's refusal is on the Tenant, whichever place its Ready
		// condition has; and nothing is projected.
		"StaticAlreadyBound": {
			name: "netbox", spec: static,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{static: true, phase: "Pending", conds: []cond{synced, {"Ready", "False", "AlreadyBound", "Database legacy-netbox is bound to other/netbox"}}})},
			want:     tenantView{Phase: "Pending", Ready: "False", Reason: "AlreadyBound", Message: "Database legacy-netbox is bound to other/netbox", Composed: bindingOnly},
		},
		"StaticReleasedFirstCondition": {
			name: "netbox", spec: static,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{static: true, phase: "Pending", conds: []cond{{"Ready", "False", "Released", "Database legacy-netbox was released by an earlier Tenant"}, synced}})},
			want:     tenantView{Phase: "Pending", Ready: "False", Reason: "Released", Message: "Database legacy-netbox was released by an earlier Tenant", Composed: bindingOnly},
		},
		"DynamicInstanceNotReady": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Binding", conds: []cond{synced, {"Ready", "False", "InstanceNotReady", "instance shared is not Ready"}}})},
			want:     tenantView{Phase: "Binding", Ready: "False", Reason: "InstanceNotReady", Message: "instance shared is not Ready", Instance: "shared", Database: "netbox", LoginRole: "netbox", Composed: bindingOnly},
		},
		// Synced=False alone is no reason on the Tenant: only Ready=False is.
		"SyncedFalseIsNotAReason": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Ready", bound: true, conds: []cond{{"Synced", "False", "ReconcileError", "boom"}, ready}})},
			want:     bound(tenantView{Phase: "ExternalSecretCreated", Ready: "False", Composed: all(es)}),
		},
		// A binding that says Ready without phase Ready opens no gate, and
		// the gate being closed keeps the Tenant not Ready.
		"ClosedGateKeepsTenantNotReady": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Bound", bound: true, conds: []cond{ready, synced}})},
			want:     bound(tenantView{Phase: "Bound", Ready: "False", Composed: bindingOnly}),
		},
		"BindingReadyComposesExternalSecret": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", readyBinding)},
			want:     bound(tenantView{Phase: "ExternalSecretCreated", Ready: "False", Composed: all(es)}),
			wantES:   esSpec(es),
		},
		"StaticReadyDefaultSecretName": {
			name: "netbox", spec: static,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{static: true, phase: "Ready", bound: true, conds: []cond{ready, synced}})},
			want: tenantView{Phase: "ExternalSecretCreated", Ready: "False", Instance: "shared", DatabaseName: "legacy-netbox", Database: "legacy_netbox", LoginRole: "legacy_netbox",
				OpenBaoURL: url, Composed: all(staticES)},
			wantES: esSpec(staticES),
		},
		"ExplicitSecretName": {
			name: "netbox", spec: dynamic + "  credential: {secretName: netbox-db}\n",
			observed: []*unstructured.Unstructured{observedBinding("netbox", readyBinding)},
			want:     bound(tenantView{Phase: "ExternalSecretCreated", Ready: "False", Composed: all(es)}),
			wantES:   esSpec("netbox-db"),
		},
		"ExternalSecretCreated": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", readyBinding), observedExternalSecret(es, "", cond{}), observedUsage("netbox")},
			want:     bound(tenantView{Phase: "ExternalSecretCreated", Ready: "False", Composed: all(es)}),
		},
		"ExternalSecretFailing": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", readyBinding), observedExternalSecret(es, "", cond{"Ready", "False", "SecretSyncedError", "could not get secret data from provider"}), observedUsage("netbox")},
			want:     bound(tenantView{Phase: "ExternalSecretCreated", Ready: "False", Reason: "CredentialProjectionFailed", Message: "could not get secret data from provider", Composed: all(es)}),
		},
		"Ready": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", readyBinding), observedExternalSecret(es, es, cond{"Ready", "True", "SecretSynced", ""}), observedUsage("netbox")},
			want:     bound(tenantView{Phase: "Ready", Ready: "True", Secret: es, Composed: all(es)}),
		},
		// The Secret was projected once, ESO now fails to refresh it.
		"ProjectedThenFailing": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", readyBinding), observedExternalSecret(es, es, cond{"Ready", "False", "SecretSyncedError", "permission denied"}), observedUsage("netbox")},
			want:     bound(tenantView{Phase: "ExternalSecretCreated", Ready: "False", Reason: "CredentialProjectionFailed", Message: "permission denied", Secret: es, Composed: all(es)}),
		},
		// The binding stops being Ready (say, its instance is down): the
		// Tenant is not Ready and says why, and the app's Secret stays.
		"BindingNotReadyKeepsSecret": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Ready", bound: true, conds: []cond{{"Ready", "False", "InstanceNotReady", "instance shared is not Ready"}, synced}}), observedExternalSecret(es, es, cond{"Ready", "True", "SecretSynced", ""}), observedUsage("netbox")},
			want:     bound(tenantView{Phase: "Ready", Ready: "False", Reason: "InstanceNotReady", Message: "instance shared is not Ready", Secret: es, Composed: all(es)}),
		},
		// Both fail: the binding's reason is the one to act on, and a
		// binding condition without a message leaves none of ESO's.
		"BindingReasonWinsOverExternalSecret": {
			name: "netbox", spec: dynamic,
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Ready", bound: true, conds: []cond{synced, {"Ready", "False", "Conflict", "the record belongs to another Database"}}}), observedExternalSecret(es, es, cond{"Ready", "False", "SecretSyncedError", "permission denied"}), observedUsage("netbox")},
			want:     bound(tenantView{Phase: "ExternalSecretCreated", Ready: "False", Reason: "Conflict", Message: "the record belongs to another Database", Secret: es, Composed: all(es)}),
		},
		"BindingStatusWipedKeepsExternalSecret": {
			name: "netbox", spec: dynamic, status: "Ready",
			observed: []*unstructured.Unstructured{wipedBinding("netbox"), observedExternalSecret(es, es, cond{"Ready", "True", "SecretSynced", ""}), observedUsage("netbox")},
			want:     tenantView{Phase: "Ready", Ready: "False", Instance: "shared", Database: "netbox", LoginRole: "netbox", Secret: es, Composed: all(es)},
		},
		// The Tenant got as far as ExternalSecretCreated before; now the
		// render sees the binding not Ready and the new resources not yet:
		// they are still composed, and nothing marks the Tenant unready for
		// good.
		"GateStaysOpenOnceExternalSecretCreated": {
			name: "netbox", spec: dynamic, status: "ExternalSecretCreated",
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Bound", bound: true, conds: []cond{{"Ready", "False", "Creating", ""}, synced}})},
			want:     bound(tenantView{Phase: "Bound", Ready: "False", Composed: all(es)}),
			wantES:   esSpec(es),
		},
		// Before that, a binding that is not Ready gets nothing composed,
		// even with its delivery path already reported.
		"GateClosedBeforeReady": {
			name: "netbox", spec: dynamic, status: "Provisioning",
			observed: []*unstructured.Unstructured{observedBinding("netbox", binding{phase: "Provisioning", bound: true, conds: []cond{{"Ready", "False", "Creating", ""}, synced}})},
			want:     bound(tenantView{Phase: "Provisioning", Ready: "False", Composed: bindingOnly}),
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
				if tc.wantBinding != nil {
					if diff := cmp.Diff(tc.wantBinding, find(composed, "DatabaseBinding").Object["spec"]); diff != "" {
						t.Errorf("DatabaseBinding spec: -want +got:\n%s", diff)
					}
				}
				if tc.wantES != nil {
					if diff := cmp.Diff(tc.wantES, find(composed, "ExternalSecret").Object["spec"]); diff != "" {
						t.Errorf("ExternalSecret spec: -want +got:\n%s", diff)
					}
				}
				if u := find(composed, "Usage"); u != nil {
					t.Errorf("composed a Usage: %v", u.Object)
				}
			})
		}
	}
}

// sevenKeys is the ExternalSecret's template: each of the record's seven
// keys, and nothing else, copied as it is.
func sevenKeys() map[string]any {
	out := map[string]any{}
	for _, k := range []string{"username", "password", "database", "host", "hostaddr", "port", "sslmode"} {
		out[k] = "{{ ." + k + " }}"
	}
	return out
}

// An XTenant made without a claim has no namespace to compose into: it
// composes nothing and is not Ready.
func TestRenderLegacyWithoutClaim(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	xr := obj("apiVersion: legacy.database.ayatori.ddupan.top/v1alpha1\nkind: XTenant\nmetadata: {name: orphan, uid: " + uid + "}\nspec: {instanceRef: shared}\n")
	got, composed, err := renderer.Render(ctx, xr, filepath.Join(testenv.RepoRoot(), "package", "configuration", "legacy", "composition.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tenantView{Phase: "Pending", Ready: "False", Instance: "shared"}, view(got, composed)); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}
