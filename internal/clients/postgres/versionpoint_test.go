package postgres

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// TestTheMatrixHasAMajorOnEachSideOfEveryBranch: make test runs the tests
// above the SQL (the controllers', the migration's, the docs') on the
// default major and on each of the Makefile's PG_BRANCH_MAJORS only, so
// those majors with the default must take every side of every branch the
// provider's code makes on the major: a new branch at a major no listed
// major is past would leave a side run on no major. The branches are read
// from the code (every comparison of major, or a Major field, with a
// number, in internal/), the majors from the Makefile and hack/lib.sh.
func TestTheMatrixHasAMajorOnEachSideOfEveryBranch(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	cuts := map[int]bool{}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok {
				for c := range majorCuts(b) {
					cuts[c] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int{15, 16, 17} {
		if !cuts[c] {
			t.Errorf("no branch at major %d found, though the code has one: this check reads the code wrong (found %v)", c, cuts)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	lib, err := os.ReadFile(filepath.Join(root, "hack", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	branch := regexp.MustCompile(`(?m)^PG_BRANCH_MAJORS \?= (.*)$`).FindSubmatch(makefile)
	def := regexp.MustCompile(`(?m)^PG_MAJOR=\$\{PG_MAJOR:-(\d+)\}`).FindSubmatch(lib)
	if branch == nil || def == nil {
		t.Fatal("PG_BRANCH_MAJORS in the Makefile or PG_MAJOR in hack/lib.sh not found")
	}
	run := map[int]bool{}
	for _, f := range append(strings.Fields(string(branch[1])), string(def[1])) {
		m, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("major %q: %v", f, err)
		}
		run[m] = true
	}
	// A major's side: how many cuts it is at or past.
	side := func(m int) int {
		n := 0
		for c := range cuts {
			if m >= c {
				n++
			}
		}
		return n
	}
	covered := map[int]bool{}
	for m := range run {
		covered[side(m)] = true
	}
	for m := MinMajor; m <= MaxMajor; m++ {
		if !covered[side(m)] {
			t.Errorf("PostgreSQL %d takes sides of the code's branches on the major (at %v) that neither the default major nor any of PG_BRANCH_MAJORS takes: add %d to PG_BRANCH_MAJORS in the Makefile", m, sortedKeys(cuts), m)
		}
	}
}

// majorCuts are the majors at which the comparison b of major with a number
// changes its answer: major >= 16 and major < 16 change at 16, major > 16
// at 17, major == 16 at 16 and 17.
func majorCuts(b *ast.BinaryExpr) map[int]bool {
	lit, other := b.Y, b.X
	if _, ok := b.X.(*ast.BasicLit); ok {
		lit, other = b.X, b.Y
	}
	l, ok := lit.(*ast.BasicLit)
	if !ok || l.Kind != token.INT || !isMajor(other) {
		return nil
	}
	n, err := strconv.Atoi(l.Value)
	if err != nil {
		return nil
	}
	op := b.Op
	if lit == b.X { // 16 <= major is major >= 16
		op = map[token.Token]token.Token{token.LSS: token.GTR, token.LEQ: token.GEQ, token.GTR: token.LSS, token.GEQ: token.LEQ}[op]
	}
	switch op {
	case token.GEQ, token.LSS:
		return map[int]bool{n: true}
	case token.GTR, token.LEQ:
		return map[int]bool{n + 1: true}
	case token.EQL, token.NEQ:
		return map[int]bool{n: true, n + 1: true}
	}
	return nil
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
