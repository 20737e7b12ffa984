package delivery

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// Every field of a Tenant that may change after it is created reaches its
// Database and the server (or the Secret it names), through the binder's
// one write of the Database's spec. One edit of a Ready Tenant changes
// every such field at once (each edit of a Tenant re-renders it several
// times, and Crossplane's circuit breaker holds back a Tenant that gets
// about a hundred watch events in a burst: one edit keeps the test within
// what a Tenant sees in use), then a subtest per field waits for its own
// change in the server's catalog or the namespace's Secrets.
// test/configuration's field check names these subtests, so a new
// changeable field of the Tenant fails there until it has one.
func TestTenantEditsReachTheServer(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "edits", "edits"
	tenantkit.NewTenant(ctx, t, env, tenantAPI, ns, name, "{instanceRef: shared, extensions: [pg_trgm], dataRoles: [{name: app, access: readWrite}, {name: report, access: readOnly}]}")
	describe := func() string { return tenantkit.Describe(context.Background(), env, tenantAPI, ns, name) }
	secret := tenantkit.SecretName(name)
	if !secretExists(ctx, t, ns, secret+"-report") {
		t.Fatalf("the report role's Secret %s-report is missing before the edit", secret)
	}
	testenv.Edit(t, env.Kube.Client, tenantkit.Ref(tenantAPI, "Tenant", ns, name), func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"pg_trgm", "citext"}, "spec", "extensions")
		_ = unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"name": "app", "access": "readWrite"},
			map[string]any{"name": "report", "access": "readOnly", "secretName": "edits-reporting"},
			map[string]any{"name": "audit", "access": "readOnly"},
		}, "spec", "dataRoles")
		_ = unstructured.SetNestedField(u.Object, "edits-owner", "spec", "credential", "secretName")
	})

	t.Run("extensions", func(t *testing.T) {
		waitUntil(ctx, t, "citext is installed in the Tenant's database", func() bool {
			return slices.Contains(installedExtensions(ctx, t, name), "citext")
		}, describe)
		waitUntil(ctx, t, "the Database's status shows citext", func() bool {
			db := tenantkit.BoundDatabase(ctx, t, env, ns, name)
			got, _, _ := unstructured.NestedStringSlice(db.Object, "status", "atProvider", "extensions")
			return slices.Contains(got, "citext")
		}, describe)
	})
	t.Run("dataRoles", func(t *testing.T) {
		// Its Secret's default name follows the owner's, edited too.
		waitUntil(ctx, t, "the audit role's Secret is written", func() bool {
			return secretExists(ctx, t, ns, "edits-owner-audit")
		}, describe)
		if _, has := tenantkit.ServerHas(ctx, t, env, name, name+"_audit"); !has {
			t.Errorf("the role %s_audit does not exist", name)
		}
		tenantkit.CheckSecretLogsIn(ctx, t, env, ns, "edits-owner-audit")
	})
	t.Run("dataRoles.secretName", func(t *testing.T) {
		waitUntil(ctx, t, "the report role's Secret moves to edits-reporting", func() bool {
			return secretExists(ctx, t, ns, "edits-reporting") && !secretExists(ctx, t, ns, secret+"-report")
		}, describe)
		tenantkit.CheckSecretLogsIn(ctx, t, env, ns, "edits-reporting")
	})
	t.Run("credential.secretName", func(t *testing.T) {
		waitUntil(ctx, t, "the owner's Secret moves to edits-owner", func() bool {
			return secretExists(ctx, t, ns, "edits-owner") && !secretExists(ctx, t, ns, secret)
		}, describe)
		tenantkit.CheckSecretLogsIn(ctx, t, env, ns, "edits-owner")
		// A data role's default Secret name follows the owner's.
		waitUntil(ctx, t, "the app role's Secret moves to edits-owner-app", func() bool {
			return secretExists(ctx, t, ns, "edits-owner-app") && !secretExists(ctx, t, ns, secret+"-app")
		}, describe)
		tenantkit.CheckSecretLogsIn(ctx, t, env, ns, "edits-owner-app")
	})
	tenantkit.WaitTenantReady(ctx, t, env, tenantAPI, ns, name)
}

// installedExtensions lists the extensions installed in database, read by
// a superuser.
func installedExtensions(ctx context.Context, t *testing.T, database string) []string {
	t.Helper()
	c, err := env.Postgres.SuperConn(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	var out []string
	if err := c.QueryRow(ctx, "SELECT coalesce(array_agg(extname::text), '{}') FROM pg_extension").Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// secretExists reports whether the Secret ns/name exists.
func secretExists(ctx context.Context, t *testing.T, ns, name string) bool {
	t.Helper()
	err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	if err != nil && !kerrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}
