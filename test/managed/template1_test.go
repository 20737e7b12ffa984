package managed

import (
	"context"
	"errors"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestUnhardenedTemplate1WithoutASuperuser: on a managed service the admin
// role (CREATEDB, CREATEROLE, no superuser) cannot harden template1, which
// on PostgreSQL 14 (and servers upgraded from it) lets every role create
// objects in its public schema. The config refuses such a server by
// default, and with unhardenedTemplate1 Warn is Ready with a warning; a
// tenant's login can then plant a function in template1, and a database
// the provider creates afterwards does not hold it (copied from template0).
// On 15 and later the default template1 is safe: Ready without a warning,
// and the tenant cannot plant anything.
func TestUnhardenedTemplate1WithoutASuperuser(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := env.Kube.Client

	var version int
	if err := superConn(t, "postgres").QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	permissive := version < 150000
	// template1 as initdb leaves it on this major (the harness hardened
	// it): on 14, PUBLIC may create in its public schema again.
	t1 := superConn(t, "template1")
	if permissive {
		if _, err := t1.Exec(ctx, "GRANT CREATE ON SCHEMA public TO PUBLIC"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = t1.Exec(context.Background(), "DROP FUNCTION IF EXISTS public.planted()")
		if _, err := t1.Exec(context.Background(), "REVOKE CREATE ON SCHEMA public FROM PUBLIC"); err != nil {
			t.Errorf("hardening template1 again: %v", err)
		}
	})

	cfg := config("unhardened", "")
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cfg) })
	if permissive {
		await(t, cfg, "UnsafeTemplates naming the setting", func(o *v1alpha1.ClusterProviderConfig) bool {
			r := o.GetCondition(xpv2.TypeReady)
			return r.Reason == "UnsafeTemplates" && strings.Contains(r.Message, "REVOKE CREATE ON SCHEMA public FROM PUBLIC") &&
				strings.Contains(r.Message, "unhardenedTemplate1 to Warn")
		})
		testenv.Edit(t, c, cfg, func(cfg *v1alpha1.ClusterProviderConfig) { cfg.Spec.UnhardenedTemplate1 = v1alpha1.Template1Warn })
		await(t, cfg, "Ready with the warning", func(o *v1alpha1.ClusterProviderConfig) bool {
			r := o.GetCondition(xpv2.TypeReady)
			return readyReason(r) == "Ready" && strings.Contains(r.Message, "WARNING: unhardenedTemplate1 is Warn")
		})
	} else {
		await(t, cfg, "Ready", func(o *v1alpha1.ClusterProviderConfig) bool {
			return readyReason(o.GetCondition(xpv2.TypeReady)) == "Ready"
		})
		// PUBLIC's CONNECT on template1 is warned about on every major;
		// its CREATE only where the default gives it.
		if m := cfg.GetCondition(xpv2.TypeReady).Message; strings.Contains(m, "unhardenedTemplate1") || strings.Contains(m, "REVOKE CREATE") {
			t.Errorf("a default template1 on %d is warned about its CREATE: %q", version, m)
		}
	}

	newDB := func(name string) *v1alpha1.Database {
		d := database(name, "unhardened")
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), d) })
		await(t, d, "Ready", func(d *v1alpha1.Database) bool { return readyReason(d.GetCondition(xpv2.TypeReady)) == "Ready" })
		return d
	}

	// The tenant next door, with its own credential, in template1.
	newDB("planter")
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := root.KVv2(env.OpenBao.KVMount).Get(ctx, options.DefaultDatabaseBasePath+"/planter")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := env.Postgres.ConnConfig(sec.Data["username"].(string), sec.Data["password"].(string), "template1")
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("the tenant's login cannot connect to template1 (PUBLIC may, by default): %v", err)
	}
	_, err = tenant.Exec(ctx, "CREATE FUNCTION public.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'")
	_ = tenant.Close(ctx)
	var pgErr *pgconn.PgError
	switch {
	case permissive && err != nil:
		t.Fatalf("on %d a tenant could not plant a function in template1 (so this test proves nothing): %v", version, err)
	case !permissive && (!errors.As(err, &pgErr) || pgErr.Code != "42501"):
		t.Fatalf("on %d a tenant planting a function in template1: %v, want insufficient privilege", version, err)
	}

	// A database the provider creates now does not hold it.
	newDB("victim")
	var planted bool
	if err := superConn(t, "victim").QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'planted')").Scan(&planted); err != nil {
		t.Fatal(err)
	}
	if planted {
		t.Error("the provider's new database holds the function a tenant planted in template1: it was copied from template1")
	}
}
