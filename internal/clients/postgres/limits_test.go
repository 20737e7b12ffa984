package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// limited provisions name with limits l and returns its password.
func limited(t *testing.T, p *postgres.Pool, name string, l tenancy.EffectiveLimits) string {
	t.Helper()
	ctx := context.Background()
	pw := "pw-" + testenv.RandomSecret("")
	v, err := scram.Verifier(pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CreateRoleWithLimits(ctx, name, v, l); err != nil {
		t.Fatalf("CreateRoleWithLimits: %v", err)
	}
	if err := p.CreateDatabase(ctx, name, name); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
	if err := p.RestrictConnect(ctx, name, name); err != nil {
		t.Fatalf("RestrictConnect: %v", err)
	}
	return pw
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// The limits are on the role from its creation: the tenant's sessions get
// the defaults, the (n+1)th concurrent session is refused by the server,
// and the tenant cannot lift its own connection limit.
func TestLimitsAppliedAtCreationAndEnforced(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	const name = "limited"
	want := tenancy.EffectiveLimits{ConnectionLimit: ptr.To[int32](2), Settings: map[string]string{
		tenancy.SettingStatementTimeout: "1s", tenancy.SettingWorkMem: "4MB", tenancy.SettingIdleInTransactionTime: "10min",
		tenancy.SettingIdleSessionTimeout: "1h", tenancy.SettingLockTimeout: "500ms",
	}}
	pw := limited(t, p, name, want)

	c, err := p.Observe(ctx, name, name)
	if err != nil {
		t.Fatal(err)
	}
	if v := tenancy.DecideLimits(want, c.RoleLimits()); v.Drifted() || c.ConnLimit != 2 {
		t.Fatalf("right after creation: connection limit %d, settings %v, drift %v", c.ConnLimit, c.RoleSettings, v.Drift)
	}

	var open []*pgx.Conn
	t.Cleanup(func() {
		for _, c := range open {
			_ = c.Close(ctx)
		}
	})
	for i := range 2 {
		c, err := appConn(t, name, pw, name)
		if err != nil {
			t.Fatalf("session %d of 2: %v", i+1, err)
		}
		open = append(open, c)
	}
	var timeout, workMem string
	if err := open[0].QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('work_mem')").Scan(&timeout, &workMem); err != nil {
		t.Fatal(err)
	}
	if timeout != "1s" || workMem != "4MB" {
		t.Errorf("the tenant's session has statement_timeout %q and work_mem %q, want the role defaults 1s and 4MB", timeout, workMem)
	}
	if _, err := open[0].Exec(ctx, "SELECT pg_sleep(3)"); sqlState(err) != "57014" {
		t.Errorf("a 3 s statement under statement_timeout 1s = %v, want 57014 (canceled by statement timeout)", err)
	}
	third, err := appConn(t, name, pw, name)
	if err == nil {
		_ = third.Close(ctx)
		t.Fatal("a third session of a role with connection limit 2 was accepted")
	}
	if sqlState(err) != "53300" {
		t.Errorf("third session = %v, want 53300 (too many connections for role)", err)
	}
	if _, err := open[1].Exec(ctx, `ALTER ROLE CURRENT_USER CONNECTION LIMIT -1`); sqlState(err) != "42501" {
		t.Errorf("the tenant lifting its own connection limit = %v, want 42501 (permission denied)", err)
	}
}

// Drift of managed limits is repaired, and only that: a setting outside
// the allow-list and a role attribute set by hand stay; a managed setting
// the role set for itself in its own database (where it would take
// precedence) is reset.
func TestLimitsDriftRepairedOtherSettingsKept(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	const name = "drifting"
	want := tenancy.EffectiveLimits{ConnectionLimit: ptr.To[int32](3), Settings: map[string]string{tenancy.SettingStatementTimeout: "30s"}}
	pw := limited(t, p, name, want)
	superExec(t, "postgres",
		`ALTER ROLE drifting CONNECTION LIMIT -1`,
		`ALTER ROLE drifting SET statement_timeout = '0'`,
		`ALTER ROLE drifting SET search_path = 'app, public'`,
		`ALTER ROLE drifting VALID UNTIL 'infinity'`)
	// The tenant itself overrides a managed default in its own database.
	tc, err := appConn(t, name, pw, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Exec(ctx, `ALTER ROLE CURRENT_USER IN DATABASE drifting SET statement_timeout = '0'`); err != nil {
		t.Fatalf("the tenant's own ALTER ROLE ... IN DATABASE ... SET: %v", err)
	}
	_ = tc.Close(ctx)

	c, err := p.Observe(ctx, name, name)
	if err != nil {
		t.Fatal(err)
	}
	v := tenancy.DecideLimits(want, c.RoleLimits())
	if !v.Drifted() || !slices.Equal(v.ResetInDatabase, []string{tenancy.SettingStatementTimeout}) {
		t.Fatalf("drift not seen: %+v (catalog %v / %v)", v, c.RoleSettings, c.DatabaseSettings)
	}
	if err := p.SetRoleLimits(ctx, name, name, v); err != nil {
		t.Fatalf("SetRoleLimits: %v", err)
	}
	c, err = p.Observe(ctx, name, name)
	if err != nil {
		t.Fatal(err)
	}
	if v := tenancy.DecideLimits(want, c.RoleLimits()); v.Drifted() {
		t.Errorf("after the repair: drift %v", v.Drift)
	}
	if !slices.Contains(c.RoleSettings, `search_path="app, public"`) || c.ValidUntil != "infinity" {
		t.Errorf("the repair changed what it does not manage: settings %v, valid until %q", c.RoleSettings, c.ValidUntil)
	}
	if len(c.DatabaseSettings) != 0 {
		t.Errorf("the role's own override in its database is still there: %v", c.DatabaseSettings)
	}
}

// The role repair resets the attributes every tenant role has, never a
// connection limit an admin set by hand when none is managed.
func TestRepairRoleKeepsAnUnmanagedConnectionLimit(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	const name = "handset"
	limited(t, p, name, tenancy.EffectiveLimits{})
	superExec(t, "postgres", `ALTER ROLE handset CREATEDB CONNECTION LIMIT 7`)
	c, err := p.Observe(ctx, name, name)
	if err != nil {
		t.Fatal(err)
	}
	if c.RoleAttributesOK() {
		t.Fatal("a CREATEDB role reads as OK")
	}
	if v := tenancy.DecideLimits(tenancy.EffectiveLimits{}, c.RoleLimits()); v.Drifted() {
		t.Fatalf("an unmanaged limit reads as drift: %v", v.Drift)
	}
	if err := p.RepairRole(ctx, name); err != nil {
		t.Fatal(err)
	}
	c, err = p.Observe(ctx, name, name)
	if err != nil {
		t.Fatal(err)
	}
	if !c.RoleAttributesOK() || c.ConnLimit != 7 {
		t.Errorf("after RepairRole: attributes OK %t, connection limit %d, want OK and the hand-set 7", c.RoleAttributesOK(), c.ConnLimit)
	}
}

// Names off the allow-list and values ValidateSetting refuses never reach
// the server.
func TestSetRoleLimitsRefusesWhatIsNotAllowed(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	const name = "refuser"
	limited(t, p, name, tenancy.EffectiveLimits{})
	for _, v := range []tenancy.LimitsVerdict{
		{Set: map[string]string{"search_path": "evil"}},
		{Set: map[string]string{tenancy.SettingStatementTimeout: "1s'; ALTER ROLE refuser SUPERUSER; --"}},
		{ResetInDatabase: []string{"session_preload_libraries"}},
	} {
		if err := p.SetRoleLimits(ctx, name, name, v); postgres.ClassOf(err) != postgres.ClassInvalid {
			t.Errorf("SetRoleLimits(%+v) = %v, want InvalidSpec", v, err)
		}
	}
	bad := tenancy.EffectiveLimits{Settings: map[string]string{"temp_tablespaces": "x"}}
	v, _ := scram.Verifier("x-" + testenv.RandomSecret(""))
	if err := p.CreateRoleWithLimits(ctx, "refused", v, bad); postgres.ClassOf(err) != postgres.ClassInvalid {
		t.Errorf("CreateRoleWithLimits with a setting off the allow-list = %v, want InvalidSpec", err)
	}
	if c, _ := p.Observe(ctx, "nodb", "refused"); c.RoleExists {
		t.Error("the refused role was created")
	}
}

// The connection budget counts the limits of the login roles the admin
// provisioned, and those without one, against what max_connections leaves.
func TestConnectionBudget(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	before, err := p.ConnectionBudget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx) //nolint:errcheck // test
	var maxConn, suReserved int32
	if err := sc.QueryRow(ctx, `SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int`).Scan(&maxConn, &suReserved); err != nil {
		t.Fatal(err)
	}
	if before.MaxConnections != maxConn || before.SuperuserReserved != suReserved || before.AdminPool < 1 {
		t.Errorf("budget %+v, want max_connections %d, superuser_reserved_connections %d and the admin pool's size", before, maxConn, suReserved)
	}
	if serverMajor(t) >= 16 {
		var reserved int32
		if err := sc.QueryRow(ctx, `SELECT current_setting('reserved_connections')::int`).Scan(&reserved); err != nil || before.Reserved != reserved {
			t.Errorf("reserved_connections %d (%v), budget says %d", reserved, err, before.Reserved)
		}
	}
	v, _ := scram.Verifier("x-" + testenv.RandomSecret(""))
	if err := p.CreateRoleWithLimits(ctx, "budget_a", v, tenancy.EffectiveLimits{ConnectionLimit: ptr.To[int32](7)}); err != nil {
		t.Fatal(err)
	}
	if err := p.CreateRole(ctx, "budget_b", v); err != nil {
		t.Fatal(err)
	}
	// A login role the admin is not a member of does not count.
	superExec(t, "postgres", `CREATE ROLE budget_other LOGIN CONNECTION LIMIT 50`)
	after, err := p.ConnectionBudget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.TenantSum-before.TenantSum != 7 || after.Unlimited-before.Unlimited != 1 || after.Roles-before.Roles != 2 {
		t.Errorf("after two new roles (limit 7, none): %+v, before %+v", after, before)
	}
}

// BenchmarkConnectionBudget: the config's budget query with 2,000 login
// roles the admin is a member of (it runs once per health check).
func BenchmarkConnectionBudget(b *testing.B) {
	benchWithMembers(b, "b/budget", 2000, func(ctx context.Context, p *postgres.Pool, _ int) error {
		in, err := p.ConnectionBudget(ctx)
		if err == nil && in.Roles < 2000 {
			err = fmt.Errorf("ConnectionBudget = %+v", in)
		}
		return err
	})
}
