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

func db(mut func(*v1alpha1.Database)) *v1alpha1.Database {
	d := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uniq("app")}}
	if mut != nil {
		mut(d)
	}
	return d
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
	}
	if diff := cmp.Diff(want, obj.Spec); diff != "" {
		t.Errorf("defaults: -want +got:\n%s", diff)
	}
}

// TestClusterProviderConfigWithoutHostaddr: a managed service's endpoint is
// a DNS name only; hostaddr may be left out.
func TestClusterProviderConfigWithoutHostaddr(t *testing.T) {
	ctx, c := setup(t)
	obj := cpc(func(c *v1alpha1.ClusterProviderConfig) { c.Spec.Endpoint.Hostaddr = "" })
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("a ClusterProviderConfig without hostaddr was rejected: %v", err)
	}
	if obj.Spec.Endpoint.Hostaddr != "" {
		t.Errorf("hostaddr = %q", obj.Spec.Endpoint.Hostaddr)
	}
}

func TestClusterProviderConfigRejectsBadInput(t *testing.T) {
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
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			wantRejected(t, c.Create(ctx, cpc(tc.mut)), tc.field, tc.msgs...)
		})
	}
}

func TestProviderConfigAcceptsIPv6AndOwnNamespace(t *testing.T) {
	ctx, c := setup(t)
	pc := &v1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uniq("pc-")},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: "localhost", Hostaddr: "::1", SSLMode: v1alpha1.SSLModeVerifyCA},
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Name: "admin"}},
		},
	}
	if err := c.Create(ctx, pc); err != nil {
		t.Fatalf("valid ProviderConfig rejected: %v", err)
	}
	if pc.Spec.Endpoint.Port != 5432 || pc.Spec.Endpoint.SSLMode != v1alpha1.SSLModeVerifyCA {
		t.Errorf("port %d sslMode %s, want 5432 verify-ca", pc.Spec.Endpoint.Port, pc.Spec.Endpoint.SSLMode)
	}
}

func TestDatabaseDefaultsKeepData(t *testing.T) {
	ctx, c := setup(t)
	d := db(nil)
	if err := c.Create(ctx, d); err != nil {
		t.Fatalf("valid Database rejected: %v", err)
	}
	want := xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize}
	if diff := cmp.Diff(want, d.GetManagementPolicies()); diff != "" {
		t.Errorf("default managementPolicies: -want +got:\n%s", diff)
	}
	for _, p := range d.GetManagementPolicies() {
		if p == xpv2.ManagementActionDelete || p == xpv2.ManagementActionAll {
			t.Errorf("default managementPolicies contain %q: deleting the object would drop data", p)
		}
	}
	if diff := cmp.Diff(v1alpha1.DefaultManagementPolicies, d.GetManagementPolicies()); diff != "" {
		t.Errorf("CRD default differs from v1alpha1.DefaultManagementPolicies: -go +crd:\n%s", diff)
	}
	if diff := cmp.Diff(&xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}, d.GetProviderConfigReference()); diff != "" {
		t.Errorf("default providerConfigRef: -want +got:\n%s", diff)
	}

	// An explicit opt-in is kept as written.
	d2 := db(func(d *v1alpha1.Database) {
		d.SetManagementPolicies(xpv2.ManagementPolicies{xpv2.ManagementActionAll})
	})
	if err := c.Create(ctx, d2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(xpv2.ManagementPolicies{xpv2.ManagementActionAll}, d2.GetManagementPolicies()); diff != "" {
		t.Errorf("explicit managementPolicies: -want +got:\n%s", diff)
	}
}

func TestDatabaseRejectsBadInput(t *testing.T) {
	cases := map[string]struct {
		mut   func(*v1alpha1.Database)
		field string
		msgs  []string
	}{
		"NameNotAnIdentifier": {
			mut:   func(d *v1alpha1.Database) { d.Name = "my-app" },
			field: "spec.forProvider.database", msgs: []string{"metadata.name is not a valid PostgreSQL identifier"},
		},
		"DatabaseNotAnIdentifier": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = ptr.To("Bad-Name") },
			field: "spec.forProvider.database", msgs: []string{"should match"},
		},
		"DatabaseTooLong": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = ptr.To("a" + strings.Repeat("b", 63)) },
			field: "spec.forProvider.database", msgs: []string{"may not be more than 63"},
		},
		"SystemDatabase": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = ptr.To("template1") },
			field: "spec.forProvider.database", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"DatabaseReservedAsARole": {
			// The login role defaults to the database name, and pg_* role
			// names are reserved by the server.
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = ptr.To("pg_catalog") },
			field: "spec.forProvider.database", msgs: []string{"must not start with pg_"},
		},
		"NameReservedWithoutDatabase": {
			mut:   func(d *v1alpha1.Database) { d.Name = "public" },
			field: "spec.forProvider.database", msgs: []string{"would be the database name"},
		},
		"LoginRolePublic": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("public") },
			field: "spec.forProvider.loginRole", msgs: []string{"PostgreSQL's own database and role names"},
		},
		"LoginRoleNotAnIdentifier": {
			mut:   func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("app;drop") },
			field: "spec.forProvider.loginRole", msgs: []string{"should match"},
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
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			wantRejected(t, c.Create(ctx, db(tc.mut)), tc.field, tc.msgs...)
		})
	}
}

func TestDatabaseImmutableFields(t *testing.T) {
	cases := map[string]struct {
		initial func(*v1alpha1.Database)
		change  func(*v1alpha1.Database)
		field   string
		msg     string
	}{
		"Database": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = ptr.To("first") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = ptr.To("second") },
			field:   "spec.forProvider.database", msg: "immutable",
		},
		"DatabaseRemoved": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = ptr.To("first") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = nil },
			field:   "spec.forProvider.database", msg: "immutable",
		},
		"LoginRole": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("owner_a") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("owner_b") },
			field:   "spec.forProvider.loginRole", msg: "immutable",
		},
		"CredentialPath": {
			initial: func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("legacy/app") },
			change:  func(d *v1alpha1.Database) { d.Spec.ForProvider.CredentialPath = ptr.To("legacy/other") },
			field:   "spec.forProvider.credentialPath", msg: "immutable",
		},
		"ProviderConfigRef": {
			initial: func(d *v1alpha1.Database) {
				d.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "shared"}
			},
			change: func(d *v1alpha1.Database) {
				d.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "other"}
			},
			field: "spec.providerConfigRef", msg: "immutable",
		},
		"ProviderConfigRefKind": {
			initial: func(d *v1alpha1.Database) {
				d.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "shared"}
			},
			change: func(d *v1alpha1.Database) {
				d.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "shared"}
			},
			field: "spec.providerConfigRef", msg: "immutable",
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
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, c := setup(t)
			d := db(tc.initial)
			if err := c.Create(ctx, d); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.change(d)
			wantRejected(t, c.Update(ctx, d), tc.field, tc.msg)
		})
	}
}

func TestDatabaseAllowedChanges(t *testing.T) {
	ctx, c := setup(t)
	d := db(func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm"} })
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Appending extensions, reordering them and switching an import to
	// Update are all allowed.
	d.Spec.ForProvider.Extensions = []string{"citext", "pg_trgm"}
	d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionUpdate}
	if err := c.Update(ctx, d); err != nil {
		t.Errorf("append an extension: %v", err)
	}
	if diff := cmp.Diff([]string{"citext", "pg_trgm"}, d.Spec.ForProvider.Extensions); diff != "" {
		t.Errorf("extensions after update: -want +got:\n%s", diff)
	}
}

// Every example under examples/ is accepted as written.
func TestExamplesAreAccepted(t *testing.T) {
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
