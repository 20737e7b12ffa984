// Package tenantkit holds what the Tenant-level test suites (test/delivery,
// test/e2e) share: registering the platform (admin Secret, the shared
// ClusterProviderConfig, the ClusterSecretStore), asking for Tenants and
// checking their end state in Kubernetes, PostgreSQL and OpenBao.
package tenantkit

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

const (
	// TenantAPI is the namespaced v2 Tenant's apiVersion.
	TenantAPI = "database.ayatori.ddupan.top/v1alpha1"
	// LegacyAPI is the legacy Tenant claim's apiVersion.
	LegacyAPI = "legacy.database.ayatori.ddupan.top/v1alpha1"
	// Store is the ClusterSecretStore the Composition reads through.
	Store = "openbao-tenants"
	// Instance is the ClusterProviderConfig Platform registers (default
	// reclaim policy Retain).
	Instance = "shared"
	// DeleteInstance is a second registration of the same server whose
	// Databases are dropped when their Tenants go (default reclaim policy
	// Delete).
	DeleteInstance = "shared-delete"
)

// Platform registers what a platform admin sets up once: the admin Secret,
// the ClusterProviderConfig "shared" for the test PostgreSQL, and the
// ClusterSecretStore through which ESO reads as each app namespace.
func Platform(ctx context.Context, e *testenv.Env) error {
	pg := e.Postgres
	// On the test node the provider runs as a Pod: it reaches the server
	// at the node's address (in the certificate too).
	hostaddr := pg.Hostaddr
	if pg.PodHostaddr != "" {
		hostaddr = pg.PodHostaddr
	}
	objs := []client.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ProviderNamespace, Name: "admin"},
			StringData: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword},
		},
		&v1alpha1.ClusterProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: Instance},
			Spec: v1alpha1.ProviderConfigSpec{
				Endpoint:    v1alpha1.Endpoint{Host: pg.Host, Hostaddr: hostaddr, Port: int32(pg.Port)}, //nolint:gosec // test port
				Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
			},
		},
		&v1alpha1.ClusterProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: DeleteInstance},
			Spec: v1alpha1.ProviderConfigSpec{
				Endpoint:             v1alpha1.Endpoint{Host: pg.Host, Hostaddr: hostaddr, Port: int32(pg.Port)}, //nolint:gosec // test port
				Credentials:          v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
				DefaultReclaimPolicy: v1alpha1.ReclaimDelete,
			},
		},
		MustUnstructured(fmt.Sprintf(`
apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata:
  name: %s
spec:
  provider:
    vault:
      server: %s
      path: %s
      version: v2
      caBundle: %s
      auth:
        kubernetes:
          mountPath: %s
          role: %s
          # No namespace: ESO authenticates as this service account in the
          # ExternalSecret's own namespace (referent authentication).
          serviceAccountRef:
            name: %s
            audiences: [%s]
`, Store, e.OpenBao.Address, e.OpenBao.KVMount, base64.StdEncoding.EncodeToString(e.CA.CertPEM),
			e.OpenBao.AuthMount, testenv.TenantReaderRole, testenv.TenantReaderServiceAccount, testenv.TenantReaderAudience)),
	}
	for _, o := range objs {
		if err := e.Kube.Client.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// MustUnstructured decodes one YAML object.
func MustUnstructured(y string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		panic(err)
	}
	return u
}

// Ref is an object of any kind named ns/name with nothing else set: what
// testenv.Edit and EditStatus read, change and write.
func Ref(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// Get reads one object of any kind.
func Get(ctx context.Context, c client.Client, apiVersion, kind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}

// Condition returns the status, reason and message of a condition.
func Condition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s := func(k string) string { v, _ := m[k].(string); return v }
			return s("status"), s("reason"), s("message")
		}
	}
	return "", "", ""
}

// Ready is the status of the Ready condition ("" when there is none).
func Ready(u *unstructured.Unstructured) string {
	s, _, _ := Condition(u, "Ready")
	return s
}

// Phase is status.phase.
func Phase(u *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return p
}

// SecretName is the default Secret of a Tenant on the shared instance.
func SecretName(tenant string) string { return InstanceSecretName(Instance, tenant) }

// InstanceSecretName is the default Secret of a dynamic Tenant on instance.
func InstanceSecretName(instance, tenant string) string {
	return instance + "-" + tenant + "-postgresql"
}

// StaticSecretName is the default Secret of a Tenant bound to an existing
// Database (spec.databaseRef).
func StaticSecretName(tenant string) string { return tenant + "-postgresql" }

// NewTenant creates a Tenant (apiVersion TenantAPI or LegacyAPI) in app
// namespace ns, with the reader service account, and waits until it is
// Ready (phase Ready and Ready=True).
func NewTenant(ctx context.Context, t testing.TB, e *testenv.Env, apiVersion, ns, name, spec string) *unstructured.Unstructured {
	t.Helper()
	CreateTenant(ctx, t, e, apiVersion, ns, name, spec)
	return WaitTenantReady(ctx, t, e, apiVersion, ns, name)
}

// CreateTenant creates a Tenant and the reader service account of its
// namespace, without waiting.
func CreateTenant(ctx context.Context, t testing.TB, e *testenv.Env, apiVersion, ns, name, spec string) {
	t.Helper()
	if err := e.Kube.EnsureServiceAccount(ctx, ns, testenv.TenantReaderServiceAccount); err != nil {
		t.Fatal(err)
	}
	tn := MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Tenant\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", apiVersion, name, ns, spec))
	if err := e.Kube.Client.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}
}

// WaitTenantReady waits until the Tenant is Ready, failing with its status
// and its resources' when ctx ends first.
func WaitTenantReady(ctx context.Context, t testing.TB, e *testenv.Env, apiVersion, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for {
		xr, err := Get(ctx, e.Kube.Client, apiVersion, "Tenant", ns, name)
		if err == nil && Phase(xr) == "Ready" && Ready(xr) == "True" {
			return xr
		}
		if ctx.Err() != nil {
			t.Fatalf("Tenant %s/%s not Ready (%v):\n%s", ns, name, err, Describe(context.Background(), e, apiVersion, ns, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// DeleteTenant deletes the Tenant ns/name and waits until it and its
// DatabaseBinding are gone (what the binding releases is then settled).
func DeleteTenant(ctx context.Context, t testing.TB, e *testenv.Env, apiVersion, ns, name string) {
	t.Helper()
	tn, err := Get(ctx, e.Kube.Client, apiVersion, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Kube.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	for {
		_, e1 := Get(ctx, e.Kube.Client, apiVersion, "Tenant", ns, name)
		_, e2 := Get(ctx, e.Kube.Client, TenantAPI, "DatabaseBinding", ns, name)
		if apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("Tenant %s/%s not gone (Tenant: %v, binding: %v):\n%s", ns, name, e1, e2, Describe(context.Background(), e, apiVersion, ns, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Describe prints the status of a Tenant and of the DatabaseBinding,
// Database and ExternalSecret it leads to, for failure messages.
func Describe(ctx context.Context, e *testenv.Env, apiVersion, ns, name string) string {
	var b strings.Builder
	for _, o := range [][4]string{
		{apiVersion, "Tenant", ns, name},
		{TenantAPI, "DatabaseBinding", ns, name},
		{TenantAPI, "Database", "", DatabaseName(ctx, e, ns, name)},
		{"external-secrets.io/v1", "ExternalSecret", ns, SecretName(name)},
	} {
		if o[3] == "" {
			fmt.Fprintf(&b, "%s: none bound\n", o[1])
			continue
		}
		u, err := Get(ctx, e.Kube.Client, o[0], o[1], o[2], o[3])
		if err != nil {
			fmt.Fprintf(&b, "%s %s: %v\n", o[1], o[3], err)
			continue
		}
		y, _ := yaml.Marshal(map[string]any{"spec": u.Object["spec"], "status": u.Object["status"]})
		fmt.Fprintf(&b, "%s %s:\n%s", o[1], o[3], y)
	}
	return b.String()
}

// DatabaseName is the name of the (cluster-scoped) Database the Tenant's
// binding recorded, or "" when it has recorded none.
func DatabaseName(ctx context.Context, e *testenv.Env, ns, tenant string) string {
	u, err := Get(ctx, e.Kube.Client, TenantAPI, "DatabaseBinding", ns, tenant)
	if err != nil {
		return ""
	}
	n, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "databaseName")
	return n
}

// BoundDatabase is the Database the Tenant's binding recorded.
func BoundDatabase(ctx context.Context, t testing.TB, e *testenv.Env, ns, tenant string) *unstructured.Unstructured {
	t.Helper()
	n := DatabaseName(ctx, e, ns, tenant)
	if n == "" {
		t.Fatalf("the binding of Tenant %s/%s names no Database", ns, tenant)
	}
	u, err := Get(ctx, e.Kube.Client, TenantAPI, "Database", "", n)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// RecordPath is the KV path of a Database's own credential record.
func RecordPath(database string) string { return "postgresql-databases/" + database }

// DeliveryPath is the KV path of the copy a Tenant's namespace reads.
func DeliveryPath(ns, tenant string) string { return "postgresql-tenants/" + ns + "/" + tenant }

// ServerHas reports whether the database and the role exist on the server.
func ServerHas(ctx context.Context, t testing.TB, e *testenv.Env, database, role string) (bool, bool) {
	t.Helper()
	c, err := e.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	var db, r bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1), EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2)", database, role).Scan(&db, &r); err != nil {
		t.Fatal(err)
	}
	return db, r
}

// RecordVersions is the number of versions of the KV record at path (0 when
// there is no record).
func RecordVersions(ctx context.Context, t testing.TB, e *testenv.Env, path string) int {
	t.Helper()
	root, err := e.OpenBao.Client(e.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	m, err := root.KVv2(e.OpenBao.KVMount).GetMetadata(ctx, path)
	if err != nil {
		return 0
	}
	return len(m.Versions)
}

// CheckSecretLogsIn asserts the Secret has exactly the seven keys and logs in
// to PostgreSQL as the tenant, by host and by hostaddr, with verify-full. It
// returns the Secret's password.
func CheckSecretLogsIn(ctx context.Context, t testing.TB, e *testenv.Env, ns, secret string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := e.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, s); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "database,host,hostaddr,password,port,sslmode,username" {
		t.Fatalf("Secret keys %s, want exactly the seven", got)
	}
	d := func(k string) string { return string(s.Data[k]) }
	if d("sslmode") != "verify-full" || (d("hostaddr") != e.Postgres.Hostaddr && d("hostaddr") != e.Postgres.PodHostaddr) || d("host") != e.Postgres.Host {
		t.Errorf("sslmode %q host %q hostaddr %q", d("sslmode"), d("host"), d("hostaddr"))
	}
	for _, host := range []string{d("host"), d("hostaddr")} {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=%s sslrootcert=%s",
			host, d("port"), d("database"), d("username"), d("sslmode"), e.CA.CertFile))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Password = d("password")
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Errorf("login with the delivered Secret via %s: %v", host, err)
			continue
		}
		var user string
		if err := c.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != d("username") {
			t.Errorf("logged in as %q (%v)", user, err)
		}
		_ = c.Close(ctx)
	}
	return d("password")
}
