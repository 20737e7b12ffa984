package argocd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// object decodes a YAML object as Argo CD sees it (JSON types).
func object(t *testing.T, y string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatalf("%v in\n%s", err, y)
	}
	return m
}

type healthCase struct {
	name, obj   string
	status      string
	messageHas  []string
	messageIsnt string
}

func check(t *testing.T, script string, cases []healthCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Run(script, object(t, tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.status {
				t.Errorf("status %q, want %q (message %q)", got.Status, tc.status, got.Message)
			}
			for _, s := range tc.messageHas {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not contain %q", got.Message, s)
				}
			}
			if tc.messageIsnt != "" && strings.Contains(got.Message, tc.messageIsnt) {
				t.Errorf("message %q contains %q", got.Message, tc.messageIsnt)
			}
		})
	}
}

const tenantHead = "apiVersion: database.ayatori.ddupan.top/v1alpha1\nkind: Tenant\n"

func TestTenantHealth(t *testing.T) {
	cases := []healthCase{
		{name: "paused by annotation", status: Suspended, messageHas: []string{"ReconcilePaused"}, obj: tenantHead + `
metadata: {name: a, namespace: ns, annotations: {crossplane.io/paused: "true"}}
status: {conditions: [{type: Ready, status: "True", reason: Available}]}`},
		{name: "paused, as Synced says", status: Suspended, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {conditions: [{type: Synced, status: "False", reason: ReconcilePaused}]}`},
		{name: "being deleted", status: Progressing, messageHas: []string{"Deleting"}, obj: tenantHead + `
metadata: {name: a, namespace: ns, deletionTimestamp: "2026-01-01T00:00:00Z"}
status: {phase: Released, conditions: [{type: Ready, status: "False", reason: Deleting}]}`},
		{name: "no status yet", status: Progressing, messageHas: []string{"compose"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
spec: {instanceRef: shared}`},
		{name: "status without conditions", status: Progressing, messageHas: []string{"compose"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {phase: Pending}`},
		{name: "Crossplane cannot compose it", status: Degraded, messageHas: []string{"ReconcileError: cannot compose resources"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {conditions: [{type: Synced, status: "False", reason: ReconcileError, message: cannot compose resources}, {type: Ready, status: "False", reason: Creating}]}`},
		{name: "Ready", status: Healthy, messageHas: []string{"database app on shared", "Secret shared-app-postgresql"}, obj: tenantHead + `
metadata: {name: app, namespace: ns}
status:
  phase: Ready
  instance: shared
  database: app
  credential: {secretRef: {name: shared-app-postgresql}}
  conditions: [{type: Synced, status: "True", reason: ReconcileSuccess}, {type: Ready, status: "True", reason: Available}]`},
		{name: "Ready, no Secret name reported", status: Healthy, messageIsnt: "Secret", obj: tenantHead + `
metadata: {name: app, namespace: ns}
status: {phase: Ready, database: app, instance: shared, conditions: [{type: Ready, status: "True", reason: Available}]}`},
		{name: "AlreadyBound", status: Degraded, messageHas: []string{"AlreadyBound: Database db1 is bound to other/x"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status:
  phase: Pending
  reason: AlreadyBound
  message: Database db1 is bound to other/x
  conditions: [{type: Synced, status: "True", reason: ReconcileSuccess}, {type: Ready, status: "False", reason: Creating}]`},
		{name: "a refusal without a message", status: Degraded, messageHas: []string{"Released"}, messageIsnt: ": ", obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {phase: Pending, reason: Released, conditions: [{type: Ready, status: "False", reason: Creating}]}`},
		{name: "waiting for the instance", status: Progressing, messageHas: []string{"Pending: InstanceNotReady: ClusterProviderConfig shared is not Ready yet"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status:
  phase: Pending
  reason: InstanceNotReady
  message: ClusterProviderConfig shared is not Ready yet
  conditions: [{type: Ready, status: "False", reason: Creating}]`},
		{name: "on its way", status: Progressing, messageHas: []string{"ExternalSecretCreated: Creating: Unready resources: externalsecret"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {phase: ExternalSecretCreated, conditions: [{type: Ready, status: "False", reason: Creating, message: "Unready resources: externalsecret"}]}`},
		{name: "a reason the script does not know", status: Progressing, messageHas: []string{"Pending: SomethingNew: m (" + unknownReason + ")"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {phase: Pending, reason: SomethingNew, message: m, conditions: [{type: Ready, status: "False", reason: Creating}]}`},
		{name: "a known wait", status: Progressing, messageIsnt: unknownReason, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {phase: Pending, reason: WaitingForTenant, message: m, conditions: [{type: Ready, status: "False", reason: Creating}]}`},
		{name: "composed, Ready not reported yet", status: Progressing, messageHas: []string{"Pending"}, obj: tenantHead + `
metadata: {name: a, namespace: ns}
status: {conditions: [{type: Synced, status: "True", reason: ReconcileSuccess}]}`},
	}
	check(t, TenantScript, cases)
}

const databaseHead = "apiVersion: database.ayatori.ddupan.top/v1alpha1\nkind: Database\n"

func TestDatabaseHealth(t *testing.T) {
	ok := `[{type: Synced, status: "True", reason: ReconcileSuccess}, {type: Ready, status: "True", reason: Available}]`
	cases := []healthCase{
		{name: "paused by annotation", status: Suspended, obj: databaseHead + `
metadata: {name: d, annotations: {crossplane.io/paused: "true"}}
status: {conditions: ` + ok + `}`},
		{name: "paused, as Synced says", status: Suspended, messageHas: []string{"ReconcilePaused"}, obj: databaseHead + `
metadata: {name: d}
status: {conditions: [{type: Synced, status: "False", reason: ReconcilePaused}]}`},
		{name: "not observed yet", status: Progressing, messageHas: []string{"observe"}, obj: databaseHead + `
metadata: {name: d}
spec: {forProvider: {database: d}}`},
		{name: "Conflict", status: Degraded, messageHas: []string{"Conflict: database d exists"}, obj: databaseHead + `
metadata: {name: d}
status: {conditions: [{type: Synced, status: "True", reason: ReconcileSuccess}, {type: Ready, status: "False", reason: Conflict, message: database d exists}]}`},
		{name: "a refused deletion", status: Degraded, messageHas: []string{"ImmutableField: cannot delete"}, obj: databaseHead + `
metadata: {name: d, deletionTimestamp: "2026-01-01T00:00:00Z"}
status: {conditions: [{type: Synced, status: "False", reason: ReconcileError, message: x}, {type: Ready, status: "False", reason: ImmutableField, message: "cannot delete: the names changed"}]}`},
		{name: "deleted while its Tenant uses it", status: Progressing, messageHas: []string{"BoundToTenant: waits"}, obj: databaseHead + `
metadata: {name: d, deletionTimestamp: "2026-01-01T00:00:00Z"}
spec: {reclaimPolicy: Retain}
status: {binding: {phase: Bound, claim: ns/a}, conditions: [{type: Ready, status: "False", reason: BoundToTenant, message: waits until the Tenant ns/a releases it}]}`},
		{name: "being deleted", status: Progressing, messageHas: []string{"Deleting", "Delete"}, obj: databaseHead + `
metadata: {name: d, deletionTimestamp: "2026-01-01T00:00:00Z"}
spec: {reclaimPolicy: Delete}
status: {conditions: ` + ok + `}`},
		{name: "Synced=False while Ready", status: Degraded, messageHas: []string{"ReconcileError: connect failed"}, obj: databaseHead + `
metadata: {name: d}
status: {conditions: [{type: Synced, status: "False", reason: ReconcileError, message: connect failed}, {type: Ready, status: "True", reason: Available}]}`},
		{name: "Synced=False while creating", status: Degraded, obj: databaseHead + `
metadata: {name: d}
status: {conditions: [{type: Synced, status: "False", reason: ReconcileError, message: cannot get ClusterProviderConfig}, {type: Ready, status: "False", reason: Creating}]}`},
		{name: "Synced=False while the provider waits", status: Progressing, messageHas: []string{"DependencyUnavailable: OpenBao"}, obj: databaseHead + `
metadata: {name: d}
status: {conditions: [{type: Synced, status: "False", reason: ReconcileError, message: x}, {type: Ready, status: "False", reason: DependencyUnavailable, message: OpenBao did not answer}]}`},
		{name: "Ready not reported yet", status: Progressing, messageHas: []string{"report Ready"}, obj: databaseHead + `
metadata: {name: d}
status: {conditions: [{type: Synced, status: "True", reason: ReconcileSuccess}]}`},
		{name: "creating", status: Progressing, messageHas: []string{"Creating"}, obj: databaseHead + `
metadata: {name: d}
status: {atProvider: {phase: RoleCreated}, conditions: [{type: Synced, status: "True", reason: ReconcileSuccess}, {type: Ready, status: "False", reason: Creating}]}`},
		{name: "a reason the script does not know", status: Progressing, messageHas: []string{"SomethingNew: m (" + unknownReason + ")"}, obj: databaseHead + `
metadata: {name: d}
status: {conditions: [{type: Synced, status: "True", reason: ReconcileSuccess}, {type: Ready, status: "False", reason: SomethingNew, message: m}]}`},
		{name: "Bound", status: Healthy, messageHas: []string{"bound to the Tenant ns/a"}, obj: databaseHead + `
metadata: {name: d}
spec: {claimRef: {namespace: ns, name: a, uid: u}}
status: {binding: {phase: Bound, claim: ns/a}, conditions: ` + ok + `}`},
		{name: "Released", status: Healthy, messageHas: []string{"Released: its Tenant ns/a is gone", "spec.claimRef"}, obj: databaseHead + `
metadata: {name: d}
spec: {claimRef: {namespace: ns, name: a, uid: u}}
status: {binding: {phase: Released, claim: ns/a}, conditions: ` + ok + `}`},
		{name: "reserved", status: Healthy, messageHas: []string{"reserved for the Tenant ns/a"}, obj: databaseHead + `
metadata: {name: d}
spec: {claimRef: {namespace: ns, name: a}}
status: {binding: {phase: Available}, conditions: ` + ok + `}`},
		{name: "Available", status: Healthy, messageHas: []string{"not bound"}, obj: databaseHead + `
metadata: {name: d}
status: {binding: {phase: Available}, conditions: ` + ok + `}`},
	}
	check(t, DatabaseScript, cases)
}

// unknownReason is what a script adds to the message of a reason it does
// not name.
const unknownReason = "a reason this health check does not know"

// readyReasons is every Ready reason a Tenant or a Database can show, and
// what each script makes of it: tenant.lua of a Tenant's status.reason (the
// binding's reason, or the bound Database's, relayed), database.lua of a
// Database's Ready reason; "" where that object never shows it. A refusal
// or a problem only a human ends is Degraded; progress, or a wait that
// resumes by itself, is Progressing.
var readyReasons = map[string]struct{ tenant, database string }{
	tenancy.ReasonConflict:                   {Degraded, Degraded},
	tenancy.ReasonImmutableField:             {Degraded, Degraded},
	tenancy.ReasonInvalidSpec:                {Degraded, Degraded},
	tenancy.ReasonImportDifferences:          {Degraded, Degraded},
	tenancy.ReasonEndpointChanged:            {Degraded, Degraded},
	tenancy.ReasonDatabaseVanished:           {Degraded, Degraded},
	tenancy.ReasonProvisioningFailed:         {Degraded, Degraded},
	tenancy.ReasonAuthenticationFailed:       {Degraded, Degraded},
	tenancy.ReasonInsufficientPrivileges:     {Degraded, Degraded},
	tenancy.ReasonUnsupportedVersion:         {Degraded, Degraded},
	tenancy.ReasonDatabaseOptionsNotAllowed:  {Degraded, Degraded},
	tenancy.ReasonDatabaseOptionsUnsupported: {Degraded, Degraded},
	string(postgres.ClassDependentObjects):   {Degraded, Degraded},
	string(postgres.ClassReadOnly):           {Degraded, Degraded},
	string(postgres.ClassRefused):            {Degraded, Degraded},

	tenancy.ReasonInstanceNotReady:      {Progressing, Progressing},
	tenancy.ReasonDependencyUnavailable: {Progressing, Progressing},
	tenancy.ReasonReconciling:           {Progressing, Progressing},
	tenancy.ReasonBoundToTenant:         {Progressing, Progressing},
	string(xpv2.ReasonCreating):         {Progressing, Progressing},
	string(xpv2.ReasonDeleting):         {Progressing, Progressing},

	// The binding's own.
	tenancy.ReasonAlreadyBound:               {Degraded, ""},
	tenancy.ReasonReleased:                   {Degraded, ""},
	tenancy.ReasonWrongInstance:              {Degraded, ""},
	tenancy.ReasonDatabaseNotFound:           {Degraded, ""},
	tenancy.ReasonCredentialProjectionFailed: {Degraded, ""},
	tenancy.ReasonNotATenantsBinding:         {Degraded, ""},
	tenancy.ReasonTenantGone:                 {Degraded, ""},
	// A Tenant not being deleted shows it only when its binding was
	// deleted by hand: it waits for the Tenant's ExternalSecret, which goes
	// only with the Tenant.
	tenancy.ReasonWaitingForExternalSecret: {Degraded, ""},
	tenancy.ReasonDatabaseNotReady:         {Progressing, ""},
	tenancy.ReasonBinding:                  {Progressing, ""},
	tenancy.ReasonWaitingForTenant:         {Progressing, ""},
	tenancy.ReasonProvisioning:             {Progressing, ""},
	tenancy.ReasonDelivering:               {Progressing, ""},
	// A data role the Tenant asks for: not created yet on its Database
	// (progress), or absent from a Database an admin registered (only the
	// admin or the team ends it).
	tenancy.ReasonDataRoleNotReady:    {Progressing, ""},
	tenancy.ReasonDataRoleUnavailable: {Degraded, ""},
	// An extension a static binding's Database lacks: only the admin
	// installs it.
	tenancy.ReasonExtensionsMissing: {Degraded, ""},
	// The server's namespace policy: an admin's change, or a Tenant
	// deleted in the namespace, ends it.
	tenancy.ReasonNamespaceNotAllowed:   {Degraded, ""},
	tenancy.ReasonNamespaceLimitReached: {Degraded, ""},
	// A Tenant naming no server where no server, or more than one, is
	// the namespace's default: an admin's change, or a named server, ends
	// it.
	tenancy.ReasonNoDefaultServer:        {Degraded, ""},
	tenancy.ReasonDefaultServerAmbiguous: {Degraded, ""},
}

// otherReasons are the reasons the code defines that are no Tenant's or
// Database's Ready reason while not Ready, and why.
var otherReasons = map[string]string{
	tenancy.ReasonAvailable:            "Ready=True",
	tenancy.ReasonReady:                "a ClusterProviderConfig's Ready=True",
	tenancy.ReasonUnsafeTemplates:      "a ClusterProviderConfig's (its Databases show InstanceNotReady)",
	tenancy.ReasonOtherRolesHaveAccess: "the OtherAccess condition",
	tenancy.ReasonOwnerOnly:            "the OtherAccess condition",
	tenancy.ReasonWithinBudget:         "the ConnectionBudget condition",
	tenancy.ReasonOvercommitted:        "the ConnectionBudget condition",
	tenancy.ReasonUnlimited:            "the ConnectionBudget condition",
	tenancy.ReasonOptionsDiffer:        "the OptionsDiffer condition",
	tenancy.ReasonOptionsMatch:         "the OptionsDiffer condition",
}

// reasonSources are the packages that define condition reasons: constants
// named Reason..., and the failure classes of internal/clients/postgres
// (type Class), which are reasons too.
var reasonSources = []string{"internal/tenancy", "internal/function", "internal/clients/postgres", "internal/controller"}

// codeReasons collects the reasons reasonSources define, from their source
// (test files aside), by reason, naming where each is defined.
func codeReasons(t *testing.T) map[string]string {
	t.Helper()
	var dirs []string
	for _, dir := range reasonSources {
		dirs = append(dirs, filepath.Join("..", "..", dir))
	}
	consts, err := testenv.Consts(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range consts {
		if !strings.HasPrefix(c.Name, "Reason") && c.Type != "Class" {
			continue
		}
		if !c.Literal {
			t.Errorf("%s: %s has no string literal of its own", c.Pos, c.Name)
			continue
		}
		if c.Value != "" {
			out[c.Value] = fmt.Sprintf("%s (%s)", c.Name, c.Pos)
		}
	}
	return out
}

// The tables above are every reason the code defines: a new reason fails
// here until it is classified (and then named in the scripts, below).
func TestEveryReasonOfTheCodeIsInTheTables(t *testing.T) {
	code := codeReasons(t)
	if len(code) < 30 {
		t.Fatalf("found only %d reasons in %v: %v", len(code), reasonSources, code)
	}
	crossplane := map[string]bool{string(xpv2.ReasonCreating): true, string(xpv2.ReasonDeleting): true}
	for r, where := range code {
		_, ready := readyReasons[r]
		_, other := otherReasons[r]
		if !ready && !other {
			t.Errorf("the reason %q, %s, is in neither readyReasons nor otherReasons: classify it, and name it in the health checks", r, where)
		}
		if ready && other {
			t.Errorf("the reason %q is in both readyReasons and otherReasons", r)
		}
	}
	for r := range readyReasons {
		if _, ok := code[r]; !ok && !crossplane[r] {
			t.Errorf("readyReasons has %q, which the code does not define", r)
		}
	}
	for r := range otherReasons {
		if _, ok := code[r]; !ok {
			t.Errorf("otherReasons has %q, which the code does not define", r)
		}
	}
}

// Every Ready reason is named in the scripts, and classified as
// readyReasons says.
func TestEveryReasonIsClassified(t *testing.T) {
	run := func(script, y, want string, known bool) {
		t.Helper()
		got, err := Run(script, object(t, y))
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want {
			t.Errorf("%s: %s, want %s", y, got, want)
		}
		if known && strings.Contains(got.Message, unknownReason) {
			t.Errorf("%s: %s: the script does not name the reason", y, got)
		}
	}
	// The provider's fail() sets Ready=False with the reason and returns an
	// error, so Crossplane sets Synced=False next to it: a wait stays
	// Progressing even then.
	providerWaits := []string{tenancy.ReasonInstanceNotReady, tenancy.ReasonDependencyUnavailable, tenancy.ReasonBoundToTenant}
	for r, c := range readyReasons {
		if c.tenant != "" {
			run(TenantScript, tenantHead+`
metadata: {name: a, namespace: ns}
status: {phase: Pending, reason: `+r+`, message: m, conditions: [{type: Synced, status: "True"}, {type: Ready, status: "False", reason: Creating}]}`, c.tenant, true)
		}
		if c.database == "" {
			continue
		}
		for _, synced := range []string{"True", "False"} {
			w := c.database
			if synced == "False" && w == Progressing && !slices.Contains(providerWaits, r) {
				w = Degraded
			}
			run(DatabaseScript, databaseHead+`
metadata: {name: d}
status: {conditions: [{type: Synced, status: "`+synced+`"}, {type: Ready, status: "False", reason: `+r+`, message: m}]}`, w, synced == "True")
		}
	}
}

// The argocd-cm patch carries the scripts verbatim.
func TestConfigMapCarriesTheScripts(t *testing.T) {
	b, err := os.ReadFile("argocd-cm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cm := struct {
		Data map[string]string `json:"data"`
	}{}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	for key, script := range map[string]string{
		"resource.customizations.health.database.ayatori.ddupan.top_Tenant":   TenantScript,
		"resource.customizations.health.database.ayatori.ddupan.top_Database": DatabaseScript,
	} {
		if cm.Data[key] != script {
			t.Errorf("argocd-cm.yaml's %s is not the script of this directory: indent the .lua file by four spaces into it", key)
		}
	}
	if len(cm.Data) != 2 {
		t.Errorf("argocd-cm.yaml has %d keys, want the two health checks", len(cm.Data))
	}
}

// The runner follows Argo CD: no string library, a table result, known
// statuses only.
func TestRunFollowsArgoCD(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{"name": "x"}, "n": int64(3), "f": 1.5, "l": []any{"a", true, nil}}
	for script, want := range map[string]Status{
		`return {status = "Healthy", message = obj.metadata.name .. obj.n .. obj.l[1] .. tostring(obj.l[2])}`: {Healthy, "x3atrue"},
		`return {status = "Fine"}`: {Unknown, "Lua returned an invalid health status"},
	} {
		got, err := Run(script, obj)
		if err != nil || got != want {
			t.Errorf("%s: %v (%v), want %v", script, got, err, want)
		}
	}
	for _, script := range []string{
		`return {status = string.lower("HEALTHY")}`, // Argo CD opens no string library
		`local s = "Healthy"; return {status = s:lower()}`,
		`return "Healthy"`,
		`return {status = "Healthy", message = 1}`,
		`while true do end`,
	} {
		if got, err := Run(script, obj); err == nil {
			t.Errorf("%s: %v, want an error", script, got)
		}
	}
}
