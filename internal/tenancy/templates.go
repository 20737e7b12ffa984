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
}

// TemplateProblem returns why a server must not be used, with the
// statements that fix it, or "": any role, a tenant's login included, could
// plant objects (a function or an operator that a victim's query then
// runs as the victim, a table) in a template database, which every
// database later copied from it would hold. The provider copies template0
// only, but template0 must stay unconnectable for that to mean anything,
// and template1 is what other tools and admins copy. PUBLIC's CONNECT on
// template1 alone is the default and harmless; with CREATE in it, it is
// not.
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
// config may be Ready) and only template0's refuses the server.
func TemplateVerdict(s TemplateState, template1 v1alpha1.Template1Policy) (problem, warning string) {
	if template1 != v1alpha1.Template1Warn {
		return TemplateProblem(s), ""
	}
	if t0 := template0Problem(s); t0 != "" {
		problem = templatesMessage([]string{t0})
	}
	if t1 := template1Problem(s); t1 != "" {
		warning = "unhardenedTemplate1 is Warn and " + t1 + ". This provider copies template0 only; databases others create from template1 are exposed"
	}
	return problem, warning
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
