package tenancy

import (
	"fmt"
	"slices"
	"strings"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// The OtherAccess condition of a Database: whether roles other than its
// owner can reach the database through grants the catalog shows. It is
// separate from Ready on purpose: such access may be intended, so it is
// reported, never revoked, and never makes the Database un-Ready; and
// only Ready is relayed to the Tenant's namespace, so the names of other
// roles stay on the cluster-scoped Database.
const (
	// ConditionOtherAccess is the condition type.
	ConditionOtherAccess = "OtherAccess"
	// ReasonOtherRolesHaveAccess (status True): a role other than the
	// owner, the admin and PUBLIC holds a privilege on the database, or is
	// a member of the login role; the message lists them.
	ReasonOtherRolesHaveAccess = "OtherRolesHaveAccess"
	// ReasonOwnerOnly (status False): no such grant or membership.
	ReasonOwnerOnly = "OwnerOnly"
)

// MaxOtherAccessShown bounds the grantees and the members that status and
// the message list (each); the rest are counted.
const MaxOtherAccessShown = 20

// DatabaseGrant is one role's privileges on a database, from its ACL.
type DatabaseGrant struct {
	// Role is the grantee's name.
	Role string `json:"role"`
	// Privileges are CONNECT, TEMPORARY and CREATE as held.
	Privileges []string `json:"privileges"`
	// Grantable are those of Privileges held WITH GRANT OPTION.
	Grantable []string `json:"grantable"`
}

// RoleMembership is one membership in a login role, from pg_auth_members.
type RoleMembership struct {
	// Role is the member's name.
	Role string `json:"role"`
	// Admin: WITH ADMIN OPTION (the member may grant the role onwards).
	Admin bool `json:"admin"`
	// Inherit and Set are the options of the grant from PostgreSQL 16 on;
	// nil before (membership then always allows SET ROLE, and inheriting
	// depends on the member's own INHERIT attribute).
	Inherit *bool `json:"inherit"`
	Set     *bool `json:"set"`
}

// OtherAccessInput is what the catalog shows of access to a tenant's
// database by roles other than its owner: the grantees of privileges on
// the database other than the owner, the login role, the admin and
// PUBLIC, and the members of the login role other than the admin.
type OtherAccessInput struct {
	Database, Role string
	Grants         []DatabaseGrant
	Members        []RoleMembership
	// DataRoles are the Database's own data roles: their CONNECT is what
	// the provider granted, not other access (anything more is).
	DataRoles []string
}

// OtherAccessVerdict is what a Database shows about other access.
type OtherAccessVerdict struct {
	// Present: there is other access (condition True).
	Present bool
	Reason  string
	Message string
	// Status is status.atProvider.otherAccess; nil when there is none.
	Status *v1alpha1.OtherAccessObservation
}

// DecideOtherAccess reports, and never changes, the access roles other
// than the owner have to the database: the grants and memberships sorted
// by role, at most MaxOtherAccessShown of each listed, and a message that
// says how to see all of it and how to remove what is not intended.
func DecideOtherAccess(in OtherAccessInput) OtherAccessVerdict {
	in.Grants = slices.DeleteFunc(slices.Clone(in.Grants), func(g DatabaseGrant) bool {
		return slices.Contains(in.DataRoles, g.Role) && slices.Equal(g.Privileges, []string{"CONNECT"}) && len(g.Grantable) == 0
	})
	if len(in.Grants) == 0 && len(in.Members) == 0 {
		return OtherAccessVerdict{Reason: ReasonOwnerOnly, Message: fmt.Sprintf("no role other than the owner holds a privilege on the database %q or is a member of the role %q", in.Database, in.Role)}
	}
	grants := slices.Clone(in.Grants)
	slices.SortFunc(grants, func(a, b DatabaseGrant) int { return strings.Compare(a.Role, b.Role) })
	members := slices.Clone(in.Members)
	slices.SortFunc(members, func(a, b RoleMembership) int { return strings.Compare(a.Role, b.Role) })

	st := &v1alpha1.OtherAccessObservation{}
	var parts []string
	var revokes []string
	for i, g := range grants {
		if i == MaxOtherAccessShown {
			st.Omitted += len(grants) - i
			break
		}
		privs := privilegeList(g)
		st.Grantees = append(st.Grantees, v1alpha1.DatabaseGrantee{Role: g.Role, Privileges: privs})
		parts = append(parts, fmt.Sprintf("%q holds %s on the database", g.Role, strings.Join(privs, ", ")))
		revokes = append(revokes, fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM %s CASCADE", quoteName(in.Database), quoteName(g.Role)))
	}
	for i, m := range members {
		if i == MaxOtherAccessShown {
			st.Omitted += len(members) - i
			break
		}
		st.Members = append(st.Members, v1alpha1.RoleMember{Role: m.Role, AdminOption: m.Admin, InheritOption: m.Inherit, SetOption: m.Set})
		parts = append(parts, fmt.Sprintf("%q is a member of %q%s", m.Role, in.Role, memberOptions(m)))
		revokes = append(revokes, fmt.Sprintf("REVOKE %s FROM %s", quoteName(in.Role), quoteName(m.Role)))
	}
	if st.Omitted > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", st.Omitted))
	}
	msg := fmt.Sprintf("roles other than the owner %q can reach the database %q: %s. The provider reports this and revokes nothing (it may be intended), and rotating the credential removes none of it. If it is not intended, remove it as the rebind runbook of docs/admins.md shows (%s; then the default privileges and object grants inside the database)",
		in.Role, in.Database, strings.Join(parts, "; "), strings.Join(revokes, "; "))
	return OtherAccessVerdict{Present: true, Reason: ReasonOtherRolesHaveAccess, Message: msg, Status: st}
}

// privilegeList names a grant's privileges in a fixed order, each one held
// with grant option marked so.
func privilegeList(g DatabaseGrant) []string {
	var out []string
	for _, p := range []string{"CONNECT", "TEMPORARY", "CREATE"} {
		if !slices.Contains(g.Privileges, p) {
			continue
		}
		if slices.Contains(g.Grantable, p) {
			p += " WITH GRANT OPTION"
		}
		out = append(out, p)
	}
	for _, p := range g.Privileges {
		if p != "CONNECT" && p != "TEMPORARY" && p != "CREATE" {
			out = append(out, p)
		}
	}
	return out
}

// memberOptions describes a membership's options for a message.
func memberOptions(m RoleMembership) string {
	var o []string
	if m.Admin {
		o = append(o, "ADMIN")
	}
	if m.Inherit != nil && *m.Inherit {
		o = append(o, "INHERIT")
	}
	if m.Set != nil && *m.Set {
		o = append(o, "SET")
	}
	if len(o) == 0 {
		return ""
	}
	return " (WITH " + strings.Join(o, ", ") + ")"
}

// quoteName quotes a name as an SQL identifier, always in double quotes,
// for statements a message suggests.
func quoteName(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
