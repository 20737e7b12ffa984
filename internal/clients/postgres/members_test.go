package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestLoginMembers: a data role's login member is created logging in with
// its verifier and inheriting the data role's privileges (it reads what
// was granted to the role), the admin a member of it; ObserveMembers reads
// both members in one query (the one not made: no row); a retired login
// (NOLOGIN, no password) cannot log in, and SetMemberPassword gives it its
// login back; RepairMember puts back a revoked membership.
func TestLoginMembers(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM)})
	t.Cleanup(m.Close)
	p, _, err := m.Get("t/members", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatal(err)
	}
	su, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(ctx) //nolint:errcheck // test connection
	pw := testenv.RandomSecret("m-")
	v, _ := scram.Verifier(pw)
	owner, _ := scram.Verifier(testenv.RandomSecret("o-"))
	if err := p.CreateRole(ctx, "mem", owner); err != nil {
		t.Fatal(err)
	}
	if err := p.CreateDatabase(ctx, "mem", "mem"); err != nil {
		t.Fatal(err)
	}
	if err := p.RestrictConnect(ctx, "mem", "mem"); err != nil {
		t.Fatal(err)
	}
	if err := p.CreateRole(ctx, "mem_app", owner); err != nil {
		t.Fatal(err)
	}
	if _, err := p.RetireLogin(ctx, "mem_app", false); err != nil {
		t.Fatal(err)
	}
	testenv.RunSQL(t, su, "the superuser", "GRANT CONNECT ON DATABASE mem TO mem_app")
	limit := int32(3)
	if err := p.CreateMember(ctx, "mem_app", "mem_app_1", v, tenancy.EffectiveLimits{ConnectionLimit: &limit}); err != nil {
		t.Fatal(err)
	}
	cats, err := p.ObserveMembers(ctx, "mem", "mem_app_1", "mem_app_2")
	if err != nil {
		t.Fatal(err)
	}
	if c := cats[0]; !c.RoleExists || !c.Login || !c.Inherit || !c.AdminMember || !c.RoleAttributesOK() || c.ConnLimit != 3 {
		t.Errorf("member 1 as observed: %+v; want it logging in, inheriting, the admin a member, limited to 3", c)
	}
	if cats[1].RoleExists {
		t.Errorf("member 2, never made, observed as %+v", cats[1])
	}
	login := func(user, password string) error {
		cfg, err := env.Postgres.ConnConfig(user, password, "mem")
		if err != nil {
			t.Fatal(err)
		}
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_ = c.Close(ctx)
		}
		return err
	}
	// CONNECT was granted to the data role only: the member has it by
	// inheritance.
	if err := login("mem_app_1", pw); err != nil {
		t.Fatalf("the member does not log in with its verifier's password through its role's CONNECT: %v", err)
	}
	if err := login("mem_app", pw); err == nil {
		t.Error("the data role's own role logs in")
	}
	if _, err := p.RetireLogin(ctx, "mem_app_1", true); err != nil {
		t.Fatal(err)
	}
	if err := login("mem_app_1", pw); err == nil {
		t.Error("a retired member still logs in")
	}
	if cats, err := p.ObserveMembers(ctx, "mem", "mem_app_1", "mem_app_2"); err != nil || cats[0].Login {
		t.Errorf("a retired member observed as %+v (%v): want NOLOGIN", cats[0], err)
	}
	pw2 := testenv.RandomSecret("m-")
	v2, _ := scram.Verifier(pw2)
	if err := p.SetMemberPassword(ctx, "mem_app", "mem_app_1", v2); err != nil {
		t.Fatal(err)
	}
	if err := login("mem_app_1", pw2); err != nil {
		t.Errorf("the member given a new password does not log in: %v", err)
	}
	// As the admin, who granted it (a superuser's REVOKE names its own
	// grants only, from 16 on).
	acfg, err := env.Postgres.ConnConfig(env.Postgres.AdminUser, env.Postgres.AdminPassword, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	ac, err := pgx.ConnectConfig(ctx, acfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close(ctx) //nolint:errcheck // test connection
	testenv.RunSQL(t, ac, "the admin", "REVOKE mem_app FROM mem_app_1")
	if err := login("mem_app_1", pw2); err == nil {
		t.Error("the member logs in without its role's CONNECT")
	}
	if err := p.RepairMember(ctx, "mem_app", "mem_app_1"); err != nil {
		t.Fatal(err)
	}
	if err := login("mem_app_1", pw2); err != nil {
		t.Errorf("the repaired member does not log in: %v", err)
	}
}
