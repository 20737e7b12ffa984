package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// Every sample `kubectl get` output the docs show for a kind of
// package/crds has the columns kubectl prints for it: NAME, the CRD's
// printer columns of priority 0, in order.
func TestSampleOutputShowsThePrinterColumns(t *testing.T) {
	root := testenv.RepoRoot()
	crds, err := filepath.Glob(filepath.Join(root, "package", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string][]string{}
	for _, f := range crds {
		b, err := os.ReadFile(f) //nolint:gosec // a CRD of this repository
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			h := []string{"NAME"}
			for _, c := range v.AdditionalPrinterColumns {
				if c.Priority == 0 {
					h = append(h, c.Name)
				}
			}
			n := crd.Spec.Names
			for _, k := range []string{n.Plural, n.Singular, n.Plural + "." + crd.Spec.Group, n.Singular + "." + crd.Spec.Group} {
				headers[k] = h
			}
		}
	}
	samples := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f) //nolint:gosec // a doc of this repository
		if err != nil {
			t.Fatal(err)
		}
		var prev []string
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			line := sc.Text()
			cmd := prev
			prev = nil
			if w := strings.Fields(line); len(w) >= 4 && w[0] == "$" && w[1] == "kubectl" && w[2] == "get" {
				prev = w[3:]
				continue
			}
			if len(cmd) == 0 || !strings.HasPrefix(line, "NAME") {
				continue
			}
			want, ok := headers[cmd[0]]
			if !ok {
				continue
			}
			allNamespaces := false
			for _, a := range cmd[1:] {
				if strings.HasPrefix(a, "-o") || strings.HasPrefix(a, "--output") {
					want = nil
				}
				allNamespaces = allNamespaces || a == "-A" || a == "--all-namespaces"
			}
			if want == nil {
				continue
			}
			if allNamespaces {
				want = append([]string{"NAMESPACE"}, want...)
			}
			samples++
			if diff := cmp.Diff(want, strings.Fields(line)); diff != "" {
				t.Errorf("%s: the sample output of `kubectl get %s` has other columns than kubectl prints (-printed +shown):\n%s", filepath.Base(f), strings.Join(cmd, " "), diff)
			}
		}
	}
	if samples == 0 {
		t.Fatal("no sample `kubectl get` output of a provider kind found in the docs")
	}
}
