package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// The least-privilege pattern an app team copies: one Tenant with a
// readWrite role for the running app and a readOnly one for reporting,
// each with its own Secret through ESO. The owner's Secret migrates the
// schema; the app's writes rows but cannot drop or alter; the report's
// reads only. Removing the report role removes its Secret, its copy of
// the credential and its role, and the Tenant stays Ready.
func TestTenantDataRoles(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns, name = "roles", "roles-app"
	xr := tenantkit.NewTenant(ctx, t, env, api, ns, name,
		"{instanceRef: shared, dataRoles: [{name: app, access: readWrite}, {name: report, access: readOnly, secretName: roles-report}]}")
	roles, _, _ := unstructured.NestedSlice(xr.Object, "status", "dataRoles")
	if len(roles) != 2 {
		t.Fatalf("status.dataRoles = %v; want app and report", roles)
	}
	for _, r := range roles {
		m := r.(map[string]any)
		if m["ready"] != true || m["role"] != "roles_app_"+m["name"].(string) {
			t.Errorf("status.dataRoles entry %v: want ready, with its login role", m)
		}
	}
	appSecret, reportSecret := tenantkit.SecretName(name)+"-app", "roles-report"
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, appSecret)
	tenantkit.CheckSecretLogsIn(ctx, t, env, ns, reportSecret)

	owner := appConn(ctx, t, ns, name)
	defer owner.Close(ctx) //nolint:errcheck // test connection
	testenv.RunSQL(t, owner, "the owner", "CREATE TABLE orders (id bigserial PRIMARY KEY, item text)")
	app := appConnTo(ctx, t, ns, appSecret)
	defer app.Close(ctx) //nolint:errcheck // test connection
	testenv.RunSQL(t, app, "the app", "INSERT INTO orders (item) VALUES ('tea')")
	testenv.RunSQL(t, app, "the app", "UPDATE orders SET item = 'coffee'")
	for _, sql := range []string{"DROP TABLE orders", "ALTER TABLE orders ADD COLUMN x int", "TRUNCATE orders", "CREATE TABLE mine (id int)"} {
		testenv.RefusedSQL(t, app, "the app's readWrite role", sql)
	}
	report := appConnTo(ctx, t, ns, reportSecret)
	defer report.Close(ctx) //nolint:errcheck // test connection
	var item string
	if err := report.QueryRow(ctx, "SELECT item FROM orders").Scan(&item); err != nil || item != "coffee" {
		t.Errorf("the report reads %q (%v); want coffee", item, err)
	}
	for _, sql := range []string{"INSERT INTO orders (item) VALUES ('x')", "DELETE FROM orders", "DROP TABLE orders"} {
		testenv.RefusedSQL(t, report, "the readOnly role", sql)
	}

	// The report role goes: its Secret first, then its copy, then its role.
	testenv.Edit(t, env.Kube.Client, tenantkit.Ref(api, "Tenant", ns, name), func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "app", "access": "readWrite"}}, "spec", "dataRoles")
	})
	describe := func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) }
	waitFor(ctx, t, "the report role is dropped", func() bool {
		_, has := tenantkit.ServerHas(ctx, t, env, "roles_app", "roles_app_report")
		return !has
	}, describe)
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: reportSecret}, &corev1.Secret{}); !kerrors.IsNotFound(err) {
		t.Errorf("the report's Secret outlived its role: %v", err)
	}
	if v := tenantkit.RecordVersions(ctx, t, env, tenantkit.DeliveryPath(ns, name)+"/roles/report"); v != 0 {
		t.Errorf("the report's delivery copy outlived its role (%d versions)", v)
	}
	if _, err := report.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("the report role's session survived its removal")
	}
	tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
	testenv.RunSQL(t, app, "the app", "INSERT INTO orders (item) VALUES ('milk')")
}
