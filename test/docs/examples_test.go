package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"
	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// xrdCRDs are the CRDs Crossplane core makes of the Configuration's
// XRDs (the Tenant kinds), made with the same code core uses: the printer
// columns core adds (SYNCED, READY, COMPOSITION, AGE) are in them.
func xrdCRDs(t *testing.T, root string) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "package", "configuration", "*", "xrd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "package", "configuration", "xrd.yaml"))
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var xrd xpextv1.CompositeResourceDefinition
		if err := yaml.Unmarshal(b, &xrd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crd, err := xcrd.ForCompositeResource(&xrd)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, *crd)
		if xrd.Spec.ClaimNames != nil {
			claim, err := xcrd.ForCompositeResourceClaim(&xrd)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, *claim)
		}
	}
	return out
}

// Every sample `kubectl get` output the docs show for a kind of
// package/crds or of the Configuration's XRDs has the columns kubectl
// prints for it: NAME, the CRD's printer columns of priority 0, in order.
func TestSampleOutputShowsThePrinterColumns(t *testing.T) {
	root := testenv.RepoRoot()
	crdFiles, err := filepath.Glob(filepath.Join(root, "package", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crds := xrdCRDs(t, root)
	for _, f := range crdFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crds = append(crds, crd)
	}
	headers := map[string][]string{}
	for _, crd := range crds {
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
			for _, k := range append([]string{n.Plural, n.Singular, n.Plural + "." + crd.Spec.Group, n.Singular + "." + crd.Spec.Group}, n.ShortNames...) {
				headers[k] = h
			}
		}
	}
	samples := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
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

// The examples name one OpenBao: the ClusterSecretStore ESO reads through
// is the server the provider's runtime config writes to.
func TestExamplesNameOneOpenBao(t *testing.T) {
	provider, err := testenv.ExampleOpenBaoAddress()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples"))
	if err != nil {
		t.Fatal(err)
	}
	stores := 0
	for _, o := range objs {
		if o.GetKind() != "ClusterSecretStore" && o.GetKind() != "SecretStore" {
			continue
		}
		stores++
		server, _, _ := unstructured.NestedString(o.Object, "spec", "provider", "vault", "server")
		if server != provider {
			t.Errorf("examples: %s %s reads OpenBao at %q, the provider's runtime config names %q", o.GetKind(), o.GetName(), server, provider)
		}
	}
	if stores == 0 {
		t.Fatal("examples/ holds no secret store")
	}
}

// The example admin Secret names the admin role install.md creates.
func TestExampleAdminSecretNamesTheDocumentedRole(t *testing.T) {
	role := ""
	for _, line := range strings.Split(block(t, "install.md", "sql", "admin-role"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "CREATE" && f[1] == "ROLE" {
			role = f[2]
		}
	}
	if role == "" {
		t.Fatal("install.md's admin-role block creates no role")
	}
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "provider"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := 0
	for _, o := range objs {
		if o.GetKind() != "Secret" {
			continue
		}
		secrets++
		if user, _, _ := unstructured.NestedString(o.Object, "stringData", "username"); user != role {
			t.Errorf("examples/provider: Secret %s names the admin role %q, install.md creates %q", o.GetName(), user, role)
		}
	}
	if secrets == 0 {
		t.Fatal("examples/provider holds no admin Secret")
	}
}
