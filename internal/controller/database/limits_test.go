package database_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// setConfigLimits sets the shared config's spec.tenantLimits.
func setConfigLimits(t *testing.T, l *v1alpha1.TenantLimits) {
	t.Helper()
	cfg := &v1alpha1.ClusterProviderConfig{}
	cfg.SetName(configName)
	testenv.Edit(t, env.Kube.Client, cfg, func(cfg *v1alpha1.ClusterProviderConfig) { cfg.Spec.TenantLimits = l })
}

// roleLimits reads a role's connection limit, its own defaults and
// expiry, as the superuser.
func roleLimits(t *testing.T, role string) (int32, []string, string) {
	t.Helper()
	ctx := context.Background()
	// Its own connection, closed at once: this runs at every poll of a wait.
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test
	var limit int32
	var settings []string
	var until *string
	if err := c.QueryRow(ctx, `SELECT r.rolconnlimit, s.setconfig, r.rolvaliduntil::text FROM pg_roles r
		LEFT JOIN pg_db_role_setting s ON s.setrole = r.oid AND s.setdatabase = 0 WHERE r.rolname = $1`, role).Scan(&limit, &settings, &until); err != nil {
		t.Fatal(err)
	}
	if until == nil {
		return limit, settings, ""
	}
	return limit, settings, *until
}

// The config's defaults and the Database's overrides are on the role from
// its creation and in status; the server refuses the tenant's session past
// its connection limit; drift of a managed limit is repaired and what an
// admin set by hand beside it is kept.
func TestLimitsAppliedRepairedAndShown(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	setConfigLimits(t, &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](10), StatementTimeout: ptr.To("45s")})
	t.Cleanup(func() { setConfigLimits(t, nil) })
	// The config's defaults reach the Database controller through its cache.
	time.Sleep(time.Second)
	const name = "limits"
	d := newDB(name, func(d *v1alpha1.Database) {
		d.Spec.ForProvider.Limits = &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](3), WorkMem: ptr.To("8MB")}
	})
	apply(t, d)
	shown := func(d *v1alpha1.Database) bool {
		l := d.Status.AtProvider.Limits
		return ready(d) && l != nil && l.ConnectionLimit != nil && *l.ConnectionLimit == 3 &&
			l.Settings["statement_timeout"] == "45s" && l.Settings["work_mem"] == "8MB" &&
			slices.Equal(l.Managed, []string{"connection_limit", "statement_timeout", "work_mem"})
	}
	waitDB(t, d, "Ready with its limits in status", shown)
	limit, settings, _ := roleLimits(t, name)
	if limit != 3 || !slices.Contains(settings, "statement_timeout=45s") || !slices.Contains(settings, "work_mem=8MB") {
		t.Fatalf("the role has connection limit %d and defaults %v, want 3, statement_timeout=45s, work_mem=8MB", limit, settings)
	}

	// The tenant: 3 sessions, and the 4th is refused by the server. The
	// provider's own login check may hold one of the 3 for a moment.
	pw := readKV(t, dbPath(name)).Data["password"].(string)
	var open []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range open {
			_ = c.Close(ctx)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for len(open) < 3 {
		c, err := appLogin(t, name, pw, name)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("session %d of 3: %v", len(open)+1, err)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		open = append(open, c)
	}
	c, err := appLogin(t, name, pw, name)
	var pe *pgconn.PgError
	if err == nil {
		_ = c.Close(ctx)
		t.Fatal("a 4th session of a role with connection limit 3 was accepted")
	}
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Errorf("4th session = %v, want 53300 (too many connections for role)", err)
	}
	for _, c := range open {
		_ = c.Close(ctx)
	}
	open = nil

	// Drift of the managed limits, beside settings and attributes an admin
	// set by hand.
	su := superConn(t, "postgres")
	for _, s := range []string{
		`ALTER ROLE limits CONNECTION LIMIT -1`,
		`ALTER ROLE limits SET work_mem = '1GB'`,
		`ALTER ROLE limits RESET statement_timeout`,
		`ALTER ROLE limits SET search_path = 'app'`,
		`ALTER ROLE limits VALID UNTIL 'infinity'`,
	} {
		if _, err := su.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	waitDB(t, d, "the limits repaired", func(d *v1alpha1.Database) bool {
		limit, settings, _ := roleLimits(t, name)
		return shown(d) && limit == 3 && slices.Contains(settings, "work_mem=8MB") && slices.Contains(settings, "statement_timeout=45s")
	})
	_, settings, until := roleLimits(t, name)
	if !slices.Contains(settings, "search_path=app") || until != "infinity" {
		t.Errorf("the repair changed what it does not manage: defaults %v, valid until %q", settings, until)
	}
	// The status shows it at the Observe after the repair.
	waitDB(t, d, "status.atProvider.limits.otherSettings [search_path]", func(d *v1alpha1.Database) bool {
		l := d.Status.AtProvider.Limits
		return l != nil && slices.Equal(l.OtherSettings, []string{"search_path"})
	})
}

// Without a connection limit of the config's, each login role the provider
// makes (the owner and its data roles) gets the default: a quarter of what
// max_connections leaves for tenant roles, as the config's status counts
// it. Set back to none by hand, it is put back; a config that asks for
// none (-1) gets none.
func TestDefaultConnectionLimitWithoutTheConfigs(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	cfg := &v1alpha1.ClusterProviderConfig{}
	var want int32
	err := testenv.WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: configName}, cfg); err != nil {
			return err
		}
		c := cfg.Status.Connections
		if c == nil || c.Available == 0 {
			return errors.New("the config's status does not count the server's connections yet")
		}
		want = max(c.Available/4, 1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const name = "deflimit"
	d := newDB(name, func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}
	})
	apply(t, d)
	publicCreate(t, d, name)
	limited := func(want int32) func(d *v1alpha1.Database) bool {
		return func(d *v1alpha1.Database) bool {
			if !dataRolesReady(d) {
				return false
			}
			owner, _, _ := roleLimits(t, name)
			app, _, _ := roleLimits(t, name+"_app_1")
			l := d.Status.AtProvider.Limits
			return owner == want && app == want && l != nil && l.ConnectionLimit != nil && *l.ConnectionLimit == want
		}
	}
	waitDB(t, d, fmt.Sprintf("Ready, the owner and its data role limited to %d", want), limited(want))
	testenv.RunSQL(t, superConn(t, "postgres"), "the superuser", "ALTER ROLE deflimit CONNECTION LIMIT -1")
	waitDB(t, d, "the default put back", limited(want))

	setConfigLimits(t, &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](-1)})
	t.Cleanup(func() { setConfigLimits(t, nil) })
	waitDB(t, d, "no limit once the config asks for none", limited(-1))
}
