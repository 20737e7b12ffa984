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
