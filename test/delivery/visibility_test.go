package delivery

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// What an app namespace reads, as the namespace's own identity (a service
// account allowed to read everything in its namespace and nothing else):
// its Tenant's state, never what is written for admins. A Tenant on a
// config that is not Ready reads InstanceNotReady without the config's
// message (which names the server); a Tenant whose database name is taken
// by another team's database reads Conflict without that database's
// owner. Both are checked in the Tenant, its DatabaseBinding and every
// Event of the namespace; the admin-side objects do carry them (so the
// checks prove something).
func TestNamespaceReadsOnlyItsTenantsState(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// A config whose server cannot be reached: its message names the host
	// and the port.
	const hiddenHost = "pg-hidden.internal.example"
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	hiddenPort := ":" + strconv.Itoa(port)
	cfg := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "hidden"},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: hiddenHost, Hostaddr: env.Postgres.Hostaddr, Port: int32(port)}, //nolint:gosec // test port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
		},
	}
	if err := env.Kube.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Best effort: the unreachable Tenant goes, then its config (once
		// nothing uses it), so that the config's health checks stop.
		ctx := context.Background()
		if tn, err := tenantkit.Get(ctx, env.Kube.Client, tenantAPI, "Tenant", "peek", "unreachable"); err == nil {
			_ = env.Kube.Client.Delete(ctx, tn)
		}
		_ = env.Kube.Client.Delete(ctx, cfg)
	})
	// Another team's database, owned by its own role, under the name a
	// Tenant asks for.
	const otherRole, taken = "payroll_owner_7c1", "peek_taken"
	su := env.Postgres.SuperConnT(t, "postgres")
	for _, q := range []string{"CREATE ROLE " + otherRole, "CREATE DATABASE " + taken + " OWNER " + otherRole} {
		if _, err := su.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	const ns = "peek"
	tenantkit.CreateTenant(ctx, t, env, tenantAPI, ns, "unreachable", "{instanceRef: hidden}")
	tenantkit.CreateTenant(ctx, t, env, tenantAPI, ns, "taken", "{instanceRef: shared, database: "+taken+"}")
	as := namespaceIdentity(ctx, t, ns)

	reasonOf := func(name string) string {
		tn, err := tenantkit.Get(ctx, as, tenantAPI, "Tenant", ns, name)
		if err != nil {
			return err.Error()
		}
		r, _, _ := unstructured.NestedString(tn.Object, "status", "reason")
		return r
	}
	describe := func() string {
		return tenantkit.Describe(context.Background(), env, tenantAPI, ns, "unreachable") + tenantkit.Describe(context.Background(), env, tenantAPI, ns, "taken")
	}
	waitUntil(ctx, t, "both Tenants showing their reasons", func() bool {
		return reasonOf("unreachable") == "InstanceNotReady" && reasonOf("taken") == "Conflict"
	}, describe)

	// The admin side says it all.
	c := &v1alpha1.ClusterProviderConfig{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: "hidden"}, c); err != nil {
		t.Fatal(err)
	}
	if msg := fmt.Sprint(c.Status.Conditions); !strings.Contains(msg, hiddenHost) {
		t.Fatalf("the config's status does not name its host, so nothing below is proven: %s", msg)
	}
	db := tenantkit.BoundDatabase(ctx, t, env, ns, "taken")
	if _, _, msg := tenantkit.Condition(db, "Ready"); !strings.Contains(msg, otherRole) {
		t.Fatalf("the Database's message does not name the other role, so nothing below is proven: %q", msg)
	}

	// A few polls, then everything the namespace reads.
	time.Sleep(3 * time.Second)
	var read strings.Builder
	for _, o := range [][3]string{
		{tenantAPI, "Tenant", "unreachable"}, {tenantAPI, "DatabaseBinding", "unreachable"},
		{tenantAPI, "Tenant", "taken"}, {tenantAPI, "DatabaseBinding", "taken"},
	} {
		u, err := tenantkit.Get(ctx, as, o[0], o[1], ns, o[2])
		if err != nil {
			t.Fatalf("the namespace's identity cannot read its %s %s: %v", o[1], o[2], err)
		}
		y, _ := yaml.Marshal(u.Object)
		fmt.Fprintf(&read, "%s %s:\n%s\n", o[1], o[2], y)
	}
	events := &corev1.EventList{}
	if err := as.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Error("no Event in the namespace: the Events check proves nothing")
	}
	for _, e := range events.Items {
		fmt.Fprintf(&read, "Event %s %s/%s: %s %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	for _, w := range []string{hiddenHost, hiddenPort, otherRole} {
		if strings.Contains(read.String(), w) {
			t.Errorf("the namespace reads %q:\n%s", w, read.String())
		}
	}
	_, _, msg := tenantkit.Condition(mustGet(ctx, t, as, "DatabaseBinding", ns, "unreachable"), "Ready")
	if !strings.Contains(msg, "ask your platform team") {
		t.Errorf("the InstanceNotReady binding does not say whom to ask: %q", msg)
	}
	if _, _, msg := tenantkit.Condition(mustGet(ctx, t, as, "DatabaseBinding", ns, "taken"), "Ready"); !strings.Contains(msg, "Choose other names") {
		t.Errorf("the Conflict binding does not say what to do: %q", msg)
	}
	// The identity is the namespace's: the Database is not its to read.
	if _, err := tenantkit.Get(ctx, as, tenantAPI, "Database", "", db.GetName()); !apierrors.IsForbidden(err) {
		t.Errorf("the namespace's identity reads a Database (%v): the checks above are not what a namespace sees", err)
	}
}

func mustGet(ctx context.Context, t *testing.T, c client.Client, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := tenantkit.Get(ctx, c, tenantAPI, kind, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// namespaceIdentity is a client acting as a service account of ns that may
// read everything in ns and nothing outside it.
func namespaceIdentity(ctx context.Context, t *testing.T, ns string) client.Client {
	t.Helper()
	if err := env.Kube.EnsureServiceAccount(ctx, ns, "app"); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "app-read-all", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "app-read-all", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "app", Namespace: ns}},
	}
	for _, o := range []client.Object{role, rb} {
		if err := env.Kube.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Kube.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":app"}
	as, err := client.New(cfg, client.Options{Scheme: env.Kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return as
}
