package tenancy

import (
	"fmt"
	"strings"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// ReasonUnsafeTemplates is the reason of a config whose server lets others
// plant objects in the template databases new databases are copied from.
const ReasonUnsafeTemplates = "UnsafeTemplates"

// TemplateState is what a health check read of the server's template
// databases.
type TemplateState struct {
	// Template0AllowConn: template0 accepts connections (datallowconn).
	Template0AllowConn bool
	// Template1PublicConnect: PUBLIC may connect to template1 (the
	// PostgreSQL default on every version).
	Template1PublicConnect bool
	// Template1PublicCreate: PUBLIC may create schemas in template1.
	Template1PublicCreate bool
	// Template1CreateSchemas are template1's schemas in which PUBLIC may
	// create objects (read only when PUBLIC may connect to template1; on
	// PostgreSQL 14 and servers upgraded from it, "public").
	Template1CreateSchemas []string
	// DefaultConnect is who may connect to postgres and template1, the
	// databases every role may connect to by PostgreSQL's default (one
	// entry for each that exists; ConnectWarning).
	DefaultConnect []DatabaseConnect
}

// DatabaseConnect is who may connect to one of the databases every role
// may connect to by PostgreSQL's default.
type DatabaseConnect struct {
	// Database is postgres or template1.
	Database string
	// Public: PUBLIC may connect to it.
	Public bool
	// AdminOwn: the admin role may connect to it other than through PUBLIC:
	// it owns it, holds CONNECT by a grant to itself or to a role whose
	// privileges it inherits, or is a superuser.
	AdminOwn bool
	// AdminSessions: the admin role's sessions are on it (it is the config's
	// spec.endpoint.database).
	AdminSessions bool
}

// TemplateProblem returns why a server must not be used, with the
// statements that fix it, or "": any role, a tenant's login included, could
// plant objects (a function or an operator that a victim's query then
// runs as the victim, a table) in a template database, which every
// database later copied from it would hold. The provider copies template0
// only, but template0 must stay unconnectable for that to mean anything,
// and template1 is what other tools and admins copy. PUBLIC's CONNECT on
// template1 alone is the default and plants nothing (ConnectWarning warns
// of it); with CREATE in it, it is a problem.
func TemplateProblem(s TemplateState) string {
	var p []string
	if t0 := template0Problem(s); t0 != "" {
		p = append(p, t0)
	}
	if t1 := template1Problem(s); t1 != "" {
		p = append(p, t1)
	}
	return templatesMessage(p)
}

// TemplateVerdict is TemplateProblem under a config's policy for an
// unhardened template1: with Warn, template1's problem is a warning (the
// config may be Ready) and only template0's refuses the server. PUBLIC's
// CONNECT on postgres or template1 is a warning under either policy
// (ConnectWarning). Several warnings are joined by "; WARNING: ", as the
// config's Ready message shows each.
func TemplateVerdict(s TemplateState, template1 v1alpha1.Template1Policy) (problem, warning string) {
	var warnings []string
	if template1 != v1alpha1.Template1Warn {
		problem = TemplateProblem(s)
	} else {
		if t0 := template0Problem(s); t0 != "" {
			problem = templatesMessage([]string{t0})
		}
		if t1 := template1Problem(s); t1 != "" {
			warnings = append(warnings, "unhardenedTemplate1 is Warn and "+t1+". This provider copies template0 only; databases others create from template1 are exposed")
		}
	}
	if c := ConnectWarning(s); c != "" {
		warnings = append(warnings, c)
	}
	return problem, strings.Join(warnings, "; WARNING: ")
}

// ConnectWarning returns a warning naming the statements that end it when
// PUBLIC may connect to postgres or template1, or "". Every role may, by
// PostgreSQL's default, so every login role and data role the provider
// makes can open sessions there: each takes a connection slot, reads what
// PUBLIC may read there (the database's catalogs, and whatever admins or
// extensions keep in it) and creates temporary tables. No tenant's
// database is reachable that way, so it is a warning, not a refusal:
// existing servers stay usable. The admin role must keep CONNECT on the
// database its sessions are on: the warning says whether it holds it other
// than through PUBLIC, and when it does not, puts the GRANT to it before
// the REVOKE. An admin role that may no longer connect there at all
// (PUBLIC's CONNECT revoked first) is warned of too: its open sessions go
// on, but every new one is refused.
func ConnectWarning(s TemplateState) string {
	var dbs, grants, stmts, warnings []string
	admin := ""
	for _, d := range s.DefaultConnect {
		q := quoteIdent(d.Database)
		if !d.Public {
			if d.AdminSessions && !d.AdminOwn {
				warnings = append(warnings, fmt.Sprintf("the admin role's sessions are on %s, where neither it nor PUBLIC holds CONNECT: the sessions it has go on, but every new one is refused (InsufficientPrivileges): as a superuser (or the database's owner), run GRANT CONNECT ON DATABASE %s TO <the admin role>", q, q))
			}
			continue
		}
		dbs = append(dbs, q)
		stmts = append(stmts, "REVOKE CONNECT ON DATABASE "+q+" FROM PUBLIC", "GRANT CONNECT ON DATABASE "+q+" TO <the roles that need it>")
		switch {
		case !d.AdminSessions:
		case d.AdminOwn:
			admin = fmt.Sprintf(". The admin role's sessions are on %s, where it holds CONNECT of its own, which the REVOKE leaves", q)
		default:
			grants = append(grants, "GRANT CONNECT ON DATABASE "+q+" TO <the admin role>")
			admin = fmt.Sprintf(". The admin role's sessions are on %s, where it may connect only through PUBLIC: grant it CONNECT before the REVOKE (the first statement), or the provider can open no new session there", q)
		}
	}
	if len(dbs) > 0 {
		warnings = append([]string{fmt.Sprintf("PUBLIC may connect to %s (PostgreSQL's default), so every login role and data role this provider makes can open sessions there, each session taking a connection slot, reading what PUBLIC may read there and creating temporary tables: as a superuser (or the database's owner), run %s%s", strings.Join(dbs, " and "), strings.Join(append(grants, stmts...), "; "), admin)}, warnings...)
	}
	return strings.Join(warnings, "; WARNING: ")
}

func templatesMessage(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return "the server's template databases are not safe: " + strings.Join(p, ". Also, ") + ". The config stays not Ready until then; nothing is created on this server"
}

func template0Problem(s TemplateState) string {
	if !s.Template0AllowConn {
		return ""
	}
	return "template0 accepts connections (datallowconn is true), so anyone who may connect to it can change what every new database is copied from: as a superuser, run ALTER DATABASE template0 ALLOW_CONNECTIONS false"
}

func template1Problem(s TemplateState) string {
	if !s.Template1PublicConnect || (!s.Template1PublicCreate && len(s.Template1CreateSchemas) == 0) {
		return ""
	}
	var where, fix []string
	if s.Template1PublicCreate {
		where = append(where, "create schemas in it")
		fix = append(fix, "REVOKE CREATE ON DATABASE template1 FROM PUBLIC")
	}
	if len(s.Template1CreateSchemas) > 0 {
		q := make([]string, len(s.Template1CreateSchemas))
		for i, n := range s.Template1CreateSchemas {
			q[i] = quoteIdent(n)
			fix = append(fix, "REVOKE CREATE ON SCHEMA "+q[i]+" FROM PUBLIC")
		}
		where = append(where, "create objects in its schema(s) "+strings.Join(q, ", "))
	}
	return fmt.Sprintf("PUBLIC may connect to template1 and %s, so any tenant could plant functions, operators or tables there that every database later copied from template1 holds: as template1's owner (a superuser), connected to template1, run %s; or run REVOKE CONNECT ON DATABASE template1 FROM PUBLIC (where the admin role can do neither, as on a managed service, set the config's unhardenedTemplate1 to Warn)", strings.Join(where, " and "), strings.Join(fix, "; "))
}

// quoteIdent quotes a PostgreSQL identifier for a statement a human runs:
// as it is when it needs no quotes, else in double quotes.
func quoteIdent(s string) string {
	plain := s != ""
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || (i > 0 && (r >= '0' && r <= '9' || r == '$'))) {
			plain = false
		}
	}
	if plain {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
