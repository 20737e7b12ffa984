package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestTemplateProblem(t *testing.T) {
	cases := map[string]struct {
		s    TemplateState
		want []string // statements the message must name; nil: no problem
		not  []string
	}{
		"Defaults15AndLater": {s: TemplateState{Template1PublicConnect: true}},
		"ConnectRevoked":     {s: TemplateState{}},
		// Without CONNECT nobody but the owner reaches template1's schemas.
		"CreateWithoutConnect": {s: TemplateState{Template1PublicCreate: true, Template1CreateSchemas: []string{"public"}}},
		"Default14": {
			s:    TemplateState{Template1PublicConnect: true, Template1CreateSchemas: []string{"public"}},
			want: []string{"REVOKE CREATE ON SCHEMA public FROM PUBLIC", "REVOKE CONNECT ON DATABASE template1 FROM PUBLIC", "connected to template1"},
			not:  []string{"template0", "ON DATABASE template1 FROM PUBLIC;"},
		},
		"QuotedSchema": {
			s:    TemplateState{Template1PublicConnect: true, Template1CreateSchemas: []string{"App", "public"}},
			want: []string{`REVOKE CREATE ON SCHEMA "App" FROM PUBLIC; REVOKE CREATE ON SCHEMA public FROM PUBLIC`},
		},
		"CreateOnTemplate1": {
			s:    TemplateState{Template1PublicConnect: true, Template1PublicCreate: true},
			want: []string{"REVOKE CREATE ON DATABASE template1 FROM PUBLIC", "create schemas in it"},
		},
		"Template0AcceptsConnections": {
			s:    TemplateState{Template0AllowConn: true, Template1PublicConnect: true},
			want: []string{"ALTER DATABASE template0 ALLOW_CONNECTIONS false", "as a superuser"},
			not:  []string{"template1"},
		},
		"Both": {
			s:    TemplateState{Template0AllowConn: true, Template1PublicConnect: true, Template1CreateSchemas: []string{"public"}},
			want: []string{"ALTER DATABASE template0 ALLOW_CONNECTIONS false", "REVOKE CREATE ON SCHEMA public FROM PUBLIC"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := TemplateProblem(tc.s)
			if (got == "") != (tc.want == nil) {
				t.Fatalf("TemplateProblem(%+v) = %q", tc.s, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("message lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("message has %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestQuoteIdent(t *testing.T) {
	got := []string{quoteIdent("public"), quoteIdent("App"), quoteIdent(`a"b`), quoteIdent("s1$"), quoteIdent("1s")}
	if diff := cmp.Diff([]string{"public", `"App"`, `"a""b"`, "s1$", `"1s"`}, got); diff != "" {
		t.Error(diff)
	}
}

// With unhardenedTemplate1 Warn, template1's problem is a warning and only
// template0's refuses the server; with Refuse (or unset) both refuse.
func TestTemplateVerdict(t *testing.T) {
	t1 := TemplateState{Template1PublicConnect: true, Template1CreateSchemas: []string{"public"}}
	t0 := TemplateState{Template0AllowConn: true, Template1PublicConnect: true}
	both := TemplateState{Template0AllowConn: true, Template1PublicConnect: true, Template1CreateSchemas: []string{"public"}}
	defaultConnect := []DatabaseConnect{{Database: "postgres", Public: true, AdminSessions: true}, {Database: "template1", Public: true}}
	defaults := TemplateState{Template1PublicConnect: true, DefaultConnect: defaultConnect}
	t1Defaults := TemplateState{Template1PublicConnect: true, Template1CreateSchemas: []string{"public"}, DefaultConnect: defaultConnect}
	cases := map[string]struct {
		s                   TemplateState
		policy              v1alpha1.Template1Policy
		refused, warned     bool
		problemHas, warnHas string
	}{
		"Template1Unset":  {s: t1, refused: true, problemHas: "unhardenedTemplate1 to Warn"},
		"Template1Refuse": {s: t1, policy: v1alpha1.Template1Refuse, refused: true, problemHas: "REVOKE CREATE ON SCHEMA public"},
		"Template1Warn":   {s: t1, policy: v1alpha1.Template1Warn, warned: true, warnHas: "copies template0 only"},
		"Template0Warn":   {s: t0, policy: v1alpha1.Template1Warn, refused: true, problemHas: "template0 accepts connections"},
		"BothWarn":        {s: both, policy: v1alpha1.Template1Warn, refused: true, warned: true, problemHas: "template0", warnHas: "REVOKE CREATE ON SCHEMA public"},
		"HardenedWarn":    {s: TemplateState{Template1PublicConnect: true}, policy: v1alpha1.Template1Warn},
		// PUBLIC's CONNECT on postgres and template1 is a warning under
		// either policy, beside template1's own warning under Warn.
		"ConnectRefuse":     {s: defaults, warned: true, warnHas: "REVOKE CONNECT ON DATABASE postgres FROM PUBLIC"},
		"ConnectWarn":       {s: defaults, policy: v1alpha1.Template1Warn, warned: true, warnHas: "REVOKE CONNECT ON DATABASE template1 FROM PUBLIC"},
		"Template1AndConn":  {s: t1Defaults, policy: v1alpha1.Template1Warn, warned: true, warnHas: "are exposed; WARNING: PUBLIC may connect to postgres and template1"},
		"RefusedAndConnect": {s: t1Defaults, refused: true, warned: true, problemHas: "REVOKE CREATE ON SCHEMA public", warnHas: "PUBLIC may connect to postgres"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			problem, warning := TemplateVerdict(tc.s, tc.policy)
			if diff := cmp.Diff([2]bool{tc.refused, tc.warned}, [2]bool{problem != "", warning != ""}); diff != "" {
				t.Fatalf("refused, warned (-want +got):\n%s\nproblem: %q\nwarning: %q", diff, problem, warning)
			}
			if !strings.Contains(problem, tc.problemHas) || !strings.Contains(warning, tc.warnHas) {
				t.Errorf("problem %q should name %q, warning %q should name %q", problem, tc.problemHas, warning, tc.warnHas)
			}
			if tc.warned && strings.Contains(warning, "template0 accepts") {
				t.Errorf("the warning names template0's problem: %q", warning)
			}
		})
	}
}

// PUBLIC's CONNECT on postgres and template1 is warned of with the
// statements that end it, in the order to run them: the admin role's own
// CONNECT first where its sessions are and it has none but PUBLIC's.
func TestConnectWarning(t *testing.T) {
	const (
		grantAdmin = "GRANT CONNECT ON DATABASE postgres TO <the admin role>"
		revokePG   = "REVOKE CONNECT ON DATABASE postgres FROM PUBLIC"
		grantPG    = "GRANT CONNECT ON DATABASE postgres TO <the roles that need it>"
		revokeT1   = "REVOKE CONNECT ON DATABASE template1 FROM PUBLIC"
		grantT1    = "GRANT CONNECT ON DATABASE template1 TO <the roles that need it>"
	)
	cases := map[string]struct {
		dc    []DatabaseConnect
		stmts []string // the statements it names, in order; nil: no warning
		says  []string
		not   []string
	}{
		"NoneRead": {},
		"Revoked":  {dc: []DatabaseConnect{{Database: "postgres", AdminOwn: true, AdminSessions: true}, {Database: "template1"}}},
		"DefaultsAdminOnPostgres": {
			dc:    []DatabaseConnect{{Database: "postgres", Public: true, AdminSessions: true}, {Database: "template1", Public: true}},
			stmts: []string{grantAdmin, revokePG, grantPG, revokeT1, grantT1},
			says:  []string{"PUBLIC may connect to postgres and template1 (PostgreSQL's default)", "login role and data role", "a connection slot", "reading what PUBLIC may read there", "temporary tables", "sessions are on postgres, where it may connect only through PUBLIC", "before the REVOKE"},
			not:   []string{"of its own"},
		},
		"AdminHoldsItsOwnConnect": {
			dc:    []DatabaseConnect{{Database: "postgres", Public: true, AdminOwn: true, AdminSessions: true}, {Database: "template1", Public: true}},
			stmts: []string{revokePG, grantPG, revokeT1, grantT1},
			says:  []string{"sessions are on postgres, where it holds CONNECT of its own, which the REVOKE leaves"},
			not:   []string{"<the admin role>", "only through PUBLIC"},
		},
		"AdminOnAnotherDatabase": {
			dc:    []DatabaseConnect{{Database: "postgres", Public: true}, {Database: "template1", Public: true}},
			stmts: []string{revokePG, grantPG, revokeT1, grantT1},
			not:   []string{"admin role"},
		},
		// The admin's database is hardened already: only template1 is left,
		// and the admin's CONNECT there does not matter.
		"OnlyTemplate1": {
			dc:    []DatabaseConnect{{Database: "postgres", AdminOwn: true, AdminSessions: true}, {Database: "template1", Public: true}},
			stmts: []string{revokeT1, grantT1},
			says:  []string{"PUBLIC may connect to template1 ("},
			not:   []string{"postgres", "admin role"},
		},
		// PUBLIC's CONNECT was revoked before the admin had its own: its
		// open sessions go on, a new one is refused.
		"AdminLostItsConnect": {
			dc:    []DatabaseConnect{{Database: "postgres", AdminSessions: true}, {Database: "template1"}},
			stmts: []string{grantAdmin},
			says:  []string{"the admin role's sessions are on postgres, where neither it nor PUBLIC holds CONNECT", "every new one is refused"},
			not:   []string{"PUBLIC may connect", "WARNING"},
		},
		"AdminLostItAndTemplate1": {
			dc:    []DatabaseConnect{{Database: "postgres", AdminSessions: true}, {Database: "template1", Public: true}},
			stmts: []string{revokeT1, grantT1, grantAdmin},
			says:  []string{"PUBLIC may connect to template1 (", "; WARNING: the admin role's sessions are on postgres, where neither"},
		},
		"NoPostgresDatabase": {
			dc:    []DatabaseConnect{{Database: "template1", Public: true, AdminOwn: true}},
			stmts: []string{revokeT1, grantT1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ConnectWarning(TemplateState{Template1PublicConnect: true, DefaultConnect: tc.dc})
			if diff := cmp.Diff(tc.stmts, statementsOf(got)); diff != "" {
				t.Errorf("statements (-want +got):\n%s\nwarning: %q", diff, got)
			}
			for _, w := range tc.says {
				if !strings.Contains(got, w) {
					t.Errorf("warning lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("warning has %q:\n%s", w, got)
				}
			}
		})
	}
}

// statementsOf returns the statements a ConnectWarning names, in order
// (nil for "").
func statementsOf(w string) []string {
	const run = "(or the database's owner), run "
	var out []string
	for {
		i := strings.Index(w, run)
		if i < 0 {
			return out
		}
		w = w[i+len(run):]
		list, _, _ := strings.Cut(w, ". ")
		list, _, _ = strings.Cut(list, "; WARNING: ")
		out = append(out, strings.Split(list, "; ")...)
	}
}
