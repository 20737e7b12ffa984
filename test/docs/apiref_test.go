package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"ddupan.top/provider-postgresql-tenant/hack/apiref/render"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// The API reference in docs/reference is exactly what hack/apiref renders
// from the CRDs and the Tenant XRD now: a changed field, description,
// default or validation message must come with `make apiref`.
func TestAPIReferenceIsCurrent(t *testing.T) {
	root := testenv.RepoRoot()
	want, err := render.Render(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < len(render.Sources)+1 {
		t.Fatalf("rendered %d pages from %d sources: the generator proves nothing", len(want), len(render.Sources))
	}
	onDisk, err := filepath.Glob(filepath.Join(root, render.OutDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range onDisk {
		name := filepath.Base(f)
		seen[name] = true
		if _, ok := want[name]; !ok {
			t.Errorf("%s/%s is no longer generated: run `make apiref`", render.OutDir, name)
		}
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !seen[n] {
			t.Errorf("%s/%s is missing: run `make apiref`", render.OutDir, n)
			continue
		}
		got, err := os.ReadFile(filepath.Join(root, render.OutDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[n]) {
			t.Errorf("%s/%s differs from the CRDs' schemas: run `make apiref`", render.OutDir, n)
		}
	}
}

// The reference carries what an admin meets at admission: a default, an
// enum and a CEL rule's message of the Database's schema appear on its page.
func TestAPIReferenceShowsDefaultsEnumsAndRules(t *testing.T) {
	pages, err := render.Render(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	db := string(pages["database.md"])
	for _, s := range []string{
		"| `spec.reclaimPolicy` | string |",
		"Default: `\"Retain\"`",
		"One of `Retain`, `Delete`",
		"spec.forProvider.database is immutable",
	} {
		if !bytes.Contains([]byte(db), []byte(s)) {
			t.Errorf("database.md lacks %q", s)
		}
	}
	if !bytes.Contains(pages["tenant.md"], []byte("| `spec.instanceRef` |")) {
		t.Error("tenant.md lacks spec.instanceRef: the XRD was not rendered")
	}
}
