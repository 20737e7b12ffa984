package tenancy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestDecideOtherAccess(t *testing.T) {
	yes, no := true, false
	many := func(n int) []DatabaseGrant {
		var g []DatabaseGrant
		for i := n - 1; i >= 0; i-- {
			g = append(g, DatabaseGrant{Role: fmt.Sprintf("r%02d", i), Privileges: []string{"CONNECT"}})
		}
		return g
	}
	manyShown := func(n int) []v1alpha1.DatabaseGrantee {
		var g []v1alpha1.DatabaseGrantee
		for i := range n {
			g = append(g, v1alpha1.DatabaseGrantee{Role: fmt.Sprintf("r%02d", i), Privileges: []string{"CONNECT"}})
		}
		return g
	}
	cases := map[string]struct {
		in   OtherAccessInput
		want OtherAccessVerdict
		// msg: substrings the message must hold.
		msg []string
	}{
		"OwnerOnly": {
			in:   OtherAccessInput{Database: "shop", Role: "shop"},
			want: OtherAccessVerdict{Reason: ReasonOwnerOnly},
			msg:  []string{`no role other than the owner holds a privilege on the database "shop" or is a member of the role "shop"`},
		},
		"DataRolesConnectIsNotOtherAccess": {
			in: OtherAccessInput{Database: "shop", Role: "shop", DataRoles: []string{"shop_app", "shop_report"},
				Grants: []DatabaseGrant{{Role: "shop_app", Privileges: []string{"CONNECT"}}, {Role: "shop_report", Privileges: []string{"CONNECT"}}}},
			want: OtherAccessVerdict{Reason: ReasonOwnerOnly},
		},
		"DataRoleWithMoreThanConnect": {
			in: OtherAccessInput{Database: "shop", Role: "shop", DataRoles: []string{"shop_app"},
				Grants: []DatabaseGrant{{Role: "shop_app", Privileges: []string{"CONNECT", "CREATE"}}}},
			want: OtherAccessVerdict{Present: true, Reason: ReasonOtherRolesHaveAccess, Status: &v1alpha1.OtherAccessObservation{
				Grantees: []v1alpha1.DatabaseGrantee{{Role: "shop_app", Privileges: []string{"CONNECT", "CREATE"}}},
			}},
			msg: []string{`"shop_app" holds CONNECT, CREATE on the database`},
		},
		"GrantAndMembershipBefore16": {
			in: OtherAccessInput{Database: "shop", Role: "shop",
				Grants:  []DatabaseGrant{{Role: "erp", Privileges: []string{"TEMPORARY", "CONNECT"}, Grantable: []string{"CONNECT"}}},
				Members: []RoleMembership{{Role: "friend", Admin: true}},
			},
			want: OtherAccessVerdict{Present: true, Reason: ReasonOtherRolesHaveAccess, Status: &v1alpha1.OtherAccessObservation{
				Grantees: []v1alpha1.DatabaseGrantee{{Role: "erp", Privileges: []string{"CONNECT WITH GRANT OPTION", "TEMPORARY"}}},
				Members:  []v1alpha1.RoleMember{{Role: "friend", AdminOption: true}},
			}},
			msg: []string{
				`roles other than the owner "shop" can reach the database "shop"`,
				`"erp" holds CONNECT WITH GRANT OPTION, TEMPORARY on the database`,
				`"friend" is a member of "shop" (WITH ADMIN)`,
				`revokes nothing (it may be intended)`,
				`REVOKE ALL ON DATABASE "shop" FROM "erp" CASCADE; REVOKE "shop" FROM "friend"`,
				`docs/admins.md`,
			},
		},
		"MembershipOptions16": {
			in: OtherAccessInput{Database: "shop", Role: "shop",
				Members: []RoleMembership{{Role: "b", Inherit: &yes, Set: &no}, {Role: "a", Inherit: &no, Set: &yes}},
			},
			want: OtherAccessVerdict{Present: true, Reason: ReasonOtherRolesHaveAccess, Status: &v1alpha1.OtherAccessObservation{
				Members: []v1alpha1.RoleMember{{Role: "a", InheritOption: &no, SetOption: &yes}, {Role: "b", InheritOption: &yes, SetOption: &no}},
			}},
			msg: []string{`"a" is a member of "shop" (WITH SET); "b" is a member of "shop" (WITH INHERIT)`},
		},
		"CreateOnlyAndOddNames": {
			in: OtherAccessInput{Database: "shop", Role: "shop",
				Grants: []DatabaseGrant{{Role: `we"ird`, Privileges: []string{"CREATE"}}},
			},
			want: OtherAccessVerdict{Present: true, Reason: ReasonOtherRolesHaveAccess, Status: &v1alpha1.OtherAccessObservation{
				Grantees: []v1alpha1.DatabaseGrantee{{Role: `we"ird`, Privileges: []string{"CREATE"}}},
			}},
			msg: []string{`REVOKE ALL ON DATABASE "shop" FROM "we""ird" CASCADE`},
		},
		"ManyAreCounted": {
			in: OtherAccessInput{Database: "shop", Role: "shop", Grants: many(MaxOtherAccessShown + 3)},
			want: OtherAccessVerdict{Present: true, Reason: ReasonOtherRolesHaveAccess, Status: &v1alpha1.OtherAccessObservation{
				Grantees: manyShown(MaxOtherAccessShown), Omitted: 3,
			}},
			msg: []string{`"r00" holds CONNECT`, "and 3 more"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideOtherAccess(tc.in)
			for _, m := range tc.msg {
				if !strings.Contains(got.Message, m) {
					t.Errorf("message %q lacks %q", got.Message, m)
				}
			}
			got.Message = ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

// The input is not reordered in place: the caller's catalog stays as read.
func TestDecideOtherAccessKeepsItsInput(t *testing.T) {
	in := OtherAccessInput{Database: "d", Role: "d", Grants: []DatabaseGrant{{Role: "b"}, {Role: "a"}}}
	DecideOtherAccess(in)
	if in.Grants[0].Role != "b" {
		t.Error("DecideOtherAccess sorted its input")
	}
}
