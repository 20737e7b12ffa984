package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ConvertXRDs writes the CRDs of the Tenant XRD and of the legacy XRD (its
// XR and its claim) into dir, without the owner reference to the XRD object
// (which does not exist here).
func ConvertXRDs(dir string) error {
	bin := filepath.Join(BinDir(), "crossplane")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the Crossplane CLI is not at %s: install it with `make tools` (hack/install-tools.sh crossplane)", bin)
	}
	for i, xrd := range []string{"xrd.yaml", filepath.Join("legacy", "xrd.yaml")} {
		out := filepath.Join(dir, "raw.yaml")
		src := filepath.Join(RepoRoot(), "package", "configuration", xrd)
		if b, err := exec.Command(bin, "xrd", "convert", src, "-o", out).CombinedOutput(); err != nil { //nolint:gosec,noctx // the pinned CLI on the repository's own XRD; runs to completion
			return fmt.Errorf("crossplane xrd convert %s: %w\n%s", xrd, err, b)
		}
		b, err := os.ReadFile(out) //nolint:gosec // the file the CLI just wrote
		if err != nil {
			return err
		}
		if err := os.Remove(out); err != nil {
			return err
		}
		docs, err := SplitYAML(b)
		if err != nil {
			return err
		}
		for j, doc := range docs {
			crd := map[string]any{}
			if err := yaml.Unmarshal(doc, &crd); err != nil {
				return err
			}
			unstructured.RemoveNestedField(crd, "metadata", "ownerReferences")
			clean, err := yaml.Marshal(crd)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("crd-%d-%d.yaml", i, j)), clean, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
