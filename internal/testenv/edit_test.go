package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// updateMarker, in a comment on an Update call's line or the line above it,
// says why that write needs no retry (no controller writes the object: the
// test's own Secret, say).
const updateMarker = "unguarded-update:"

// TestTestsUpdateOnlyThroughEdit refuses a read-then-update in the
// project's test code outside Edit/EditStatus: a controller writes the same
// objects (their status at least), and a plain Update loses to its write
// now and then, failing a CI run on nothing but timing. A write of an
// object no controller writes says so with updateMarker and a reason.
func TestTestsUpdateOnlyThroughEdit(t *testing.T) {
	root := RepoRoot()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "_output" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || rel == filepath.Join("internal", "testenv", "edit.go") {
			return nil
		}
		// Test files, and the test programs and harness (non-test files
		// under test/ and internal/testenv/).
		if !strings.HasSuffix(path, "_test.go") && !strings.HasPrefix(rel, "test"+string(filepath.Separator)) &&
			!strings.HasPrefix(rel, filepath.Join("internal", "testenv")+string(filepath.Separator)) {
			return nil
		}
		bad = append(bad, unguardedUpdates(t, path, rel)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("Update calls outside testenv.Edit/EditStatus (use them: a controller writes these objects too and a plain read-then-update loses to its writes; or say why no one else writes the object with a comment %q on the line or the line above):\n  %s",
			updateMarker+" <why>", strings.Join(bad, "\n  "))
	}
}

func unguardedUpdates(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	marked := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if strings.Contains(c.Text, updateMarker) {
				l := fset.Position(c.Slash).Line
				marked[l], marked[l+1] = true, true
			}
		}
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Update" || len(call.Args) < 2 {
			return true
		}
		if l := fset.Position(call.Pos()).Line; !marked[l] {
			bad = append(bad, rel+":"+strconv.Itoa(l))
		}
		return true
	})
	return bad
}

// TestTheUpdateCheckFindsAPlainUpdate: the check above flags a read-then-
// update and takes a marked one.
func TestTheUpdateCheckFindsAPlainUpdate(t *testing.T) {
	dir := t.TempDir()
	src := `package x

func f() {
	_ = c.Update(ctx, obj)
	_ = c.Status().Update(ctx, obj)
	// unguarded-update: the test's own Secret
	_ = c.Update(ctx, secret)
	_ = h.Update(b) // one argument: not a client
}
`
	p := filepath.Join(dir, "x_test.go")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := unguardedUpdates(t, p, "x_test.go")
	want := []string{"x_test.go:4", "x_test.go:5"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("flagged %v, want %v", got, want)
	}
}

// TestUniqueName: names valid for Kubernetes (DNS-1123) and PostgreSQL,
// at most 40 characters, never the same twice.
func TestUniqueName(t *testing.T) {
	seen := map[string]bool{}
	for _, prefix := range []string{"db-Shop", "a-very-long-prefix-that-goes-on-and-on-and-on", "x"} {
		for range 100 {
			n := UniqueName(prefix)
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 || len(n) > 40 {
				t.Fatalf("UniqueName(%q) = %q: %v (%d characters)", prefix, n, errs, len(n))
			}
			if seen[n] {
				t.Fatalf("UniqueName(%q) gave %q twice", prefix, n)
			}
			seen[n] = true
		}
	}
}
