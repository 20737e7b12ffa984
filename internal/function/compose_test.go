package function

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func dynamic() Tenant {
	return Tenant{Name: "shop-api", Namespace: "shop", UID: "t-1", InstanceRef: "pg1", Extensions: []string{"pg_trgm"}}
}

func readyBinding() *Binding {
	return &Binding{Phase: "Ready", Instance: "pg1", DatabaseName: "tenant-t-1", Database: "shop_api", LoginRole: "shop_api",
		CredentialPath: "postgresql-tenants/shop/shop-api", OpenBaoURL: "https://bao/v1/kv/data/postgresql-tenants/shop/shop-api",
		Conditions: []Condition{{Type: "Synced", Status: "True"}, {Type: "Ready", Status: "True", Reason: "Available"}}}
}

func syncedES() *ExternalSecret {
	return &ExternalSecret{Key: "postgresql-tenants/shop/shop-api", SecretName: "pg1-shop-api-postgresql",
		Conditions: []Condition{{Type: "Ready", Status: "True", Reason: "SecretSynced"}}}
}

func TestComposeStatusAndGate(t *testing.T) {
	cases := map[string]struct {
		o          Observed
		want       Status
		resources  []string
		ready      bool
		secretName string
	}{
		"NewTenantIsPendingWithItsNames": {
			o:         Observed{Tenant: dynamic()},
			want:      Status{Phase: "Pending", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api"},
			resources: []string{NameBinding},
		},
		// A progress reason (and its changing message) is not relayed: the
		// phase shows the progress.
		"ProvisioningShowsNoReason": {
			o: Observed{Tenant: dynamic(), Binding: &Binding{Phase: "Provisioning", Conditions: []Condition{
				{Type: "Ready", Status: "False", Reason: "DatabaseNotReady", Message: "Database tenant-t-1 is not Ready yet"}}}},
			want:      Status{Phase: "Provisioning", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api"},
			resources: []string{NameBinding},
		},
		"ARefusalIsRelayed": {
			o: Observed{Tenant: dynamic(), Binding: &Binding{Phase: "Pending", Conditions: []Condition{
				{Type: "Synced", Status: "True"}, {Type: "Ready", Status: "False", Reason: "AlreadyBound", Message: "Database x is bound to another Tenant"}}}},
			want:      Status{Phase: "Pending", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api", Reason: "AlreadyBound", Message: "Database x is bound to another Tenant"},
			resources: []string{NameBinding},
		},
		// The app deleted the binding of a Ready Tenant, the Database was
		// Released, and the binding composed again is refused: the Tenant
		// shows the binding's reason and message as they are (the binding
		// says only what its namespace may read), and no ExternalSecret is
		// composed, as there is no delivery path.
		"ReleasedAfterTheBindingWasDeleted": {
			o: Observed{Tenant: func() Tenant { t := dynamic(); t.Phase = "Ready"; return t }(), Binding: &Binding{Phase: "Pending", Conditions: []Condition{
				{Type: "Synced", Status: "True"}, {Type: "Ready", Status: "False", Reason: "Released", Message: "Database tenant-t-1 was released by this Tenant: ask your platform team to rebind it to this Tenant"}}}},
			want: Status{Phase: "Pending", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api", Reason: "Released",
				Message: "Database tenant-t-1 was released by this Tenant: ask your platform team to rebind it to this Tenant"},
			resources: []string{NameBinding},
		},
		"ReadyBindingOpensTheGate": {
			o: Observed{Tenant: dynamic(), Binding: readyBinding()},
			want: Status{Phase: "ExternalSecretCreated", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api", DatabaseName: "tenant-t-1",
				OpenBaoURL: "https://bao/v1/kv/data/postgresql-tenants/shop/shop-api"},
			resources:  []string{NameBinding, NameExternalSecret},
			secretName: "pg1-shop-api-postgresql",
		},
		"SyncedSecretIsReady": {
			o: Observed{Tenant: dynamic(), Binding: readyBinding(), ExternalSecret: syncedES()},
			want: Status{Phase: "Ready", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api", DatabaseName: "tenant-t-1",
				OpenBaoURL: "https://bao/v1/kv/data/postgresql-tenants/shop/shop-api", SecretName: "pg1-shop-api-postgresql"},
			resources:  []string{NameBinding, NameExternalSecret},
			ready:      true,
			secretName: "pg1-shop-api-postgresql",
		},
		"ESOFailureIsRelayed": {
			o: Observed{Tenant: dynamic(), Binding: readyBinding(), ExternalSecret: &ExternalSecret{Key: "postgresql-tenants/shop/shop-api",
				Conditions: []Condition{{Type: "Ready", Status: "False", Reason: "SecretSyncedError", Message: "could not get secret data from provider"}}}},
			want: Status{Phase: "ExternalSecretCreated", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api", DatabaseName: "tenant-t-1",
				OpenBaoURL: "https://bao/v1/kv/data/postgresql-tenants/shop/shop-api", Reason: "CredentialProjectionFailed", Message: "could not get secret data from provider"},
			resources:  []string{NameBinding, NameExternalSecret},
			secretName: "pg1-shop-api-postgresql",
		},
		// The binding's refusal wins over ESO's.
		"BindingReasonWins": {
			o: Observed{Tenant: func() Tenant { t := dynamic(); t.Phase = "Ready"; return t }(), Binding: &Binding{Phase: "Bound", CredentialPath: "postgresql-tenants/shop/shop-api",
				Conditions: []Condition{{Type: "Ready", Status: "False", Reason: "Conflict", Message: "the record belongs to another Database"}}},
				ExternalSecret: &ExternalSecret{Key: "postgresql-tenants/shop/shop-api", Conditions: []Condition{{Type: "Ready", Status: "False", Message: "eso"}}}},
			want:       Status{Phase: "ExternalSecretCreated", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api", Reason: "Conflict", Message: "the record belongs to another Database"},
			resources:  []string{NameBinding, NameExternalSecret},
			secretName: "pg1-shop-api-postgresql",
		},
		// A Tenant whose own status was forged Ready, its binding never
		// Ready (so it records no delivery path) and no ExternalSecret:
		// nothing is composed but the binding, and the phase shown is the
		// binding's.
		"ForgedTenantPhaseOpensNothing": {
			o:         Observed{Tenant: func() Tenant { t := dynamic(); t.Phase = "Ready"; return t }(), Binding: &Binding{Phase: "Bound"}},
			want:      Status{Phase: "Bound", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api"},
			resources: []string{NameBinding},
		},
		// Once the Secret was made, a binding briefly not Ready (or not seen
		// yet) never removes it: the Tenant's recorded phase and the
		// existing ExternalSecret keep the gate open, its key kept.
		"GateStaysOpen": {
			o: Observed{Tenant: func() Tenant { t := dynamic(); t.Phase = "Ready"; return t }(), ExternalSecret: syncedES()},
			want: Status{Phase: "Ready", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api",
				SecretName: "pg1-shop-api-postgresql"},
			resources:  []string{NameBinding, NameExternalSecret},
			secretName: "pg1-shop-api-postgresql",
		},
		// Neither the binding nor the ExternalSecret tell the path: the
		// ExternalSecret is composed as it is, never removed.
		"UnknownPathKeepsTheExternalSecretAsItIs": {
			o: Observed{Tenant: func() Tenant { t := dynamic(); t.Phase = "Ready"; return t }(), Binding: &Binding{},
				ExternalSecret: &ExternalSecret{SecretName: "pg1-shop-api-postgresql", Spec: map[string]any{"target": map[string]any{"name": "pg1-shop-api-postgresql"}},
					Conditions: []Condition{{Type: "Ready", Status: "True", Reason: "SecretSynced"}}}},
			want:       Status{Phase: "Ready", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api", SecretName: "pg1-shop-api-postgresql"},
			resources:  []string{NameBinding, NameExternalSecret},
			secretName: "pg1-shop-api-postgresql",
		},
		// The Tenant's own status wiped, its binding not Ready for now: the
		// existing ExternalSecret alone keeps the gate open.
		"TenantStatusWipedKeepsTheSecret": {
			o: Observed{Tenant: dynamic(), Binding: &Binding{Phase: "Bound", CredentialPath: "postgresql-tenants/shop/shop-api"}, ExternalSecret: syncedES()},
			want: Status{Phase: "Ready", Instance: "pg1", Database: "shop_api", LoginRole: "shop_api",
				SecretName: "pg1-shop-api-postgresql"},
			resources:  []string{NameBinding, NameExternalSecret},
			secretName: "pg1-shop-api-postgresql",
		},
		"StaticTenantNamesItsSecretAfterItself": {
			o: Observed{Tenant: Tenant{Name: "legacy-app", Namespace: "shop", UID: "t-2", DatabaseRef: "orders", SecretName: "orders-db"},
				Binding: &Binding{Phase: "Ready", Instance: "pg2", Database: "orders", LoginRole: "orders_app", CredentialPath: "p/shop/legacy-app",
					Conditions: []Condition{{Type: "Ready", Status: "True"}}}},
			want:       Status{Phase: "ExternalSecretCreated", Instance: "pg2", Database: "orders", LoginRole: "orders_app"},
			resources:  []string{NameBinding, NameExternalSecret},
			secretName: "orders-db",
		},
		"LegacyWithoutClaimComposesNothing": {
			o:    Observed{Tenant: Tenant{Legacy: true, UID: "x-1", InstanceRef: "pg1"}},
			want: Status{Phase: "Pending", Instance: "pg1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Compose(tc.o)
			if diff := cmp.Diff(tc.want, d.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			var got []string
			for _, n := range []string{NameBinding, NameExternalSecret} {
				if _, ok := d.Resources[n]; ok {
					got = append(got, n)
				}
			}
			if diff := cmp.Diff(tc.resources, got); diff != "" {
				t.Errorf("composed resources (-want +got):\n%s", diff)
			}
			if d.Ready != tc.ready {
				t.Errorf("ready %v, want %v", d.Ready, tc.ready)
			}
			if es, ok := d.Resources[NameExternalSecret]; ok {
				spec := es.Object["spec"].(map[string]any)
				if got := spec["target"].(map[string]any)["name"]; got != tc.secretName {
					t.Errorf("Secret name %v, want %s", got, tc.secretName)
				}
			}
		})
	}
}

func TestComposeBinding(t *testing.T) {
	cases := map[string]struct {
		t    Tenant
		want map[string]any
	}{
		"DynamicDefaultsItsNamesFromTheTenant": {
			t: Tenant{Name: "shop-api.v2", Namespace: "shop", UID: "t-1", InstanceRef: "pg1", Extensions: []string{"pg_trgm", "citext"}},
			want: map[string]any{
				"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "DatabaseBinding",
				"metadata": map[string]any{"name": "shop-api.v2"},
				"spec": map[string]any{
					"providerConfigRef": map[string]any{"name": "pg1", "kind": "ClusterProviderConfig"},
					"forProvider": map[string]any{"tenant": map[string]any{"name": "shop-api.v2", "uid": "t-1"},
						"database": "shop_api_v2", "loginRole": "shop_api_v2", "extensions": []any{"pg_trgm", "citext"}},
				},
			},
		},
		"DatabaseOptionsArePassedOn": {
			t: Tenant{Name: "a", Namespace: "shop", UID: "t-1", InstanceRef: "pg1", DatabaseOptions: map[string]any{"localeProvider": "icu", "icuLocale": "de-DE"}},
			want: map[string]any{
				"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "DatabaseBinding",
				"metadata": map[string]any{"name": "a"},
				"spec": map[string]any{
					"providerConfigRef": map[string]any{"name": "pg1", "kind": "ClusterProviderConfig"},
					"forProvider": map[string]any{"tenant": map[string]any{"name": "a", "uid": "t-1"}, "database": "a", "loginRole": "a",
						"options": map[string]any{"localeProvider": "icu", "icuLocale": "de-DE"}},
				},
			},
		},
		"DatabaseNamesTheRoleUnlessTheRoleIsSet": {
			t: Tenant{Name: "a", Namespace: "shop", UID: "t-1", InstanceRef: "pg1", Database: "orders"},
			want: map[string]any{
				"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "DatabaseBinding",
				"metadata": map[string]any{"name": "a"},
				"spec": map[string]any{
					"providerConfigRef": map[string]any{"name": "pg1", "kind": "ClusterProviderConfig"},
					"forProvider":       map[string]any{"tenant": map[string]any{"name": "a", "uid": "t-1"}, "database": "orders", "loginRole": "orders"},
				},
			},
		},
		// No server named: the binder places it on the namespace's
		// default server; the binding names none.
		"DefaultServerNamesNoServer": {
			t: Tenant{Name: "shop-api", Namespace: "shop", UID: "t-1"},
			want: map[string]any{
				"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "DatabaseBinding",
				"metadata": map[string]any{"name": "shop-api"},
				"spec": map[string]any{
					"forProvider": map[string]any{"tenant": map[string]any{"name": "shop-api", "uid": "t-1"}, "database": "shop_api", "loginRole": "shop_api"},
				},
			},
		},
		"StaticNamesOnlyTheDatabase": {
			t: Tenant{Name: "a", Namespace: "shop", UID: "t-1", DatabaseRef: "orders"},
			want: map[string]any{
				"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "DatabaseBinding",
				"metadata": map[string]any{"name": "a"},
				"spec":     map[string]any{"forProvider": map[string]any{"tenant": map[string]any{"name": "a", "uid": "t-1"}, "databaseRef": "orders"}},
			},
		},
		// The legacy XTenant composes into its claim's namespace, named
		// after the claim, with the XR's UID.
		"LegacyUsesTheClaim": {
			t: Tenant{Legacy: true, Name: "app", Namespace: "team", UID: "x-1", InstanceRef: "pg1", LoginRole: "app_owner"},
			want: map[string]any{
				"apiVersion": "database.ayatori.ddupan.top/v1alpha1", "kind": "DatabaseBinding",
				"metadata": map[string]any{"name": "app", "namespace": "team"},
				"spec": map[string]any{
					"providerConfigRef": map[string]any{"name": "pg1", "kind": "ClusterProviderConfig"},
					"forProvider":       map[string]any{"tenant": map[string]any{"name": "app", "uid": "x-1"}, "database": "app", "loginRole": "app_owner"},
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Compose(Observed{Tenant: tc.t})
			if diff := cmp.Diff(tc.want, d.Resources[NameBinding].Object); diff != "" {
				t.Errorf("binding (-want +got):\n%s", diff)
			}
		})
	}
}

// With no path to read from anywhere, the ExternalSecret is composed with
// its observed spec unchanged: never one that reads an empty path.
func TestComposeKeepsTheObservedExternalSecretWithoutAPath(t *testing.T) {
	observed := map[string]any{"target": map[string]any{"name": "pg1-shop-api-postgresql"}, "refreshInterval": "1h"}
	d := Compose(Observed{Tenant: func() Tenant { t := dynamic(); t.Phase = "Ready"; return t }(), Binding: &Binding{},
		ExternalSecret: &ExternalSecret{SecretName: "pg1-shop-api-postgresql", Spec: observed}})
	es, ok := d.Resources[NameExternalSecret]
	if !ok {
		t.Fatal("the observed ExternalSecret was not composed")
	}
	if diff := cmp.Diff(observed, es.Object["spec"]); diff != "" {
		t.Errorf("ExternalSecret spec (-observed +composed):\n%s", diff)
	}
}

// The ExternalSecret emits exactly the seven keys, read from the path the
// binding reports, through the store and interval of the input.
func TestComposeExternalSecret(t *testing.T) {
	d := Compose(Observed{Input: Input{SecretStore: "bao", RefreshInterval: "15m"}, Tenant: dynamic(), Binding: readyBinding()})
	es := d.Resources[NameExternalSecret].Object
	spec := es["spec"].(map[string]any)
	if spec["refreshInterval"] != "15m" || spec["secretStoreRef"].(map[string]any)["name"] != "bao" {
		t.Errorf("store or interval: %v", spec)
	}
	from := spec["dataFrom"].([]any)
	if len(from) != 1 || from[0].(map[string]any)["extract"].(map[string]any)["key"] != "postgresql-tenants/shop/shop-api" {
		t.Errorf("dataFrom %v: want one extract of the binding's path", from)
	}
	tmpl := spec["target"].(map[string]any)["template"].(map[string]any)
	if tmpl["mergePolicy"] != "Replace" || tmpl["engineVersion"] != "v2" {
		t.Errorf("template %v: want engine v2, mergePolicy Replace", tmpl)
	}
	var keys []string
	for k, v := range tmpl["data"].(map[string]any) {
		if v != "{{ ."+k+" }}" {
			t.Errorf("template of %s: %v", k, v)
		}
		keys = append(keys, k)
	}
	if diff := cmp.Diff(CredentialKeys, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if len(d.Resources) != 2 {
		t.Errorf("composed %d resources, want the binding and the ExternalSecret only", len(d.Resources))
	}
}

func withRoles(t Tenant, roles ...DataRole) Tenant {
	t.DataRoles = roles
	return t
}

func rolesBinding(ready ...string) *Binding {
	b := readyBinding()
	for _, n := range ready {
		b.DataRoles = append(b.DataRoles, BindingRole{Name: n, Role: "shop_api_" + n, Path: "postgresql-tenants/shop/shop-api/roles/" + n, Ready: true})
	}
	return b
}

func syncedRoleES(name string) *ExternalSecret {
	return &ExternalSecret{Key: "postgresql-tenants/shop/shop-api/roles/" + name, SecretName: "pg1-shop-api-postgresql-" + name,
		Conditions: []Condition{{Type: "Ready", Status: "True", Reason: "SecretSynced"}}}
}

// Each data role the Tenant asks for gets its own ExternalSecret, reading
// its delivery copy, once the binding shows it; the Tenant is Ready only
// when every Secret is synced. A role no longer asked for is not composed
// (Crossplane deletes its ExternalSecret first, the binder then its copy).
func TestComposeDataRoles(t *testing.T) {
	app := DataRole{Name: "app", Access: "readWrite"}
	report := DataRole{Name: "report", Access: "readOnly", SecretName: "reporting-db"}
	cases := map[string]struct {
		o         Observed
		resources []string
		ready     bool
		phase     string
		roles     []RoleStatus
	}{
		"NotYetDeliveredIsNotComposed": {
			o:         Observed{Tenant: withRoles(dynamic(), app), Binding: rolesBinding(), ExternalSecret: syncedES()},
			resources: []string{NameBinding, NameExternalSecret}, phase: PhaseExternalSecretCreated,
			roles: []RoleStatus{{Name: "app", SecretName: "pg1-shop-api-postgresql-app"}},
		},
		"DeliveredIsComposedAndWaitedFor": {
			o:         Observed{Tenant: withRoles(dynamic(), app, report), Binding: rolesBinding("app", "report"), ExternalSecret: syncedES()},
			resources: []string{NameBinding, NameExternalSecret, "externalsecret-app", "externalsecret-report"}, phase: PhaseExternalSecretCreated,
			roles: []RoleStatus{{Name: "app", Role: "shop_api_app", SecretName: "pg1-shop-api-postgresql-app"}, {Name: "report", Role: "shop_api_report", SecretName: "reporting-db"}},
		},
		"AllSyncedIsReady": {
			o: Observed{Tenant: withRoles(dynamic(), app), Binding: rolesBinding("app"), ExternalSecret: syncedES(),
				RoleSecrets: map[string]*ExternalSecret{"app": syncedRoleES("app")}},
			resources: []string{NameBinding, NameExternalSecret, "externalsecret-app"}, ready: true, phase: PhaseReady,
			roles: []RoleStatus{{Name: "app", Role: "shop_api_app", SecretName: "pg1-shop-api-postgresql-app", Ready: true}},
		},
		// The binding's status was lost: the existing ExternalSecret is
		// kept, reading what it reads.
		"KeptWithoutTheBindingsStatus": {
			o: Observed{Tenant: withRoles(dynamic(), app), Binding: readyBinding(), ExternalSecret: syncedES(),
				RoleSecrets: map[string]*ExternalSecret{"app": syncedRoleES("app")}},
			resources: []string{NameBinding, NameExternalSecret, "externalsecret-app"}, ready: true, phase: PhaseReady,
			roles: []RoleStatus{{Name: "app", SecretName: "pg1-shop-api-postgresql-app", Ready: true}},
		},
		"RemovedIsNotComposed": {
			o: Observed{Tenant: dynamic(), Binding: rolesBinding("app"), ExternalSecret: syncedES(),
				RoleSecrets: map[string]*ExternalSecret{"app": syncedRoleES("app")}},
			resources: []string{NameBinding, NameExternalSecret}, ready: true, phase: PhaseReady,
		},
		// The gate holds for roles too: a binding not yet Ready composes
		// no role's ExternalSecret, whatever its status lists.
		"GateClosed": {
			o:         Observed{Tenant: withRoles(dynamic(), app), Binding: func() *Binding { b := rolesBinding("app"); b.Phase = "Provisioning"; return b }()},
			resources: []string{NameBinding}, phase: "Provisioning",
			roles: []RoleStatus{{Name: "app", Role: "shop_api_app", SecretName: "pg1-shop-api-postgresql-app"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Compose(tc.o)
			var got []string
			for n := range d.Resources {
				got = append(got, n)
			}
			if diff := cmp.Diff(tc.resources, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("resources: -want +got:\n%s", diff)
			}
			if d.Ready != tc.ready || d.Status.Phase != tc.phase {
				t.Errorf("ready %v phase %q; want %v %q", d.Ready, d.Status.Phase, tc.ready, tc.phase)
			}
			if diff := cmp.Diff(tc.roles, d.Status.DataRoles); diff != "" {
				t.Errorf("status.dataRoles: -want +got:\n%s", diff)
			}
			for _, r := range tc.o.Tenant.DataRoles {
				res, ok := d.Resources[NameRoleSecretPrefix+r.Name]
				if !ok {
					continue
				}
				spec := res.Object["spec"].(map[string]any)
				key := spec["dataFrom"].([]any)[0].(map[string]any)["extract"].(map[string]any)["key"]
				if key != "postgresql-tenants/shop/shop-api/roles/"+r.Name {
					t.Errorf("%s reads %v; want its role's delivery copy", r.Name, key)
				}
				if got, want := spec["target"].(map[string]any)["name"], roleSecretName(tc.o.Tenant, "pg1-shop-api-postgresql", r); got != want {
					t.Errorf("%s writes Secret %v; want %s", r.Name, got, want)
				}
			}
		})
	}
}

// The binding carries the roles the Tenant asks for.
func TestComposeBindingCarriesDataRoles(t *testing.T) {
	d := Compose(Observed{Tenant: withRoles(dynamic(), DataRole{Name: "app", Access: "readWrite", SecretName: "x"})})
	fp := d.Resources[NameBinding].Object["spec"].(map[string]any)["forProvider"].(map[string]any)
	if diff := cmp.Diff([]any{map[string]any{"name": "app", "access": "readWrite"}}, fp["dataRoles"]); diff != "" {
		t.Errorf("spec.forProvider.dataRoles: -want +got:\n%s", diff)
	}
}

// A Tenant that names no server shows the server its binding landed on,
// and its Secret's name does not depend on it.
func TestComposeDefaultServer(t *testing.T) {
	ten := dynamic()
	ten.InstanceRef = ""
	d := Compose(Observed{Tenant: ten})
	if d.Status.Instance != "" {
		t.Errorf("status.instance %q before the binder placed it, want none", d.Status.Instance)
	}
	b := readyBinding()
	b.Instance = "shared"
	d = Compose(Observed{Tenant: ten, Binding: b})
	if d.Status.Instance != "shared" {
		t.Errorf("status.instance %q, want the binding's server shared", d.Status.Instance)
	}
	es := d.Resources[NameExternalSecret].Object
	if name := es["metadata"].(map[string]any)["name"]; name != "shop-api-postgresql" {
		t.Errorf("ExternalSecret %v, want shop-api-postgresql", name)
	}
	if name := es["spec"].(map[string]any)["target"].(map[string]any)["name"]; name != "shop-api-postgresql" {
		t.Errorf("Secret %v, want shop-api-postgresql", name)
	}
}

// The ExternalSecrets carry the record version the binding shows, so that
// ESO syncs them as soon as a rotation moves it; while the binding shows
// none, what the observed ExternalSecret carries is kept, never dropped.
func TestComposeCarriesTheCredentialVersion(t *testing.T) {
	annotation := func(d Desired, name string) (string, bool) {
		r, ok := d.Resources[name]
		if !ok {
			t.Fatalf("%s not composed", name)
		}
		v, ok := r.Object["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnotationCredentialVersion]
		if !ok {
			return "", false
		}
		return v.(string), true
	}
	app := DataRole{Name: "app", Access: "readWrite"}
	cases := map[string]struct {
		binding              func() *Binding
		es, roleES           *ExternalSecret
		want, wantRole       string
		wantNone, noneOfRole bool
	}{
		"ShownByTheBinding": {
			binding: func() *Binding {
				b := rolesBinding("app")
				b.CredentialVersion, b.DataRoles[0].Version = 3, 2
				return b
			},
			want: "3", wantRole: "2",
		},
		"RotatedOverAnOlderAnnotation": {
			binding: func() *Binding {
				b := rolesBinding("app")
				b.CredentialVersion, b.DataRoles[0].Version = 4, 3
				return b
			},
			es:     func() *ExternalSecret { e := syncedES(); e.CredentialVersion = "3"; return e }(),
			roleES: func() *ExternalSecret { e := syncedRoleES("app"); e.CredentialVersion = "2"; return e }(),
			want:   "4", wantRole: "3",
		},
		"NotShownKeepsTheObserved": {
			binding: func() *Binding { return rolesBinding("app") },
			es:      func() *ExternalSecret { e := syncedES(); e.CredentialVersion = "5"; return e }(),
			roleES:  func() *ExternalSecret { e := syncedRoleES("app"); e.CredentialVersion = "6"; return e }(),
			want:    "5", wantRole: "6",
		},
		"NotShownAnywhere": {
			binding:  func() *Binding { return rolesBinding("app") },
			wantNone: true, noneOfRole: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Observed{Tenant: withRoles(dynamic(), app), Binding: tc.binding(), ExternalSecret: tc.es}
			if tc.roleES != nil {
				o.RoleSecrets = map[string]*ExternalSecret{"app": tc.roleES}
			}
			d := Compose(o)
			if got, ok := annotation(d, NameExternalSecret); ok == tc.wantNone || got != tc.want {
				t.Errorf("owner's ExternalSecret: annotation %q (present %v), want %q", got, ok, tc.want)
			}
			if got, ok := annotation(d, NameRoleSecretPrefix+"app"); ok == tc.noneOfRole || got != tc.wantRole {
				t.Errorf("data role's ExternalSecret: annotation %q (present %v), want %q", got, ok, tc.wantRole)
			}
		})
	}
}

// The binding's version comes as JSON numbers do through the function's
// request: float64.
func TestReadBindingVersion(t *testing.T) {
	b := readBinding(map[string]any{"status": map[string]any{"atProvider": map[string]any{
		"credential": map[string]any{"path": "p", "version": float64(7)},
		"dataRoles":  []any{map[string]any{"name": "app", "credential": map[string]any{"path": "q", "version": float64(2)}}},
	}}})
	if b.CredentialVersion != 7 || len(b.DataRoles) != 1 || b.DataRoles[0].Version != 2 {
		t.Errorf("read %+v, want version 7 and the role's 2", b)
	}
}

// The composed binding decodes strictly into the API's DatabaseBinding: a
// key the API does not know (a field renamed in the API, or the options
// bindingObject passes on under a name of its own) fails here instead of
// being pruned by the API server. Decoded, it is the typed binding it was
// built from, with the Tenant's databaseOptions as the API types them.
func TestComposedBindingDecodesStrictly(t *testing.T) {
	full := withRoles(dynamic(), DataRole{Name: "app", Access: "readWrite", SecretName: "x"}, DataRole{Name: "report", Access: "readOnly"})
	full.Database, full.LoginRole = "orders", "orders_owner"
	full.DatabaseOptions = map[string]any{"encoding": "UTF8", "localeProvider": "icu", "locale": "C", "icuLocale": "de-DE", "builtinLocale": "C.UTF-8"}
	cases := map[string]struct {
		t    Tenant
		opts *v1alpha1.DatabaseOptions
	}{
		"EveryField": {t: full, opts: &v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: v1alpha1.LocaleProviderICU, Locale: "C", ICULocale: "de-DE", BuiltinLocale: "C.UTF-8"}},
		"Static":     {t: Tenant{Name: "a", Namespace: "shop", UID: "t-1", DatabaseRef: "orders", Extensions: []string{"citext"}}},
		"Legacy":     {t: Tenant{Legacy: true, Name: "app", Namespace: "team", UID: "x-1", InstanceRef: "pg1", LoginRole: "app_owner"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(Compose(Observed{Tenant: tc.t}).Resources[NameBinding].Object)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var got v1alpha1.DatabaseBinding
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("the composed binding does not decode strictly into a DatabaseBinding: %v\n%s", err, raw)
			}
			want := binding(tc.t)
			want.Spec.ForProvider.Options = tc.opts
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decoded binding (-want +got):\n%s", diff)
			}
		})
	}
}
