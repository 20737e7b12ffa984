package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Const is one constant declared in Go source, as the checks that
// enumerate the code's names (reasons, repairs, actions) read it.
type Const struct {
	// Package is the file's package name, Name the constant's, Type the
	// name of its declared type ("" when it has none).
	Package, Name, Type string
	// Value is its value when it is a string literal; Literal says it is.
	Value   string
	Literal bool
	// Pos is where it is declared (file:line).
	Pos string
}

// Consts reads every constant declared in the non-test Go files under the
// given directories (testdata aside), in file order.
func Consts(dirs ...string) ([]Const, error) {
	var out []Const
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			out = append(out, constsOf(fset, f)...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func constsOf(fset *token.FileSet, f *ast.File) []Const {
	var out []Const
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			typ := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				typ = id.Name
			}
			for i, n := range vs.Names {
				c := Const{Package: f.Name.Name, Name: n.Name, Type: typ, Pos: fset.Position(n.Pos()).String()}
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							c.Value, c.Literal = v, true
						}
					}
				}
				out = append(out, c)
			}
		}
	}
	return out
}
