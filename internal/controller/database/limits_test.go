package database_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/utils/ptr"

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
