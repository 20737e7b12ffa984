package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestObserveReportsOtherAccess: the owner tenant, logged in with its own
// credential, grants CONNECT and TEMPORARY on its database to another
// role, and its role to another role (on 14 a role may grant itself; from
// 15 on it may not, and the membership is made by the admin, as a team's
// request to an admin would be). The one catalog query of Observe
// reports both, with the options of the membership. The admin's own
// membership in the role, and a privilege granted to the admin, are
// never reported: the admin's name is not shown anywhere.
func TestObserveReportsOtherAccess(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	major, err := p.Major(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pw := testenv.RandomSecret("oa-")
	provision(t, p, "oa_owner", pw)
	if err := env.Postgres.CreateRole(ctx, "oa_friend", testenv.RandomSecret("f-"), ""); err != nil {
		t.Fatal(err)
	}

	// Provisioned: the owner only (the admin's membership is not other
	// access).
	c, err := p.Observe(ctx, "oa_owner", "oa_owner")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OtherGrants) != 0 || len(c.OtherMembers) != 0 {
		t.Fatalf("a freshly provisioned database reports other access: %s", redactAdmin(c))
	}

	app, err := appConn(t, "oa_owner", pw, "oa_owner")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // test connection
	adminIdent := pgx.Identifier{env.Postgres.AdminUser}.Sanitize()
	for _, stmt := range []string{
		"GRANT CONNECT, TEMPORARY ON DATABASE oa_owner TO oa_friend WITH GRANT OPTION",
		"GRANT CONNECT ON DATABASE oa_owner TO " + adminIdent,
	} {
		if _, err := app.Exec(ctx, stmt); err != nil {
			t.Fatalf("as the owner tenant: %s: %v", stmt, err)
		}
	}
	yes, no := true, false
	wantMember := tenancy.RoleMembership{Role: "oa_friend"}
	if major < 15 {
		if _, err := app.Exec(ctx, "GRANT oa_owner TO oa_friend"); err != nil {
			t.Fatalf("as the owner tenant on 14, granting its own role: %v", err)
		}
	} else {
		if _, err := app.Exec(ctx, "GRANT oa_owner TO oa_friend"); err == nil {
			t.Fatal("from 15 on, a role granted itself to another role")
		}
		adm, err := appConn(t, env.Postgres.AdminUser, env.Postgres.AdminPassword, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer adm.Close(ctx) //nolint:errcheck // test connection
		grant := "GRANT oa_owner TO oa_friend"
		if major >= 16 {
			grant += " WITH INHERIT FALSE, SET TRUE"
			wantMember.Inherit, wantMember.Set = &no, &yes
		}
		if _, err := adm.Exec(ctx, grant); err != nil {
			t.Fatalf("as the admin: %v", err)
		}
	}

	c, err = p.Observe(ctx, "oa_owner", "oa_owner")
	if err != nil {
		t.Fatal(err)
	}
	wantGrants := []tenancy.DatabaseGrant{{Role: "oa_friend", Privileges: []string{"CONNECT", "TEMPORARY"}, Grantable: []string{"CONNECT", "TEMPORARY"}}}
	sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	if s := fmt.Sprintf("%+v %+v", c.OtherGrants, c.OtherMembers); strings.Contains(s, env.Postgres.AdminUser) {
		t.Errorf("the admin role is named in the other access: %s", redactAdmin(c))
	}
	if diff := cmp.Diff(wantGrants, c.OtherGrants, sorted); diff != "" {
		t.Errorf("other grants: -want +got:\n%s", strings.ReplaceAll(diff, env.Postgres.AdminUser, "<the admin>"))
	}
	if diff := cmp.Diff([]tenancy.RoleMembership{wantMember}, c.OtherMembers); diff != "" {
		t.Errorf("other members: -want +got:\n%s", strings.ReplaceAll(diff, env.Postgres.AdminUser, "<the admin>"))
	}
	// The rest of the observation is unchanged by it.
	if !c.DatabaseExists || !c.RoleConnect || c.PublicConnect || !c.AdminMember || c.Owner != "oa_owner" {
		t.Errorf("Observe with other access = %+v", c)
	}

	// Revoked: nothing is reported again.
	su := env.Postgres.SuperConnT(t, "postgres")
	for _, stmt := range []string{
		"REVOKE ALL ON DATABASE oa_owner FROM oa_friend CASCADE",
		"REVOKE oa_owner FROM oa_friend" + grantedBy(major, adminIdent, "oa_owner"),
	} {
		if _, err := su.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	c, err = p.Observe(ctx, "oa_owner", "oa_owner")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OtherGrants) != 0 || len(c.OtherMembers) != 0 {
		t.Errorf("after the REVOKEs: %s", redactAdmin(c))
	}
}

// grantedBy is the GRANTED BY clause that revokes, from 16 on, a
// membership the admin granted (before 16 the grantor is not recorded).
func grantedBy(major int, admin, _ string) string {
	if major < 16 {
		return ""
	}
	return " GRANTED BY " + admin
}

// redactAdmin describes the other access of c without the admin's name,
// which no output may carry.
func redactAdmin(c postgres.Catalog) string {
	return strings.ReplaceAll(fmt.Sprintf("grants %+v, members %+v", c.OtherGrants, c.OtherMembers), env.Postgres.AdminUser, "<the admin>")
}
