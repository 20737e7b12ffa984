package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// Every test the documentation names as evidence exists: a renamed or
// removed test must take its claim out of the docs with it.
func TestDocumentedTestsExist(t *testing.T) {
	root := testenv.RepoRoot()
	defined := map[string]bool{}
	def := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "_output") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p) //nolint:gosec // a test file of this repository's own tree
		if err != nil {
			return err
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !defined["TestDocumentedTestsExist"] {
		t.Fatal("the scan found not even this test: it proves nothing")
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	ref := regexp.MustCompile("`(Test[A-Z]\\w*)`")
	missing := map[string][]string{}
	for _, f := range docs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			if !defined[m[1]] {
				missing[m[1]] = append(missing[m[1]], filepath.Base(f))
			}
		}
	}
	var names []string
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("%s is named in %v but no such test exists", n, missing[n])
	}
}
