package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// These tests apply objects to a real kube-apiserver with the generated CRDs
// installed: what they assert is what `kubectl apply` would answer.

var env *testenv.Env

// The ESO CRDs are installed too, so that the examples that use them can be
// checked.
func TestMain(m *testing.M) {
	// The examples include ESO objects, Crossplane's (XRDs, Compositions,
	// Functions) and Tenants: serve all their kinds.
	if testenv.Short() {
		// No environment, whose stop would remove the directory.
		os.Exit(m.Run())
	}
	xrds, err := os.MkdirTemp("", "ppt-xrds-")
	if err == nil {
		err = testenv.ConvertXRDs(xrds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: test environment:", err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.Options{Kube: true, ExtraCRDDirs: []string{
		testenv.ESOCRDDir(testenv.BinDir()), testenv.CrossplaneCRDDir(testenv.BinDir()), xrds,
	}}, &env, func(*testenv.Env) (func(), error) { return func() { _ = os.RemoveAll(xrds) }, nil })
}

const ns = "admission"

func setup(t *testing.T) (context.Context, client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := env.Kube.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ctx, env.Kube.Client
}

var seq int

func uniq(prefix string) string { seq++; return fmt.Sprintf("%s%d", prefix, seq) }

func cpc(mut func(*v1alpha1.ClusterProviderConfig)) *v1alpha1.ClusterProviderConfig {
	c := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: uniq("cpc-")},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: "postgresql.home.arpa", Hostaddr: "192.0.2.10"},
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: "crossplane-system", Name: "admin"}},
		},
	}
	if mut != nil {
		mut(c)
	}
	return c
}

// db is a valid Database: a cluster-scoped object whose database name is
// its own name, on the instance "instance".
func db(mut func(*v1alpha1.Database)) *v1alpha1.Database {
	name := uniq("app")
	d := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: name}}
	d.Spec.ForProvider.Database = name
	d.Spec.ProviderConfigReference = &xpv2.Reference{Name: "instance"}
	if mut != nil {
		mut(d)
	}
	return d
}

// uid is a Tenant UID, unique within the test run.
func uid() string { seq++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", seq) }

// dynamic is a valid dynamic DatabaseBinding: a new database "netbox" on
// the instance "instance".
func dynamic(mut func(*v1alpha1.DatabaseBinding)) *v1alpha1.DatabaseBinding {
	b := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uniq("binding-")}}
	b.Spec.ForProvider.Tenant = v1alpha1.TenantReference{Name: "netbox", UID: uid()}
	b.Spec.ForProvider.Database = ptr.To("netbox")
	b.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "instance"}
	if mut != nil {
		mut(b)
	}
	return b
}

// static is a valid static DatabaseBinding: it binds the existing Database
// "netbox-db" and names no instance.
func static(mut func(*v1alpha1.DatabaseBinding)) *v1alpha1.DatabaseBinding {
	b := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uniq("binding-")}}
	b.Spec.ForProvider.Tenant = v1alpha1.TenantReference{Name: "netbox", UID: uid()}
	b.Spec.ForProvider.DatabaseRef = ptr.To("netbox-db")
	if mut != nil {
		mut(b)
	}
	return b
}

// without is obj as sent, with the field at path left out: for the fields
// the Go types always send (no omitempty).
func without(t *testing.T, obj client.Object, gvk schema.GroupVersionKind, path ...string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, path...)
	return u
}

// wantRejected asserts that err is an admission rejection naming field and
// containing every one of msgs.
func wantRejected(t *testing.T, err error, field string, msgs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want a rejection naming %s", field)
	}
	s := err.Error()
	if !strings.Contains(s, "is invalid") || !strings.Contains(s, field+":") {
		t.Errorf("rejection does not name field %s: %s", field, s)
	}
	for _, m := range msgs {
		if !strings.Contains(s, m) {
			t.Errorf("rejection lacks %q: %s", m, s)
		}
	}
}

func TestClusterProviderConfigDefaults(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	obj := cpc(nil)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("valid ClusterProviderConfig rejected: %v", err)
	}
	want := v1alpha1.ProviderConfigSpec{
		Endpoint: v1alpha1.Endpoint{Host: "postgresql.home.arpa", Hostaddr: "192.0.2.10", Port: 5432, Database: "postgres", SSLMode: v1alpha1.SSLModeVerifyFull},
		Credentials: v1alpha1.Credentials{
			Source:      v1alpha1.CredentialsSourceSecret,
			SecretRef:   v1alpha1.SecretReference{Namespace: "crossplane-system", Name: "admin"},
			UsernameKey: "username",
			PasswordKey: "password",
		},
		DefaultReclaimPolicy: v1alpha1.ReclaimRetain,
		UnhardenedTemplate1:  v1alpha1.Template1Refuse,
	}
	if diff := cmp.Diff(want, obj.Spec); diff != "" {
		t.Errorf("defaults: -want +got:\n%s", diff)
	}
}

// TestClusterProviderConfigWithoutHostaddr: a managed service's endpoint is
// a DNS name only; hostaddr may be left out.
func TestClusterProviderConfigWithoutHostaddr(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	obj := cpc(func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Hostaddr = "" })
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("a ClusterProviderConfig without hostaddr was rejected: %v", err)
	}
	if obj.Spec.Endpoint.Hostaddr != "" {
		t.Errorf("hostaddr = %q", obj.Spec.Endpoint.Hostaddr)
	}
}

// TestClusterProviderConfigKeepsExplicitValues: an IPv6 hostaddr, another
// sslMode and the Delete reclaim policy are kept as written.
func TestClusterProviderConfigKeepsExplicitValues(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	obj := cpc(func(c *v1alpha1.ClusterProviderConfig) {
		c.Spec.Endpoint = v1alpha1.Endpoint{Host: "localhost", Hostaddr: "::1", SSLMode: v1alpha1.SSLModeVerifyCA}
		c.Spec.DefaultReclaimPolicy = v1alpha1.ReclaimDelete
	})
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("valid ClusterProviderConfig rejected: %v", err)
	}
	want := v1alpha1.Endpoint{Host: "localhost", Hostaddr: "::1", Port: 5432, Database: "postgres", SSLMode: v1alpha1.SSLModeVerifyCA}
	if diff := cmp.Diff(want, obj.Spec.Endpoint); diff != "" {
		t.Errorf("endpoint: -want +got:\n%s", diff)
	}
	if obj.Spec.DefaultReclaimPolicy != v1alpha1.ReclaimDelete {
		t.Errorf("defaultReclaimPolicy = %q, want Delete", obj.Spec.DefaultReclaimPolicy)
	}
}

func TestClusterProviderConfigRejectsBadInput(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		mut   func(*v1alpha1.ClusterProviderConfig)
		field string
		msgs  []string
	}{
		"HostNotADNSName":    {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Host = "bad host!" }, field: "spec.endpoint.host", msgs: []string{"should match"}},
		"HostaddrIsAName":    {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Hostaddr = "db.example.com" }, field: "spec.endpoint.hostaddr", msgs: []string{"IPv4 or IPv6 literal"}},
		"HostaddrIsACIDR":    {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Hostaddr = "192.0.2.0/24" }, field: "spec.endpoint.hostaddr", msgs: []string{"IPv4 or IPv6 literal"}},
		"PortZero":           {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Port = -1 }, field: "spec.endpoint.port", msgs: []string{"greater than or equal to 1"}},
		"PortTooLarge":       {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Port = 65536 }, field: "spec.endpoint.port", msgs: []string{"less than or equal to 65535"}},
		"UnknownSSLMode":     {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.SSLMode = "prefer" }, field: "spec.endpoint.sslMode", msgs: []string{"Unsupported value", "verify-full"}},
		"AdminDatabaseCase":  {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Database = "Postgres" }, field: "spec.endpoint.database", msgs: []string{"should match"}},
		"SecretNamespaceGap": {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Credentials.SecretRef.Namespace = "" }, field: "spec.credentials.secretRef.namespace", msgs: []string{"required for a ClusterProviderConfig"}},
		"UnknownSource":      {mut: func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Credentials.Source = "Environment" }, field: "spec.credentials.source", msgs: []string{"Unsupported value"}},
		"UnknownDefaultReclaimPolicy": {
			mut:   func(c *v1alpha1.ClusterProviderConfig) { c.Spec.DefaultReclaimPolicy = "Recycle" },
			field: "spec.defaultReclaimPolicy", msgs: []string{"Unsupported value", `"Retain"`, `"Delete"`},
		},
		"UnknownUnhardenedTemplate1": {
			mut:   func(c *v1alpha1.ClusterProviderConfig) { c.Spec.UnhardenedTemplate1 = "Ignore" },
			field: "spec.unhardenedTemplate1", msgs: []string{"Unsupported value", `"Refuse"`, `"Warn"`},
		},
		"NegativeMaxTenants": {
			mut: func(c *v1alpha1.ClusterProviderConfig) {
				c.Spec.Namespaces = &v1alpha1.NamespacePolicy{MaxTenants: ptr.To[int32](-1)}
			},
			field: "spec.namespaces.maxTenants", msgs: []string{"greater than or equal to 0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			wantRejected(t, c.Create(ctx, cpc(tc.mut)), tc.field, tc.msgs...)
		})
	}
}

// TestDatabaseDefaults: a Database keeps its data by default (Retain), the
// provider is called on deletion (Delete in the management policies), and
// nothing names a server or a claim for it.
func TestDatabaseDefaults(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	d := db(nil)
	if err := c.Create(ctx, d); err != nil {
		t.Fatalf("valid Database rejected: %v", err)
	}
	want := xpv2.ManagementPolicies{
		xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate,
		xpv2.ManagementActionLateInitialize, xpv2.ManagementActionDelete,
	}
	if diff := cmp.Diff(want, d.GetManagementPolicies()); diff != "" {
		t.Errorf("default managementPolicies: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(v1alpha1.DefaultManagementPolicies, d.GetManagementPolicies()); diff != "" {
		t.Errorf("CRD default differs from v1alpha1.DefaultManagementPolicies: -go +crd:\n%s", diff)
	}
	if d.Spec.ReclaimPolicy != v1alpha1.ReclaimRetain {
		t.Errorf("default reclaimPolicy = %q, want Retain", d.Spec.ReclaimPolicy)
	}
	if d.Spec.ClaimRef != nil {
		t.Errorf("default claimRef = %+v, want none", d.Spec.ClaimRef)
	}
	// Crossplane's own default of the legacy field is admitted.
	if d.Spec.DeletionPolicy != xpv2.DeletionDelete {
		t.Errorf("default deletionPolicy = %q, want Crossplane's Delete", d.Spec.DeletionPolicy)
	}
	if diff := cmp.Diff(&xpv2.Reference{Name: "instance"}, d.GetProviderConfigReference()); diff != "" {
		t.Errorf("providerConfigRef: -want +got:\n%s", diff)
	}
}

func TestDatabaseAcceptsValidInput(t *testing.T) {
	testenv.Need(t)
	cases := map[string]func(*v1alpha1.Database){
		"ReclaimDelete": func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete },
		"ReclaimDeleteWithAllPolicies": func(d *v1alpha1.Database) {
			d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
			d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionAll}
		},
		"ReclaimRetainWithoutDeletePolicy": func(d *v1alpha1.Database) {
			d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate}
		},
		"Import": func(d *v1alpha1.Database) {
			d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
			d.Spec.ForProvider.CredentialPath = ptr.To("legacy/app")
			d.Spec.ForProvider.LoginRole = ptr.To("app_owner")
		},
		"Extensions": func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm", "citext"} },
		"ReservedForATenant": func(d *v1alpha1.Database) {
			d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox"}
		},
		"BoundToATenant": func(d *v1alpha1.Database) {
			d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox", UID: "6f9619ff-8b86-4011-b42d-00c04fc964ff"}
		},
		"DeletionPolicyDelete": func(d *v1alpha1.Database) { d.Spec.DeletionPolicy = xpv2.DeletionDelete },
		// A rotation ID is any value of 1 to 63 characters.
		"CredentialRotation": func(d *v1alpha1.Database) {
			d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: "after incident #42 / 2026-05", TerminateSessions: true}
		},
		"CredentialRotationLongestID": func(d *v1alpha1.Database) {
			d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: strings.Repeat("r", 63)}
		},
		"DataRoles": func(d *v1alpha1.Database) {
			d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{
				{Name: "app", Access: v1alpha1.DataReadWrite, Limits: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](20)}},
				{Name: "report", Access: v1alpha1.DataReadOnly},
			}
		},
		// <loginRole>_<name>_1 is exactly 63 characters.
		"DataRoleLongestName": func(d *v1alpha1.Database) {
			d.Spec.ForProvider.LoginRole = ptr.To(strings.Repeat("o", 45))
			d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: strings.Repeat("n", 15), Access: v1alpha1.DataReadOnly}}
		},
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			d := db(mut)
			sent := d.Spec.DeepCopy()
			if err := c.Create(ctx, d); err != nil {
				t.Fatalf("valid Database rejected: %v", err)
			}
			if diff := cmp.Diff(sent.ForProvider, d.Spec.ForProvider); diff != "" {
				t.Errorf("forProvider: -sent +stored:\n%s", diff)
			}
			if diff := cmp.Diff(sent.ClaimRef, d.Spec.ClaimRef); diff != "" {
				t.Errorf("claimRef: -sent +stored:\n%s", diff)
			}
			if diff := cmp.Diff(sent.CredentialRotation, d.Spec.CredentialRotation); diff != "" {
				t.Errorf("credentialRotation: -sent +stored:\n%s", diff)
			}
			if sent.ReclaimPolicy != "" && sent.ReclaimPolicy != d.Spec.ReclaimPolicy {
				t.Errorf("reclaimPolicy = %q, sent %q", d.Spec.ReclaimPolicy, sent.ReclaimPolicy)
			}
		})
	}
}

func TestDatabaseRejectsBadInput(t *testing.T) {
	testenv.Need(t)
	withoutDelete := xpv2.ManagementPolicies{
		xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize,
	}
	cases := map[string]struct {
		mut   func(*v1alpha1.Database)
		field string
		msgs  []string
	}{
		"NoProviderConfigRef": {
			// No default names a server: a Database must name its own.
			mut:   func(d *v1alpha1.Database) { d.Spec.ProviderConfigReference = nil },
			field: "spec.providerConfigRef", msgs: []string{"must name the ClusterProviderConfig"},
		},
		"EmptyProviderConfigRefName": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ProviderConfigReference = &xpv2.Reference{} },
			field: "spec.providerConfigRef", msgs: []string{"must name the ClusterProviderConfig"},
		},
		"EmptyDatabase": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "" },
			field: "spec.forProvider.database", msgs: []string{"at least 1"},
		},
		"DatabaseNotAnIdentifier": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "Bad-Name" },
			field: "spec.forProvider.database", msgs: []string{"should match"},
		},
		"DatabaseTooLong": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "a" + strings.Repeat("b", 63) },
			field: "spec.forProvider.database", msgs: []string{"may not be more than 63"},
		},
		"SystemDatabase": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "template1" },
			field: "spec.forProvider.database", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"DatabasePostgres": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "postgres" },
			field: "spec.forProvider.database", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"DatabasePublic": {
			// The login role defaults to the database name.
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "public" },
			field: "spec.forProvider.database", msgs: []string{"the login role defaults to the database name"},
		},
		"DatabaseNone": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "none" },
			field: "spec.forProvider.database", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"DatabaseReservedAsARole": {
			// pg_* role names are reserved by the server.
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "pg_catalog" },
			field: "spec.forProvider.database", msgs: []string{"must not start with pg_"},
		},
		"LoginRolePublic": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("public") },
			field: "spec.forProvider.loginRole", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"LoginRolePostgres": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("postgres") },
			field: "spec.forProvider.loginRole", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"LoginRoleNotAnIdentifier": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("app;drop") },
			field: "spec.forProvider.loginRole", msgs: []string{"should match"},
		},
		"LoginRoleTooLong": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To(strings.Repeat("r", 64)) },
			field: "spec.forProvider.loginRole", msgs: []string{"may not be more than 63"},
		},
		"LoginRoleReserved": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("pg_monitor") },
			field: "spec.forProvider.loginRole", msgs: []string{"start with pg_"},
		},
		"ExtensionNotAnIdentifier": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm", "uuid-ossp"} },
			field: "spec.forProvider.extensions[1]", msgs: []string{"should match"},
		},
		"ExtensionTwice": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm", "pg_trgm"} },
			field: "spec.forProvider.extensions[1]", msgs: []string{"Duplicate value"},
		},
		"TooManyExtensions": {
			mut: func(d *v1alpha1.Database) {
				for i := range 65 {
					d.Spec.ForProvider.Extensions = append(d.Spec.ForProvider.Extensions, fmt.Sprintf("ext%d", i))
				}
			},
			field: "spec.forProvider.extensions", msgs: []string{"must have at most 64 items"},
		},
		"CredentialPathDotDot": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("tenants/../other") },
			field: "spec.forProvider.credentialPath", msgs: []string{"'..' segments"},
		},
		"CredentialPathAbsolute": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("/tenants/app") },
			field: "spec.forProvider.credentialPath", msgs: []string{"should match"},
		},
		"CredentialPathEmptySegment": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("tenants//app") },
			field: "spec.forProvider.credentialPath", msgs: []string{"should match"},
		},
		"CredentialPathAPILayer": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("data/tenants/app") },
			field: "spec.forProvider.credentialPath", msgs: []string{"leave out the data/ or metadata/ API prefix"},
		},
		"UnknownManagementPolicy": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ManagementPolicies = xpv2.ManagementPolicies{"Drop"} },
			field: "spec.managementPolicies[0]", msgs: []string{"Unsupported value"},
		},
		"UnknownReclaimPolicy": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = "Recycle" },
			field: "spec.reclaimPolicy", msgs: []string{"Unsupported value", `"Retain"`, `"Delete"`},
		},
		"ReclaimDeleteWithoutDeletePolicy": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
				d.Spec.ManagementPolicies = withoutDelete
			},
			field: "spec.reclaimPolicy", msgs: []string{`needs Delete (or "*") in spec.managementPolicies`},
		},
		"ReclaimDeleteObserveOnly": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
				d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
			},
			field: "spec.reclaimPolicy", msgs: []string{`needs Delete (or "*") in spec.managementPolicies`},
		},
		"DeletionPolicyOrphan": {
			mut:   func(d *v1alpha1.Database) { d.Spec.DeletionPolicy = xpv2.DeletionOrphan },
			field: "spec.deletionPolicy", msgs: []string{"Orphan is not supported", "use spec.reclaimPolicy instead"},
		},
		"WriteConnectionSecretToRef": {
			// crossplane-runtime would write the connection details to a
			// Kubernetes Secret.
			mut: func(d *v1alpha1.Database) {
				d.Spec.WriteConnectionSecretToReference = &xpv2.SecretReference{Namespace: "crossplane-system", Name: "app-credential"}
			},
			field: "spec.writeConnectionSecretToRef",
			msgs:  []string{"never writes a credential to a Kubernetes Secret", "the credential is in OpenBao"},
		},
		"UnknownDeletionPolicy": {
			mut:   func(d *v1alpha1.Database) { d.Spec.DeletionPolicy = "Keep" },
			field: "spec.deletionPolicy", msgs: []string{"Unsupported value"},
		},
		"ClaimRefEmptyNamespace": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ClaimRef = &v1alpha1.ClaimReference{Name: "netbox"} },
			field: "spec.claimRef.namespace", msgs: []string{"at least 1"},
		},
		"ClaimRefNamespaceTooLong": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: strings.Repeat("n", 64), Name: "netbox"}
			},
			field: "spec.claimRef.namespace", msgs: []string{"may not be more than 63"},
		},
		"ClaimRefEmptyName": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox"} },
			field: "spec.claimRef.name", msgs: []string{"at least 1"},
		},
		"ClaimRefNameTooLong": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: strings.Repeat("n", 254)}
			},
			field: "spec.claimRef.name", msgs: []string{"may not be more than 253"},
		},
		"ClaimRefUIDTooLong": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox", UID: strings.Repeat("u", 37)}
			},
			field: "spec.claimRef.uid", msgs: []string{"may not be more than 36"},
		},
		"CredentialRotationEmptyID": {
			mut:   func(d *v1alpha1.Database) { d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{} },
			field: "spec.credentialRotation.id", msgs: []string{"at least 1"},
		},
		"CredentialRotationIDTooLong": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: strings.Repeat("r", 64)}
			},
			field: "spec.credentialRotation.id", msgs: []string{"may not be more than 63"},
		},
		"DataRoleNameNotAName": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app_rw", Access: v1alpha1.DataReadWrite}}
			},
			field: "spec.forProvider.dataRoles[0].name", msgs: []string{"should match"},
		},
		"DataRoleNameTooLong": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: strings.Repeat("n", 16), Access: v1alpha1.DataReadWrite}}
			},
			field: "spec.forProvider.dataRoles[0].name", msgs: []string{"may not be more than 15"},
		},
		"DataRoleUnknownAccess": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: "admin"}}
			},
			field: "spec.forProvider.dataRoles[0].access", msgs: []string{"readWrite", "readOnly"},
		},
		"DataRoleTwice": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite}, {Name: "app", Access: v1alpha1.DataReadOnly}}
			},
			field: "spec.forProvider.dataRoles[1]", msgs: []string{"Duplicate value"},
		},
		"DataRoleLoginRoleTooLong": {
			mut: func(d *v1alpha1.Database) {
				d.Spec.ForProvider.LoginRole = ptr.To(strings.Repeat("o", 46))
				d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: strings.Repeat("n", 15), Access: v1alpha1.DataReadOnly}}
			},
			field: "spec.forProvider.dataRoles", msgs: []string{"must fit PostgreSQL's 63 characters"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			wantRejected(t, c.Create(ctx, db(tc.mut)), tc.field, tc.msgs...)
		})
	}
}

// TestDatabaseRejectsMissingFields: fields the Go types always send, left
// out as kubectl would.
func TestDatabaseRejectsMissingFields(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		mut   func(*v1alpha1.Database)
		path  []string
		field string
	}{
		"Database": {path: []string{"spec", "forProvider", "database"}, field: "spec.forProvider.database"},
		"ClaimRefName": {mut: func(d *v1alpha1.Database) {
			d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox"}
		}, path: []string{"spec", "claimRef", "name"}, field: "spec.claimRef.name"},
		"ClaimRefNamespace": {mut: func(d *v1alpha1.Database) {
			d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox"}
		}, path: []string{"spec", "claimRef", "namespace"}, field: "spec.claimRef.namespace"},
		"CredentialRotationID": {mut: func(d *v1alpha1.Database) {
			d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: "r1", TerminateSessions: true}
		}, path: []string{"spec", "credentialRotation", "id"}, field: "spec.credentialRotation.id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			u := without(t, db(tc.mut), v1alpha1.DatabaseGroupVersionKind, tc.path...)
			wantRejected(t, c.Create(ctx, u), tc.field, "Required value")
		})
	}
}

func TestDatabaseRejectsUpdates(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		initial func(*v1alpha1.Database)
		change  func(*v1alpha1.Database)
		field   string
		msg     string
	}{
		"Database": {
			change: func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "second" },
			field:  "spec.forProvider.database", msg: "immutable",
		},
		"DatabaseEmptied": {
			change: func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "" },
			field:  "spec.forProvider.database", msg: "immutable",
		},
		"LoginRole": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("owner_a") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("owner_b") },
			field:   "spec.forProvider.loginRole", msg: "immutable once set",
		},
		"LoginRoleRemoved": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("owner_a") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = nil },
			field:   "spec.forProvider.loginRole", msg: "immutable once set",
		},
		"CredentialPath": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("legacy/app") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("legacy/other") },
			field:   "spec.forProvider.credentialPath", msg: "immutable once set",
		},
		"CredentialPathRemoved": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("legacy/app") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = nil },
			field:   "spec.forProvider.credentialPath", msg: "immutable once set",
		},
		"DataRoleAccess": {
			initial: func(d *v1alpha1.Database) {
				d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadOnly}}
			},
			change: func(d *v1alpha1.Database) { d.Spec.ForProvider.DataRoles[0].Access = v1alpha1.DataReadWrite },
			field:  "spec.forProvider.dataRoles[0].access", msg: "access is fixed",
		},
		"Options": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.Options = &v1alpha1.DatabaseOptions{Locale: "C"} },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.Options.Locale = "C.UTF-8" },
			field:   "spec.forProvider.options", msg: "immutable",
		},
		"OptionsAdded": {
			change: func(d *v1alpha1.Database) { d.Spec.ForProvider.Options = &v1alpha1.DatabaseOptions{Locale: "C"} },
			field:  "spec.forProvider.options", msg: "immutable",
		},
		"OptionsRemoved": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.Options = &v1alpha1.DatabaseOptions{Locale: "C"} },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.Options = nil },
			field:   "spec.forProvider.options", msg: "immutable",
		},
		"ProviderConfigRef": {
			change: func(d *v1alpha1.Database) { d.Spec.ProviderConfigReference = &xpv2.Reference{Name: "other"} },
			field:  "spec.providerConfigRef", msg: "immutable once set",
		},
		"ProviderConfigRefRemoved": {
			change: func(d *v1alpha1.Database) { d.Spec.ProviderConfigReference = nil },
			field:  "spec.providerConfigRef", msg: "immutable once set",
		},
		"ExtensionRemoved": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm", "citext"} },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"citext"} },
			field:   "spec.forProvider.extensions", msg: "append-only",
		},
		"AllExtensionsRemoved": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm"} },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = nil },
			field:   "spec.forProvider.extensions", msg: "append-only",
		},
		"DeletePolicyDroppedUnderReclaimDelete": {
			initial: func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete },
			change: func(d *v1alpha1.Database) {
				d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate}
			},
			field: "spec.reclaimPolicy", msg: "needs Delete",
		},
		"ReclaimDeleteWithoutDeletePolicy": {
			initial: func(d *v1alpha1.Database) {
				d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
			},
			change: func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete },
			field:  "spec.reclaimPolicy", msg: "needs Delete",
		},
		"ClaimPresetForAnotherTenantKeepingTheOldUID": {
			initial: func(d *v1alpha1.Database) {
				d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox", UID: "6f9619ff-8b86-4011-b42d-00c04fc964ff"}
			},
			change: func(d *v1alpha1.Database) { d.Spec.ClaimRef.Namespace, d.Spec.ClaimRef.Name = "erp", "erp" },
			field:  "spec.claimRef.uid", msg: "keeps the uid of the Tenant it named",
		},
		"ClaimRenamedKeepingTheOldUID": {
			initial: func(d *v1alpha1.Database) {
				d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox", UID: "6f9619ff-8b86-4011-b42d-00c04fc964ff"}
			},
			change: func(d *v1alpha1.Database) { d.Spec.ClaimRef.Name = "netbox-next" },
			field:  "spec.claimRef.uid", msg: "remove spec.claimRef.uid",
		},
		"DeletionPolicyOrphan": {
			change: func(d *v1alpha1.Database) { d.Spec.DeletionPolicy = xpv2.DeletionOrphan },
			field:  "spec.deletionPolicy", msg: "use spec.reclaimPolicy instead",
		},
		"WriteConnectionSecretToRefAdded": {
			change: func(d *v1alpha1.Database) {
				d.Spec.WriteConnectionSecretToReference = &xpv2.SecretReference{Namespace: "default", Name: "s"}
			},
			field: "spec.writeConnectionSecretToRef", msg: "never writes a credential to a Kubernetes Secret",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			d := db(tc.initial)
			if err := c.Create(ctx, d); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.change(d)
			// unguarded-update: only the kube-apiserver runs in these tests (no controller): nothing else writes the Database the test made
			wantRejected(t, c.Update(ctx, d), tc.field, tc.msg)
		})
	}
}

func TestDatabaseAllowedChanges(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	d := db(func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm"} })
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func(*v1alpha1.Database)
	}{
		// Appending extensions and reordering them.
		{"AppendExtension", func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"citext", "pg_trgm"} }},
		// Filling in what was left unset (the provider late-initializes
		// loginRole).
		{"SetLoginRole", func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To(d.Spec.ForProvider.Database) }},
		{"SetCredentialPath", func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("legacy/" + d.Name) }},
		{"ManagementPolicies", func(d *v1alpha1.Database) {
			d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionUpdate}
		}},
		{"ReclaimDelete", func(d *v1alpha1.Database) {
			d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionAll}
			d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
		}},
		{"ReclaimRetain", func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain }},
		// An admin reserves the Database, the binder records the Tenant's
		// UID, an admin clears the claim of a Released Database.
		{"ReserveClaim", func(d *v1alpha1.Database) {
			d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox"}
		}},
		{"BindClaim", func(d *v1alpha1.Database) { d.Spec.ClaimRef.UID = "6f9619ff-8b86-4011-b42d-00c04fc964ff" }},
		// The rebind: the claim preset for another Tenant, the old UID
		// removed with it; the binder records the new one.
		{"PresetClaimForAnotherTenant", func(d *v1alpha1.Database) {
			d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "erp", Name: "erp"}
		}},
		{"BindPresetClaim", func(d *v1alpha1.Database) { d.Spec.ClaimRef.UID = "7a9619ff-8b86-4011-b42d-00c04fc964ff" }},
		{"ClearClaim", func(d *v1alpha1.Database) { d.Spec.ClaimRef = nil }},
		// Requesting a rotation, another one, and removing the field.
		{"RequestRotation", func(d *v1alpha1.Database) {
			d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: "r1"}
		}},
		{"RequestAnotherRotation", func(d *v1alpha1.Database) {
			d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: "r2", TerminateSessions: true}
		}},
		{"RemoveRotation", func(d *v1alpha1.Database) { d.Spec.CredentialRotation = nil }},
	}
	for _, s := range steps {
		s.change(d)
		want := d.Spec.DeepCopy()
		// unguarded-update: only the kube-apiserver runs in these tests (no controller): nothing else writes the Database the test made
		if err := c.Update(ctx, d); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(want, &d.Spec); diff != "" {
			t.Errorf("%s: spec after update: -want +got:\n%s", s.name, diff)
		}
	}
}

func TestDatabaseRejectsBadStatus(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		mut   func(*v1alpha1.DatabaseStatus)
		field string
		msg   string
	}{
		"UnknownBindingPhase": {
			mut:   func(s *v1alpha1.DatabaseStatus) { s.Binding.Phase = "Lost" },
			field: "status.binding.phase", msg: "Unsupported value",
		},
		"UnknownPhase": {
			mut:   func(s *v1alpha1.DatabaseStatus) { s.AtProvider.Phase = "Done" },
			field: "status.atProvider.phase", msg: "Unsupported value",
		},
		"ReleasedClaimWithoutNamespace": {
			mut: func(s *v1alpha1.DatabaseStatus) {
				s.Binding.Phase = v1alpha1.BindingReleased
				s.Binding.ReleasedClaim = &v1alpha1.ClaimReference{Name: "netbox"}
			},
			field: "status.binding.releasedClaim.namespace", msg: "at least 1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			d := db(nil)
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			tc.mut(&d.Status)
			// unguarded-update: only the kube-apiserver runs in these tests (no controller): nothing else writes the Database the test made
			wantRejected(t, c.Status().Update(ctx, d), tc.field, tc.msg)
		})
	}
	t.Run("Released", func(t *testing.T) {
		ctx, c := setup(t)
		d := db(nil)
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		d.Status.Binding = v1alpha1.BindingStatus{
			Phase: v1alpha1.BindingReleased, Claim: "netbox/netbox",
			ReleasedClaim: &v1alpha1.ClaimReference{Namespace: "netbox", Name: "netbox", UID: "6f9619ff-8b86-4011-b42d-00c04fc964ff"},
		}
		// unguarded-update: only the kube-apiserver runs in these tests (no controller): nothing else writes the Database the test made
		if err := c.Status().Update(ctx, d); err != nil {
			t.Errorf("a Released status was rejected: %v", err)
		}
	})
}

func TestDatabaseBindingAcceptsValidInput(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		obj *v1alpha1.DatabaseBinding
	}{
		"Dynamic": {obj: dynamic(nil)},
		"DynamicWithLoginRoleAndExtensions": {obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
			b.Spec.ForProvider.LoginRole = ptr.To("netbox_owner")
			b.Spec.ForProvider.Extensions = []string{"pg_trgm", "citext"}
		})},
		// Names no server: the binder takes the namespace's default.
		"DynamicOnTheDefaultServer": {obj: dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ProviderConfigReference = nil })},
		"Static":                    {obj: static(nil)},
		"StaticWithExtensions":      {obj: static(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = []string{"pg_trgm"} })},
		// The one value spec.managementPolicies takes, written out.
		"AllManagementPolicies": {obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
			b.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionAll}
		})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			sent := tc.obj.Spec.DeepCopy()
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Fatalf("valid DatabaseBinding rejected: %v", err)
			}
			if diff := cmp.Diff(sent.ForProvider, tc.obj.Spec.ForProvider); diff != "" {
				t.Errorf("forProvider: -sent +stored:\n%s", diff)
			}
			// No default names an instance: a static binding takes the
			// bound Database's.
			if diff := cmp.Diff(sent.ProviderConfigReference, tc.obj.Spec.ProviderConfigReference); diff != "" {
				t.Errorf("providerConfigRef: -sent +stored:\n%s", diff)
			}
			// What the Composition leaves unset: every verb, Delete (the
			// release) among them.
			if diff := cmp.Diff(xpv2.ManagementPolicies{xpv2.ManagementActionAll}, tc.obj.Spec.ManagementPolicies); diff != "" {
				t.Errorf("managementPolicies: -want +stored:\n%s", diff)
			}
		})
	}
}

func TestDatabaseBindingRejectsBadInput(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		obj   *v1alpha1.DatabaseBinding
		field string
		msgs  []string
	}{
		"DynamicWithProviderConfigKind": {
			obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "instance"}
			}),
			field: "spec.providerConfigRef", msgs: []string{"a dynamic binding names its instance", "kind ClusterProviderConfig"},
		},
		"DynamicWithoutDatabase": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = nil }),
			field: "spec.forProvider.database", msgs: []string{"a dynamic binding needs spec.forProvider.database"},
		},
		"StaticWithDatabase": {
			obj:   static(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To("netbox") }),
			field: "spec.forProvider.databaseRef", msgs: []string{"leave database and loginRole unset"},
		},
		"StaticWithLoginRole": {
			obj:   static(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = ptr.To("netbox") }),
			field: "spec.forProvider.databaseRef", msgs: []string{"leave database and loginRole unset"},
		},
		"EmptyDatabaseRef": {
			obj:   static(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.DatabaseRef = ptr.To("") }),
			field: "spec.forProvider.databaseRef", msgs: []string{"at least 1"},
		},
		"DatabaseRefTooLong": {
			obj:   static(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.DatabaseRef = ptr.To(strings.Repeat("d", 254)) }),
			field: "spec.forProvider.databaseRef", msgs: []string{"may not be more than 253"},
		},
		"DatabasePgPrefix": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To("pg_netbox") }),
			field: "spec.forProvider.database", msgs: []string{"must not start with pg_"},
		},
		"DatabasePostgres": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To("postgres") }),
			field: "spec.forProvider.database", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"DatabaseTemplate0": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To("template0") }),
			field: "spec.forProvider.database", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"DatabasePublic": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To("public") }),
			field: "spec.forProvider.database", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"DatabaseNotAnIdentifier": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To("net-box") }),
			field: "spec.forProvider.database", msgs: []string{"should match"},
		},
		"DatabaseTooLong": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To(strings.Repeat("d", 64)) }),
			field: "spec.forProvider.database", msgs: []string{"may not be more than 63"},
		},
		"LoginRoleReserved": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = ptr.To("pg_monitor") }),
			field: "spec.forProvider.loginRole", msgs: []string{"must not start with pg_"},
		},
		"LoginRoleNone": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = ptr.To("none") }),
			field: "spec.forProvider.loginRole", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"LoginRoleNotAnIdentifier": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = ptr.To("Owner") }),
			field: "spec.forProvider.loginRole", msgs: []string{"should match"},
		},
		"ExtensionNotAnIdentifier": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = []string{"uuid-ossp"} }),
			field: "spec.forProvider.extensions[0]", msgs: []string{"should match"},
		},
		"ExtensionTwice": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = []string{"citext", "citext"} }),
			field: "spec.forProvider.extensions[1]", msgs: []string{"Duplicate value"},
		},
		"TenantEmptyName": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Tenant.Name = "" }),
			field: "spec.forProvider.tenant.name", msgs: []string{"at least 1"},
		},
		"TenantEmptyUID": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Tenant.UID = "" }),
			field: "spec.forProvider.tenant.uid", msgs: []string{"at least 1"},
		},
		"TenantUIDTooLong": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Tenant.UID = strings.Repeat("u", 37) }),
			field: "spec.forProvider.tenant.uid", msgs: []string{"may not be more than 36"},
		},
		"UnknownManagementPolicy": {
			obj:   dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ManagementPolicies = xpv2.ManagementPolicies{"Drop"} }),
			field: "spec.managementPolicies[0]", msgs: []string{"Unsupported value"},
		},
		"WriteConnectionSecretToRef": {
			obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "netbox-credential"}
			}),
			field: "spec.writeConnectionSecretToRef",
			msgs:  []string{"never writes a credential to a Kubernetes Secret", "the credential is in OpenBao"},
		},
		"StaticWithWriteConnectionSecretToRef": {
			obj: static(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "netbox-credential"}
			}),
			field: "spec.writeConnectionSecretToRef",
			msgs:  []string{"never writes a credential to a Kubernetes Secret"},
		},
		// Without Delete the release is skipped and the delivery copy
		// stays; without Observe nothing is verified.
		"ManagementPoliciesWithoutDelete": {
			obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ManagementPolicies = xpv2.ManagementPolicies{
					xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize,
				}
			}),
			field: "spec.managementPolicies", msgs: []string{`always ["*"]`, "its release would be skipped"},
		},
		// netbox_ and 57 characters make 64.
		"DataRoleLoginRoleTooLong": {
			obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ForProvider.LoginRole = ptr.To(strings.Repeat("r", 50))
				b.Spec.ForProvider.DataRoles = []v1alpha1.BindingDataRole{{Name: "reporting12345", Access: v1alpha1.DataReadOnly}}
			}),
			field: "spec.forProvider.dataRoles", msgs: []string{"must fit PostgreSQL's 63 characters"},
		},
		"DataRoleBadAccess": {
			obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ForProvider.DataRoles = []v1alpha1.BindingDataRole{{Name: "app", Access: "owner"}}
			}),
			field: "spec.forProvider.dataRoles[0].access", msgs: []string{"readWrite", "readOnly"},
		},
		"ManagementPoliciesObserveOnly": {
			obj: static(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
			}),
			field: "spec.managementPolicies", msgs: []string{`always ["*"]`},
		},
		"ManagementPoliciesEveryVerb": {
			// Every verb spelled out is still not what the Composition
			// composes.
			obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ManagementPolicies = xpv2.ManagementPolicies{
					xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate,
					xpv2.ManagementActionLateInitialize, xpv2.ManagementActionDelete,
				}
			}),
			field: "spec.managementPolicies", msgs: []string{`always ["*"]`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			wantRejected(t, c.Create(ctx, tc.obj), tc.field, tc.msgs...)
		})
	}
}

// TestDatabaseBindingRejectsMissingFields: fields the Go types always send,
// left out as kubectl would.
func TestDatabaseBindingRejectsMissingFields(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		path  []string
		field string
	}{
		"Tenant":     {path: []string{"spec", "forProvider", "tenant"}, field: "spec.forProvider.tenant"},
		"TenantName": {path: []string{"spec", "forProvider", "tenant", "name"}, field: "spec.forProvider.tenant.name"},
		"TenantUID":  {path: []string{"spec", "forProvider", "tenant", "uid"}, field: "spec.forProvider.tenant.uid"},
		"ProviderConfigRefKind": {
			path: []string{"spec", "providerConfigRef", "kind"}, field: "spec.providerConfigRef.kind",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			u := without(t, dynamic(nil), v1alpha1.DatabaseBindingGroupVersionKind, tc.path...)
			wantRejected(t, c.Create(ctx, u), tc.field, "Required value")
		})
	}
}

func TestDatabaseBindingRejectsUpdates(t *testing.T) {
	testenv.Need(t)
	cases := map[string]struct {
		obj    *v1alpha1.DatabaseBinding
		change func(*v1alpha1.DatabaseBinding)
		field  string
		msg    string
	}{
		"TenantName": {
			obj:    dynamic(nil),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Tenant.Name = "other" },
			field:  "spec.forProvider.tenant", msg: "spec.forProvider.tenant is immutable",
		},
		"TenantUID": {
			// A new Tenant of the same name is another claim.
			obj:    static(nil),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Tenant.UID = uid() },
			field:  "spec.forProvider.tenant", msg: "spec.forProvider.tenant is immutable",
		},
		"DatabaseRef": {
			obj:    static(nil),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.DatabaseRef = ptr.To("other-db") },
			field:  "spec.forProvider.databaseRef", msg: "spec.forProvider.databaseRef is immutable",
		},
		"DatabaseRefRemoved": {
			obj: static(nil),
			change: func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ForProvider.DatabaseRef = nil
				b.Spec.ForProvider.Database = ptr.To("netbox")
				b.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "instance"}
			},
			field: "spec.forProvider.databaseRef", msg: "spec.forProvider.databaseRef is immutable",
		},
		"DataRoleAccess": {
			obj: dynamic(func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ForProvider.DataRoles = []v1alpha1.BindingDataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}
			}),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.DataRoles[0].Access = v1alpha1.DataReadOnly },
			field:  "spec.forProvider.dataRoles[0].access", msg: "access is fixed",
		},
		"DatabaseRefAdded": {
			obj: dynamic(nil),
			change: func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ForProvider.DatabaseRef = ptr.To("netbox-db")
			},
			field: "spec.forProvider.databaseRef", msg: "spec.forProvider.databaseRef is immutable",
		},
		"Database": {
			obj:    dynamic(nil),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = ptr.To("other") },
			field:  "spec.forProvider.database", msg: "spec.forProvider.database is immutable",
		},
		"DatabaseRemoved": {
			obj:    dynamic(nil),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Database = nil },
			field:  "spec.forProvider.database", msg: "spec.forProvider.database is immutable",
		},
		"LoginRole": {
			obj:    dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = ptr.To("owner_a") }),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = ptr.To("owner_b") },
			field:  "spec.forProvider.loginRole", msg: "spec.forProvider.loginRole is immutable",
		},
		"LoginRoleRemoved": {
			obj:    dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = ptr.To("owner_a") }),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.LoginRole = nil },
			field:  "spec.forProvider.loginRole", msg: "spec.forProvider.loginRole is immutable",
		},
		"ExtensionRemoved": {
			obj:    dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = []string{"pg_trgm", "citext"} }),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = []string{"pg_trgm"} },
			field:  "spec.forProvider.extensions", msg: "append-only",
		},
		"ManagementPoliciesDropDelete": {
			obj: dynamic(nil),
			change: func(b *v1alpha1.DatabaseBinding) {
				b.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate}
			},
			field: "spec.managementPolicies", msg: "its release would be skipped",
		},
		"WriteConnectionSecretToRefAdded": {
			obj: static(nil),
			change: func(b *v1alpha1.DatabaseBinding) {
				b.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "s"}
			},
			field: "spec.writeConnectionSecretToRef", msg: "never writes a credential to a Kubernetes Secret",
		},
		"AllExtensionsRemoved": {
			obj:    static(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = []string{"pg_trgm"} }),
			change: func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = nil },
			field:  "spec.forProvider.extensions", msg: "append-only",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.change(tc.obj)
			// unguarded-update: only the kube-apiserver runs in these tests (no controller): nothing else writes the DatabaseBinding the test made
			wantRejected(t, c.Update(ctx, tc.obj), tc.field, tc.msg)
		})
	}
}

func TestDatabaseBindingAllowedChanges(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	b := dynamic(func(b *v1alpha1.DatabaseBinding) { b.Spec.ForProvider.Extensions = []string{"pg_trgm"} })
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Appending and reordering extensions, and filling in the login role
	// left unset.
	b.Spec.ForProvider.Extensions = []string{"citext", "pg_trgm"}
	b.Spec.ForProvider.LoginRole = ptr.To("netbox_owner")
	want := b.Spec.ForProvider.DeepCopy()
	// unguarded-update: only the kube-apiserver runs in these tests (no controller): nothing else writes the DatabaseBinding the test made
	if err := c.Update(ctx, b); err != nil {
		t.Fatalf("allowed change rejected: %v", err)
	}
	if diff := cmp.Diff(want, &b.Spec.ForProvider); diff != "" {
		t.Errorf("forProvider after update: -want +got:\n%s", diff)
	}
	// Data roles are added and removed; a removed name may come back with
	// another access.
	for _, roles := range [][]v1alpha1.BindingDataRole{
		{{Name: "app", Access: v1alpha1.DataReadWrite}, {Name: "report", Access: v1alpha1.DataReadOnly}},
		{{Name: "report", Access: v1alpha1.DataReadOnly}},
		{{Name: "report", Access: v1alpha1.DataReadOnly}, {Name: "app", Access: v1alpha1.DataReadOnly}},
		nil,
	} {
		b.Spec.ForProvider.DataRoles = roles
		// unguarded-update: only the kube-apiserver runs in these tests (no controller): nothing else writes the DatabaseBinding the test made
		if err := c.Update(ctx, b); err != nil {
			t.Fatalf("data roles %v rejected: %v", roles, err)
		}
	}
}

// Every example under examples/ is accepted as written.
func TestExamplesAreAccepted(t *testing.T) {
	testenv.Need(t)
	ctx, c := setup(t)
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 7 {
		t.Fatalf("found %d example objects, want at least 7", len(objs))
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			if err := env.Kube.EnsureNamespace(ctx, o.GetName()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		if err := c.Create(ctx, o, client.DryRunAll); err != nil {
			t.Errorf("example %s %s rejected: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
