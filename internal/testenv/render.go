package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Function is a composition function the Tenant's Compositions use, with the
// name the Configuration package's dependency gives it in a cluster.
type Function struct {
	Name string // pkg.crossplane.io Function name
	// Source is the package of this repository the function is built from
	// (FunctionBinary); Binary is a file in BinDir() otherwise.
	Source, Binary string
	Package        string // the package the Configuration depends on
	// PackageFile is the function's package in PackagesDir() (Source).
	PackageFile string
}

// TenantFunctions are the functions of package/configuration.
var TenantFunctions = []Function{
	{Name: "ddupan-function-postgresql-tenant", Source: "./cmd/function",
		Package: "xpkg.crossplane.io/ddupan/function-postgresql-tenant:v0.1.0", PackageFile: "function-postgresql-tenant.xpkg"},
}

// binary is the file to run the function from.
func (f Function) binary(ctx context.Context) (string, error) {
	if f.Source != "" {
		return FunctionBinary(ctx, f.Source)
	}
	bin := filepath.Join(BinDir(), f.Binary)
	if _, err := os.Stat(bin); err != nil {
		return "", missing(f.Binary, bin, "hack/install-tools.sh "+f.Binary+" (make tools)")
	}
	return bin, nil
}

// FunctionBinary builds the command src of this repository once for each
// content of the tree (the same key as PackagesDir) and returns its file.
// Test packages running at once share the result.
func FunctionBinary(ctx context.Context, src string) (string, error) {
	key, err := treeKey()
	if err != nil {
		return "", err
	}
	name := filepath.Base(src)
	dir := filepath.Join(CacheDir(), "functions", key)
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp, src) //nolint:gosec // this repository's own command
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", src, err, out)
	}
	// Another test package may have built it first: either file is the
	// same build.
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	pruneOldPackages(filepath.Dir(dir), key)
	return bin, nil
}

// Renderer runs `crossplane composition render` with Crossplane core's
// binary and the real functions running locally (the Development runtime):
// what Crossplane would compose, without a cluster.
type Renderer struct {
	dir       string
	functions string // functions.yaml
	procs     []*process
	logs      []string
}

// StartRenderer starts every function of TenantFunctions on a loopback port
// and writes the functions.yaml that points render at them.
func StartRenderer(dir string) (*Renderer, error) {
	for _, b := range []string{"crossplane", "crossplane-core"} {
		if _, err := os.Stat(filepath.Join(BinDir(), b)); err != nil {
			return nil, missing("Crossplane "+b, filepath.Join(BinDir(), b), "hack/install-tools.sh "+b+" (make tools)")
		}
	}
	// The functions bind FixedMetricsPort when it is free: they start under
	// its lock while the harness holds it, and the lock goes once each
	// serves gRPC and functionSettle has passed (its metrics server has
	// failed by then).
	lock, err := metricsPort().lock(context.Background())
	if err != nil {
		return nil, err
	}
	defer lock.Close() //nolint:errcheck // releases the lock
	if hold := metricsPort().hold(); hold != nil {
		defer hold.Close() //nolint:errcheck // a placeholder
		// Runs before the placeholder goes (defers run last in, first out).
		defer time.Sleep(functionSettle)
	}
	r := &Renderer{dir: dir, functions: filepath.Join(dir, "functions.yaml")}
	var docs []string
	for _, f := range TenantFunctions {
		bin, err := f.binary(context.Background())
		if err != nil {
			r.Stop()
			return nil, err
		}
		port, err := FreePort()
		if err != nil {
			r.Stop()
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		logFile := filepath.Join(dir, filepath.Base(bin)+".log")
		p, err := startProcess(filepath.Base(bin), logFile, exec.Command(bin, "--insecure", "--address="+addr)) //nolint:gosec,noctx // the pinned function; runs until Stop
		if err != nil {
			r.Stop()
			return nil, err
		}
		r.procs, r.logs = append(r.procs, p), append(r.logs, logFile)
		if err := awaitGRPC(context.Background(), p, logFile, addr, nil, time.Minute); err != nil {
			r.Stop()
			return nil, err
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: %s
  annotations:
    render.crossplane.io/runtime: Development
    render.crossplane.io/runtime-development-target: %s
spec:
  package: %s
`, f.Name, addr, f.Package))
	}
	if err := os.WriteFile(r.functions, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// Stop stops the functions.
func (r *Renderer) Stop() {
	for _, p := range r.procs {
		p.stop(syscall.SIGTERM)
	}
}

// Render renders the composite resource xr through the Composition in the
// file composition, with observed as the composed resources that exist
// (none when empty). It returns the desired composite resource and the
// desired composed resources, in render's order.
func (r *Renderer) Render(ctx context.Context, xr *unstructured.Unstructured, composition string, observed ...*unstructured.Unstructured) (*unstructured.Unstructured, []*unstructured.Unstructured, error) {
	f, err := os.CreateTemp(r.dir, "render-*")
	if err != nil {
		return nil, nil, err
	}
	base := f.Name()
	f.Close()             //nolint:errcheck // only a name
	defer os.Remove(base) //nolint:errcheck // best effort
	xrFile, obsFile := base+"-xr.yaml", base+"-observed.yaml"
	defer os.Remove(xrFile)  //nolint:errcheck // best effort
	defer os.Remove(obsFile) //nolint:errcheck // best effort
	if err := writeYAML(xrFile, xr); err != nil {
		return nil, nil, err
	}
	args := []string{"composition", "render", "--crossplane-binary=" + filepath.Join(BinDir(), "crossplane-core"), xrFile, composition, r.functions}
	if len(observed) > 0 {
		if err := writeYAML(obsFile, observed...); err != nil {
			return nil, nil, err
		}
		args = append(args, "--observed-resources="+obsFile)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(BinDir(), "crossplane"), args...) //nolint:gosec // the pinned CLI on the harness's own files
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("crossplane composition render: %w\n%s", err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	docs, err := SplitYAML(stdout.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("cannot split render output: %w", err)
	}
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, nil, fmt.Errorf("cannot parse render output: %w\n%s", err, doc)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		return nil, nil, fmt.Errorf("render printed nothing; stderr:\n%s", stderr.String())
	}
	return objs[0], objs[1:], nil
}

func writeYAML(file string, objs ...*unstructured.Unstructured) error {
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return os.WriteFile(file, []byte(b.String()), 0o600)
}
