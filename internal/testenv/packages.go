package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The packages' names as users install them; the environment serves them
// from a loopback registry that an ImageConfig rewrites these names to.
const (
	// ProviderPackageName is the provider package's repository.
	ProviderPackageName = "xpkg.crossplane.io/ddupan/provider-postgresql-tenant"
	// ConfigurationPackageName is the Configuration package's repository.
	ConfigurationPackageName = "xpkg.crossplane.io/ddupan/configuration-postgresql-tenant"
	// PackageTestVersion is the tag the environment publishes this tree's
	// packages under.
	PackageTestVersion = "v0.1.0"
	// ProviderName is the Provider object the environment installs, as
	// the docs name it: the name Crossplane's package manager gives the
	// Configuration's provider dependency (its repository path as a DNS
	// label). Under any other name, an upgrade of the provider can leave
	// the dependency briefly unresolved, and the package manager then
	// installs a second Provider of the same package under this name,
	// after which no revision of either resolves its dependencies.
	ProviderName = "ddupan-provider-postgresql-tenant"
	// ConfigurationName is the Configuration object it installs.
	ConfigurationName = "configuration-postgresql-tenant"
)

// registry is a loopback OCI registry (crane's, in memory) that serves the
// packages to core's package manager, over plain HTTP, which the registry
// client uses for loopback addresses only.
type registry struct {
	addr string
	proc *process
}

func startRegistry(ctx context.Context, root, binDir string) (*registry, error) {
	crane := filepath.Join(binDir, "crane")
	if _, err := os.Stat(crane); err != nil {
		return nil, missing("crane", crane, "hack/install-tools.sh crane (make tools)")
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	r := &registry{addr: fmt.Sprintf("127.0.0.1:%d", port)}
	if r.proc, err = startProcess("registry", filepath.Join(root, "registry.log"),
		exec.Command(crane, "registry", "serve", "--address", r.addr)); err != nil { //nolint:gosec,noctx // the pinned crane; runs until stop
		return nil, err
	}
	if err := WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		if r.proc.exited() {
			return errors.New("the registry exited:\n" + Tail(filepath.Join(root, "registry.log"), 10))
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", r.addr)
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// RegistryAddress is the loopback registry's host:port (plain HTTP, which
// Crossplane and crane use for a loopback address).
func (x *Crossplane) RegistryAddress() string { return x.reg.addr }

func (r *registry) stop() {
	if r != nil {
		r.proc.stop(os.Interrupt)
	}
}

// push publishes a package file under its public name (host/repo:tag) at
// <registry>/<host>/<repo>:<tag>.
func (r *registry) push(ctx context.Context, binDir, file, name string) error {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "crane"), "push", file, r.addr+"/"+name).CombinedOutput() //nolint:gosec // the pinned crane
	if err != nil {
		return fmt.Errorf("crane push %s: %w\n%s", name, err, out)
	}
	return nil
}

// buildXpkg builds a package (no runtime image) from a package root.
func buildXpkg(ctx context.Context, binDir, root, out string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "crossplane"), "xpkg", "build", "--package-root="+root, "-o", out) //nolint:gosec // the pinned CLI
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("crossplane xpkg build %s: %w\n%s", root, err, b)
	}
	return nil
}

// PackagesDir builds, once for each content of the tree, the provider
// package (for this machine's platform, runtime image embedded) and the
// Configuration package with hack/build-package.sh, exactly as `make build`
// does, and returns the directory holding them. Test packages running at
// once share the result.
func PackagesDir(ctx context.Context) (string, error) {
	key, err := treeKey()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(CacheDir(), "packages", key)
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return dir, nil
	}
	// One build at a time on a machine: test packages starting together
	// wait for the first one's build instead of each compiling the same.
	lock, err := lockFile(ctx, filepath.Join(CacheDir(), "packages.lock"))
	if err != nil {
		return "", err
	}
	defer lock.Close() //nolint:errcheck // closing releases the lock
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(CacheDir()), "packages-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // best effort
	cmd := exec.CommandContext(ctx, "hack/build-package.sh")
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "OUTPUT="+tmp, "PLATFORMS=linux/"+runtime.GOARCH, "PPT_BIN="+BinDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/build-package.sh: %w\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "done"), nil, 0o600); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "done")); serr == nil {
			return dir, nil // another test package built it first
		}
		return "", err
	}
	pruneOldPackages(filepath.Dir(dir), key)
	return dir, nil
}

// PackagesDirAt builds, once per commit, the packages of an earlier commit
// of this repository with that commit's own hack/build-package.sh (as
// PackagesDir does for the tree) and returns the directory holding them:
// what users installed before they upgrade. The commit's tree is taken
// from git (git archive), never from the work tree.
func PackagesDirAt(ctx context.Context, commit string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", RepoRoot(), "rev-parse", "--verify", commit+"^{commit}").CombinedOutput() //nolint:gosec // git on this repository, a commit the test names
	if err != nil {
		return "", fmt.Errorf("commit %s: %w\n%s (a shallow clone lacks it: fetch the history)", commit, err, out)
	}
	sha := strings.TrimSpace(string(out))
	dir := filepath.Join(CacheDir(), "packages-at", sha[:16]+"-"+runtime.GOARCH)
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(CacheDir(), "packages-at-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // best effort
	src, pkgs := filepath.Join(tmp, "src"), filepath.Join(tmp, "out")
	if err := os.MkdirAll(src, 0o750); err != nil {
		return "", err
	}
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", RepoRoot(), sha, src) //nolint:gosec // the repository's own history
	if b, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", sha, err, b)
	}
	cmd := exec.CommandContext(ctx, "hack/build-package.sh")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "OUTPUT="+pkgs, "PLATFORMS=linux/"+runtime.GOARCH, "PPT_BIN="+BinDir())
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/build-package.sh of %s: %w\n%s", sha, err, b)
	}
	if err := os.WriteFile(filepath.Join(pkgs, "done"), nil, 0o600); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return "", err
	}
	if err := os.Rename(pkgs, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "done")); serr == nil {
			return dir, nil
		}
		return "", err
	}
	return dir, nil
}

// pruneOldPackages removes the packages of earlier trees (all but the five
// newest), so the cache does not grow without bound.
func pruneOldPackages(dir, keep string) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type ent struct {
		name string
		mod  time.Time
	}
	var all []ent
	for _, e := range es {
		if i, err := e.Info(); err == nil && e.Name() != keep {
			all = append(all, ent{e.Name(), i.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod.After(all[j].mod) })
	for i := 4; i < len(all); i++ {
		_ = os.RemoveAll(filepath.Join(dir, all[i].name))
	}
}

// treeKey hashes every file the packages are built from (test files aside).
func treeKey() (string, error) {
	root := RepoRoot()
	h := sha256.New()
	var files []string
	for _, d := range []string{"apis", "cmd", "internal", "package", "examples", "hack/build-package.sh", "hack/lib.sh", "go.mod", "go.sum", "LICENSE"} {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			// A test file is never in a package: a commit that changes
			// only tests reuses the packages built before it.
			if !e.IsDir() && !strings.HasSuffix(p, "_test.go") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	sort.Strings(files)
	for _, f := range files {
		fh, err := os.Open(f) //nolint:gosec // the repository's own files
		if err != nil {
			return "", err
		}
		_, _ = io.WriteString(h, strings.TrimPrefix(f, root)+"\x00")
		_, err = io.Copy(h, fh)
		_ = fh.Close()
		if err != nil {
			return "", err
		}
	}
	_, _ = io.WriteString(h, runtime.GOARCH)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// dependency is one entry of the Configuration's dependsOn.
type dependency struct {
	kind, pkg, version string
}

func configurationDependencies() ([]dependency, error) {
	objs, err := ReadManifests(filepath.Join(RepoRoot(), "package", "configuration", "crossplane.yaml"))
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, errors.New("package/configuration/crossplane.yaml must hold one Configuration")
	}
	deps, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "dependsOn")
	var out []dependency
	for _, d := range deps {
		m, _ := d.(map[string]any)
		dep := dependency{kind: fmt.Sprint(m["kind"]), version: fmt.Sprint(m["version"])}
		for _, k := range []string{"package", "provider", "function", "configuration"} {
			if v, ok := m[k].(string); ok {
				dep.pkg = v
				if k != "package" {
					dep.kind = strings.ToUpper(k[:1]) + k[1:]
				}
			}
		}
		out = append(out, dep)
	}
	return out, nil
}

// tagFor picks the tag a dependency's version constraint admits: the exact
// version, or the lowest version of a ">=" constraint.
func tagFor(constraint string) string {
	c := strings.TrimSpace(constraint)
	for _, p := range []string{">=", "^", "~", "="} {
		c = strings.TrimSpace(strings.TrimPrefix(c, p))
	}
	if i := strings.IndexAny(c, " ,<"); i > 0 {
		c = c[:i]
	}
	return c
}
