package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Longest functions allowed, in lines from the func keyword to the closing
// brace. The controllers apply plans in small steps; the rest of
// internal/ may take a little more. The test harness (internal/testenv)
// drives real components and is not held to it.
const (
	maxLines           = 100
	maxControllerLines = 80
	module             = "ddupan.top/provider-postgresql-tenant"
)

type long struct {
	where string
	lines int
}

// longFunctions lists the non-test functions under root longer than the
// limit of their package.
func longFunctions(t *testing.T, root string) []long {
	t.Helper()
	var out []long
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testenv" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		limit := maxLines
		if strings.Contains(filepath.ToSlash(p), "/controller/") {
			limit = maxControllerLines
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > limit {
				out = append(out, long{where: fmt.Sprintf("%s:%d %s", p, start.Line, fn.Name.Name), lines: n})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNoFunctionIsTooLong: a function over its limit is split into steps
// named for what they do.
func TestNoFunctionIsTooLong(t *testing.T) {
	for _, l := range longFunctions(t, "..") {
		t.Errorf("%s is %d lines: split it into named steps (at most %d lines in internal/controller, %d elsewhere in internal/)", l.where, l.lines, maxControllerLines, maxLines)
	}
}

// TestTheLengthCheckFindsALongFunction: the check sees a long function.
func TestTheLengthCheckFindsALongFunction(t *testing.T) {
	dir := t.TempDir()
	body := strings.Repeat("\t_ = 1\n", maxLines)
	if err := os.WriteFile(filepath.Join(dir, "long.go"), []byte("package x\n\nfunc tooLong() {\n"+body+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := longFunctions(t, dir); len(got) != 1 || !strings.HasSuffix(got[0].where, "tooLong") {
		t.Errorf("the length check found %v in a file with one function of %d lines", got, maxLines+2)
	}
}

// siblingImports lists imports of one controller package by another
// under root (internal/controller). A controller package is one that sets
// a controller up (it declares Setup); the packages beside them that hold
// shared machinery (pacing, quiet status writes, requeues, the Tenant
// cache) and the package that registers them all are not controllers.
func siblingImports(t *testing.T, root string) []string {
	t.Helper()
	controllers := map[string]bool{}
	imports := map[string][]string{} // file -> imported controller package names
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || filepath.Dir(p) == filepath.Clean(root) {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "Setup" {
				controllers[filepath.Base(filepath.Dir(p))] = true
			}
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if other, ok := strings.CutPrefix(path, module+"/internal/controller/"); ok {
				imports[p] = append(imports[p], other)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p, others := range imports {
		own := filepath.Base(filepath.Dir(p))
		for _, other := range others {
			if controllers[own] && controllers[other] && other != own {
				out = append(out, fmt.Sprintf("%s imports controller %s", p, other))
			}
		}
	}
	return out
}

// TestNoControllerImportsASibling: what two controllers share lives in a
// neutral package, so that each controller can be read and changed alone.
func TestNoControllerImportsASibling(t *testing.T) {
	for _, s := range siblingImports(t, "../controller") {
		t.Errorf("%s: move what they share into a neutral package (internal/memo holds the shared memories)", s)
	}
}

// TestTheImportCheckFindsASibling: the check sees a controller importing
// another, and not one importing shared machinery.
func TestTheImportCheckFindsASibling(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"binding/x.go":  "package binding\n\nimport (\n\t_ \"" + module + "/internal/controller/database\"\n\t_ \"" + module + "/internal/controller/pace\"\n)\n\nfunc Setup() {}\n",
		"database/x.go": "package database\n\nfunc Setup() {}\n",
		"pace/x.go":     "package pace\n",
	}
	for name, src := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := siblingImports(t, root); len(got) != 1 || !strings.HasSuffix(got[0], "imports controller database") {
		t.Errorf("the import check found %v, want only binding importing the database controller", got)
	}
}
