package postgres

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryBranchOnTheMajorIsAVersionPoint: a function of this package that
// compares the server's major version (major, or a Major field) calls
// versionPoint, so that the test harness hears every place where what runs
// differs by major, and a test run on one major only cannot hide one.
func TestEveryBranchOnTheMajorIsAVersionPoint(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "versionPoint" {
				continue
			}
			if branchesOnMajor(fn.Body) {
				checked++
				if !callsVersionPoint(fn.Body) {
					t.Errorf("%s: %s branches on the server's major version and calls no versionPoint", fset.Position(fn.Pos()), fn.Name.Name)
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("found %d functions that branch on the major; this check reads the code wrong (there are at least 10)", checked)
	}
}

func isMajor(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "major"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Major"
	}
	return false
}

// branchesOnMajor: the body compares major (or .Major) with something.
func branchesOnMajor(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if b, ok := n.(*ast.BinaryExpr); ok {
			switch b.Op {
			case token.LSS, token.LEQ, token.GTR, token.GEQ, token.EQL, token.NEQ:
				if isMajor(b.X) || isMajor(b.Y) {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

func callsVersionPoint(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "versionPoint" {
				found = true
			}
		}
		return !found
	})
	return found
}
