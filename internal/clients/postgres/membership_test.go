package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func serverMajor(t *testing.T) int {
	m, err := strconv.Atoi(env.Postgres.Version)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRoleCreationIsOneStep: a failure between CREATE ROLE and the admin's
// GRANT (a crash, a lost connection) leaves no role behind, so there is no
// state in which the role exists without the membership provisioning
// needs.
func TestRoleCreationIsOneStep(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	var fail atomic.Bool
	var points []string
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM), Hook: func(point string) error {
		points = append(points, point)
		if fail.Load() {
			return errors.New("injected fault at " + point)
		}
		return nil
	}})
	t.Cleanup(m.Close)
	p, _, err := m.Get("t/atomic", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := scram.Verifier(testenv.RandomSecret("a-"))
	fail.Store(true)
	if err := p.CreateRole(ctx, "atomic_role", v); err == nil || !strings.Contains(err.Error(), "injected fault") {
		t.Fatalf("CreateRole with a fault = %v", err)
	}
	if len(points) == 0 {
		t.Fatal("the fault hook was never called")
	}
	if c, err := p.Observe(ctx, "atomic_role", "atomic_role"); err != nil || c.RoleExists {
		t.Fatalf("after a fault between CREATE ROLE and GRANT: %+v, %v; want no role", c, err)
	}
	fail.Store(false)
	if err := p.CreateRole(ctx, "atomic_role", v); err != nil {
		t.Fatal(err)
	}
	c, err := p.Observe(ctx, "atomic_role", "atomic_role")
	if err != nil || !c.AdminMember || !c.AdminCanAdmin {
		t.Fatalf("after CreateRole: %+v, %v", c, err)
	}
	if err := p.CreateDatabase(ctx, "atomic_role", "atomic_role"); err != nil {
		t.Fatalf("CreateDatabase: %v", err)
	}
}

// TestBareMembershipIsNotEnough reproduces what an interrupted provisioning
// left behind when CREATE ROLE and the GRANT were two statements: a role
// the admin created, and nothing else. From PostgreSQL 16 on, the admin
// then holds an automatic ADMIN-only membership, for which
// pg_has_role(..., 'MEMBER') is already true although CREATE DATABASE ...
// OWNER is refused. The observation must say the membership is missing,
// and granting it must make the database creatable.
func TestBareMembershipIsNotEnough(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	v, _ := scram.Verifier(testenv.RandomSecret("l-"))
	ac, err := appConn(t, env.Postgres.AdminUser, env.Postgres.AdminPassword, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close(ctx) //nolint:errcheck // test
	if _, err := ac.Exec(ctx, "CREATE ROLE leftover LOGIN PASSWORD '"+v+"'"); err != nil {
		t.Fatal(err)
	}
	var member bool
	if err := ac.QueryRow(ctx, "SELECT pg_has_role(current_user, 'leftover', 'MEMBER')").Scan(&member); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s: pg_has_role(MEMBER) on the bare role = %v", env.Postgres.Version, member)

	c, err := p.Observe(ctx, "leftover", "leftover")
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminMember {
		t.Fatalf("a role the admin created without granting itself membership reads as AdminMember on %s: %+v", env.Postgres.Version, c)
	}
	if !c.AdminCanAdmin {
		t.Fatalf("the role's creator must be able to administer it: %+v", c)
	}
	// The state is real: the database cannot be created yet.
	if err := p.CreateDatabase(ctx, "leftover", "leftover"); postgres.ClassOf(err) != postgres.ClassPrivileges {
		t.Fatalf("CreateDatabase before the grant = %v, want InsufficientPrivileges", err)
	}
	if err := p.GrantRoleToAdmin(ctx, "leftover"); err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Observe(ctx, "leftover", "leftover"); !c.AdminMember {
		t.Fatalf("after the grant: %+v", c)
	}
	if err := p.CreateDatabase(ctx, "leftover", "leftover"); err != nil {
		t.Fatalf("CreateDatabase after the grant: %v", err)
	}
}

// TestRoleCreatedBySomeoneElse: a role a superuser created (an import) can
// be administered by a CREATEROLE admin before PostgreSQL 16, and needs
// ADMIN OPTION from 16 on; the observation says which, and the grant that
// would fail is reported as missing privileges.
func TestRoleCreatedBySomeoneElse(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	if err := env.Postgres.CreateRole(ctx, "foreign_made", testenv.RandomSecret("f-"), ""); err != nil {
		t.Fatal(err)
	}
	c, err := p.Observe(ctx, "nodb", "foreign_made")
	if err != nil {
		t.Fatal(err)
	}
	want := serverMajor(t) < 16
	if c.AdminCanAdmin != want || c.AdminMember {
		t.Fatalf("Observe on %s = %+v; want AdminCanAdmin=%v and no membership", env.Postgres.Version, c, want)
	}
	err = p.GrantRoleToAdmin(ctx, "foreign_made")
	if want != (err == nil) {
		t.Fatalf("GrantRoleToAdmin = %v; want success %v", err, want)
	}
	if err != nil && postgres.ClassOf(err) != postgres.ClassPrivileges {
		t.Fatalf("GrantRoleToAdmin = %v (%s), want InsufficientPrivileges", err, postgres.ClassOf(err))
	}
	if !want {
		// What the docs tell the admin to run makes it work.
		superExec(t, "postgres", "GRANT foreign_made TO "+pgx.Identifier{env.Postgres.AdminUser}.Sanitize()+" WITH ADMIN OPTION")
		if c, _ := p.Observe(ctx, "nodb", "foreign_made"); !c.AdminCanAdmin {
			t.Fatalf("after GRANT ... WITH ADMIN OPTION: %+v", c)
		}
		if err := p.GrantRoleToAdmin(ctx, "foreign_made"); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := p.Observe(ctx, "nodb", "foreign_made"); !c.AdminMember {
		t.Fatalf("after the grant: %+v", c)
	}
}

// TestPermanentFailuresAreNamed: each permanent SQLSTATE a provisioning step
// can meet on a real server gets its own class and a message that says what
// to do, never DependencyUnavailable.
func TestPermanentFailuresAreNamed(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	v, _ := scram.Verifier(testenv.RandomSecret("p-"))

	// 42939: a reserved role name reaching the server.
	err := p.CreateRole(ctx, "pg_tenant", v)
	check(t, "42939", err, postgres.ClassInvalid, "reserved")

	// 42710: the role exists (created meanwhile by someone else).
	if err := p.CreateRole(ctx, "twice", v); err != nil {
		t.Fatal(err)
	}
	check(t, "42710", p.CreateRole(ctx, "twice", v), postgres.ClassConflict, "someone else created it")

	// 42P04: the database exists.
	if err := p.CreateDatabase(ctx, "twice", "twice"); err != nil {
		t.Fatal(err)
	}
	check(t, "42P04", p.CreateDatabase(ctx, "twice", "twice"), postgres.ClassConflict, "someone else created it")

	// 2BP01: the role owns objects in another database.
	superExec(t, "postgres", "CREATE TABLE public.owned_elsewhere (id int)", "ALTER TABLE public.owned_elsewhere OWNER TO twice")
	t.Cleanup(func() { superExec(t, "postgres", "DROP TABLE IF EXISTS public.owned_elsewhere") })
	if err := p.DropDatabase(ctx, "twice", "twice"); err != nil {
		t.Fatal(err)
	}
	check(t, "2BP01", p.DropRole(ctx, "twice"), postgres.ClassDependentObjects, "REASSIGN OWNED")

	// 42601 and 0A000, classified from the real server's answers.
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test
	_, err = c.Exec(ctx, "SELEC 1")
	check(t, "42601", postgres.Classify(err), postgres.ClassRefused, "SQLSTATE 42601")
	_, err = c.Exec(ctx, "CREATE DATABASE inside_tx; CREATE DATABASE again")
	check(t, "25001", postgres.Classify(err), postgres.ClassRefused, "SQLSTATE 25001")

	// 25006: a read-only server (here: read-only by default for the admin).
	superExec(t, "postgres", "ALTER ROLE "+pgx.Identifier{env.Postgres.AdminUser}.Sanitize()+" SET default_transaction_read_only = on")
	t.Cleanup(func() {
		superExec(t, "postgres", "ALTER ROLE "+pgx.Identifier{env.Postgres.AdminUser}.Sanitize()+" RESET default_transaction_read_only")
	})
	ro := adminPool(t)
	check(t, "25006", ro.CreateRole(ctx, "readonly_role", v), postgres.ClassReadOnly, "point the config at the primary")
}

func check(t *testing.T, code string, err error, class postgres.Class, msg string) {
	t.Helper()
	var pe *postgres.Error
	if !errors.As(err, &pe) || pe.SQLState != code || pe.Class != class || !strings.Contains(pe.Error(), msg) {
		t.Errorf("SQLSTATE %s: got %v (%#v), want class %s and a message with %q", code, err, pe, class, msg)
	}
	if err != nil && strings.Contains(err.Error(), env.Postgres.AdminUser) {
		t.Errorf("SQLSTATE %s: the message names the admin role", code)
	}
}

// TestAdminOptionThroughAnotherRole: from 16 on, ADMIN OPTION held through
// another role (a group the admin is a member of) counts as much as a
// direct grant; before 16, CREATEROLE suffices.
func TestAdminOptionThroughAnotherRole(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	if err := env.Postgres.CreateRole(ctx, "group_made", testenv.RandomSecret("g-"), ""); err != nil {
		t.Fatal(err)
	}
	adm := pgx.Identifier{env.Postgres.AdminUser}.Sanitize()
	superExec(t, "postgres", "CREATE ROLE admins_group NOLOGIN",
		"GRANT group_made TO admins_group WITH ADMIN OPTION",
		"GRANT admins_group TO "+adm)
	c, err := p.Observe(ctx, "nodb", "group_made")
	if err != nil {
		t.Fatal(err)
	}
	if !c.AdminCanAdmin {
		t.Fatalf("Observe on %s = %+v; want AdminCanAdmin (ADMIN OPTION through admins_group)", env.Postgres.Version, c)
	}
}

// BenchmarkObserveWithManyMemberships: the admin of a server with
// thousands of tenants is a member of every tenant role. One Observe must
// not cost the server in proportion to that (server-ms/op is the CPU the
// server's processes used per Observe).
var benchMembers int

// ensureMemberRoles makes login roles bench_member_0 .. n-1 (connection
// limit 3) of which the admin is a member, once for every benchmark of
// the package and every run of each.
func ensureMemberRoles(ctx context.Context, b *testing.B, n int) {
	b.Helper()
	cc, err := env.Postgres.ConnConfig(env.Postgres.AdminUser, env.Postgres.AdminPassword, "postgres")
	if err != nil {
		b.Fatal(err)
	}
	adm, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close(ctx) //nolint:errcheck // test
	for i := benchMembers; i < n; i++ {
		r := pgx.Identifier{"bench_member_" + strconv.Itoa(i)}.Sanitize()
		if _, err := adm.Exec(ctx, "CREATE ROLE "+r+" LOGIN CONNECTION LIMIT 3"); err != nil {
			b.Fatal(err)
		}
		if _, err := adm.Exec(ctx, "GRANT "+r+" TO CURRENT_USER"); err != nil {
			b.Fatal(err)
		}
		benchMembers = i + 1
	}
}

func BenchmarkObserveWithManyMemberships(b *testing.B) {
	benchWithMembers(b, "b/members", 2000, func(ctx context.Context, p *postgres.Pool, i int) error {
		c, err := p.Observe(ctx, "nodb", "bench_member_"+strconv.Itoa(i%2000))
		if err == nil && !c.AdminCanAdmin {
			err = fmt.Errorf("Observe = %+v", c)
		}
		return err
	})
}

// benchWithMembers runs op (once untimed, then b.N times) on an admin pool
// named ref, on a server with n member roles (ensureMemberRoles), and
// reports the CPU the server's processes used per op.
func benchWithMembers(b *testing.B, ref string, n int, op func(ctx context.Context, p *postgres.Pool, i int) error) {
	testenv.Need(b)
	ctx := context.Background()
	ensureMemberRoles(ctx, b, n)
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(b, env.CA.CertPEM)})
	defer m.Close()
	p, _, err := m.Get(ref, "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		b.Fatal(err)
	}
	if err := op(ctx, p, 0); err != nil {
		b.Fatal(err)
	}
	cpu0, err := env.Postgres.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op(ctx, p, i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu1, err := env.Postgres.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/1000/float64(b.N), "server-ms/op")
}
