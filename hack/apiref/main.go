// Command apiref writes the API reference, docs/reference/*.md, from the
// provider's CRDs (package/crds) and the Tenant XRD
// (package/configuration/xrd.yaml). Run it from the repository root (make
// apiref); test/docs fails when the committed pages differ from its output.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"ddupan.top/provider-postgresql-tenant/hack/apiref/render"
)

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "apiref:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	pages, err := render.Render(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, render.OutDir)
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // a docs directory of the repository, readable by all
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old { // pages of kinds that no longer exist
		if _, ok := pages[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, b := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil { //nolint:gosec // a committed doc, readable by all
			return err
		}
	}
	fmt.Printf("apiref: %d pages in %s (%s)\n", len(pages), render.OutDir, strings.Join(render.Sources, ", "))
	return nil
}
