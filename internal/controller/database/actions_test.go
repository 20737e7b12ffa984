package database

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// constantsOf maps the name of each constant of the named type declared in
// the decision core's source to its value: every action the core can
// name.
func constantsOf(t *testing.T, typ string) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../tenancy/*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range files {
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for i, n := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("tenancy.%s: its value is not a string literal", n.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[n.Name] = v
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constant of type %s found in internal/tenancy", typ)
	}
	return out
}

// TestEveryActionOfTheCoreIsTaken: each repair and each data role action
// the decision core can name has its function in the table that takes it;
// one without would be decided and then silently never done.
func TestEveryActionOfTheCoreIsTaken(t *testing.T) {
	for name, v := range constantsOf(t, "Repair") {
		if _, ok := repairs[tenancy.Repair(v)]; !ok {
			t.Errorf("tenancy.%s has no function in the repairs table", name)
		}
	}
	for name, v := range constantsOf(t, "DataRoleAction") {
		if _, ok := dataRoleSteps[tenancy.DataRoleAction(v)]; !ok {
			t.Errorf("tenancy.%s has no step in the data role actions table", name)
		}
	}
}
