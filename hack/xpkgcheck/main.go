// Command xpkgcheck lints the built packages (OCI image tarballs).
//
//	xpkgcheck provider PACKAGE.xpkg CRD-DIR
//
// checks the runtime entrypoint and user, a package.yaml layer holding the
// Provider metadata with the safe-start capability and every CRD of CRD-DIR
// (and nothing of the Configuration), and an examples layer;
//
//	xpkgcheck configuration PACKAGE.xpkg CONFIG-DIR
//
// checks a package.yaml with the Configuration metadata, its pinned function
// dependencies, every XRD and Composition under CONFIG-DIR, and a Tenant
// example.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) != 4 || (os.Args[1] != "provider" && os.Args[1] != "configuration") {
		fmt.Fprintln(os.Stderr, "usage: xpkgcheck provider|configuration PACKAGE.xpkg DIR")
		os.Exit(2)
	}
	check := checkProvider
	if os.Args[1] == "configuration" {
		check = checkConfiguration
	}
	if err := check(os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "xpkgcheck:", err)
		os.Exit(1)
	}
	fmt.Println("xpkgcheck: ok")
}

func checkProvider(pkg, crdDir string) error {
	files, config, contents, err := open(pkg)
	if err != nil {
		return err
	}
	var cfg struct {
		OS, Architecture string
		Config           struct {
			Entrypoint []string
			User       string
		}
	}
	if err := json.Unmarshal(files[config], &cfg); err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	var problems []string
	if strings.Join(cfg.Config.Entrypoint, " ") != "/provider" || cfg.Config.User != "65532" || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		problems = append(problems, fmt.Sprintf("runtime image: entrypoint %v user %q platform %s/%s, want [/provider] 65532 linux/amd64", cfg.Config.Entrypoint, cfg.Config.User, cfg.OS, cfg.Architecture))
	}
	if _, ok := contents["provider"]; !ok {
		problems = append(problems, "no /provider binary in the runtime image")
	}
	pkgYAML := string(contents["package.yaml"])
	for _, want := range []string{"kind: Provider", "- safe-start"} {
		if !strings.Contains(pkgYAML, want) {
			problems = append(problems, "package.yaml lacks "+want)
		}
	}
	crds, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRDs in %s", crdDir)
	}
	for _, c := range crds {
		name := strings.TrimSuffix(filepath.Base(c), ".yaml")
		parts := strings.SplitN(name, "_", 2)
		if len(parts) != 2 || !strings.Contains(pkgYAML, "name: "+parts[1]+"."+parts[0]) {
			problems = append(problems, "package.yaml lacks the CRD "+name)
		}
	}
	if !strings.Contains(string(contents[".up/examples.yaml"]), "kind: Database") {
		problems = append(problems, "no examples layer with a Database")
	}
	for _, kind := range []string{"CompositeResourceDefinition", "Composition", "ClusterRole"} {
		if strings.Contains(pkgYAML, "kind: "+kind+"\n") {
			problems = append(problems, "the provider package holds a "+kind+" (it belongs to the Configuration)")
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func checkConfiguration(pkg, configDir string) error {
	_, _, contents, err := open(pkg)
	if err != nil {
		return err
	}
	pkgYAML := string(contents["package.yaml"])
	var problems []string
	want := []string{
		"kind: Configuration",
		"package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform\n    version: v0.10.7",
		"package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready\n    version: v0.7.0",
	}
	// Every XRD and Composition of the source directory is in the package.
	err = filepath.WalkDir(configDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p) //nolint:gosec // the repository's own files
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "  name: ") && (strings.Contains(string(b), "kind: Composition\n") || strings.Contains(string(b), "kind: CompositeResourceDefinition\n")) {
				want = append(want, l)
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, w := range want {
		if !strings.Contains(pkgYAML, w) {
			problems = append(problems, fmt.Sprintf("package.yaml lacks %q", w))
		}
	}
	if n := strings.Count(pkgYAML, "kind: Composition\n"); n != 2 {
		problems = append(problems, fmt.Sprintf("%d Compositions in package.yaml, want 2", n))
	}
	if n := strings.Count(pkgYAML, "kind: CompositeResourceDefinition\n"); n != 2 {
		problems = append(problems, fmt.Sprintf("%d XRDs in package.yaml, want 2", n))
	}
	if !strings.Contains(string(contents[".up/examples.yaml"]), "kind: Tenant") {
		problems = append(problems, "no examples layer with a Tenant")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// open reads a package tarball: its files, the image config's file name,
// and the union of its layers' contents.
func open(pkg string) (files map[string][]byte, config string, contents map[string][]byte, err error) {
	if files, err = untar(pkg); err != nil {
		return nil, "", nil, err
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		return nil, "", nil, fmt.Errorf("manifest.json: %v", err)
	}
	contents = map[string][]byte{}
	for _, l := range manifest[0].Layers {
		layer, err := untarGz(files[l])
		if err != nil {
			return nil, "", nil, fmt.Errorf("layer %s: %w", l, err)
		}
		for k, v := range layer {
			contents[k] = v
		}
	}
	return files, manifest[0].Config, contents, nil
}

func untar(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	return readTar(f)
}

func untarGz(b []byte) (map[string][]byte, error) {
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return readTar(z)
}

func readTar(r io.Reader) (map[string][]byte, error) {
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(h.Name, "/")] = b
	}
}
