// Command xpkgcheck lints a built provider package (an OCI image tarball):
// the runtime entrypoint and user, a package.yaml layer holding the Provider
// metadata with the safe-start capability and every CRD of package/crds, and
// an examples layer.
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
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: xpkgcheck PACKAGE.xpkg CRD-DIR")
		os.Exit(2)
	}
	if err := check(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "xpkgcheck:", err)
		os.Exit(1)
	}
	fmt.Println("xpkgcheck: ok")
}

func check(pkg, crdDir string) error {
	files, err := untar(pkg)
	if err != nil {
		return err
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		return fmt.Errorf("manifest.json: %v", err)
	}
	var cfg struct {
		OS, Architecture string
		Config           struct {
			Entrypoint []string
			User       string
		}
	}
	if err := json.Unmarshal(files[manifest[0].Config], &cfg); err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	var problems []string
	if strings.Join(cfg.Config.Entrypoint, " ") != "/provider" || cfg.Config.User != "65532" || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		problems = append(problems, fmt.Sprintf("runtime image: entrypoint %v user %q platform %s/%s, want [/provider] 65532 linux/amd64", cfg.Config.Entrypoint, cfg.Config.User, cfg.OS, cfg.Architecture))
	}
	contents := map[string][]byte{}
	for _, l := range manifest[0].Layers {
		layer, err := untarGz(files[l])
		if err != nil {
			return fmt.Errorf("layer %s: %w", l, err)
		}
		for k, v := range layer {
			contents[k] = v
		}
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
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
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
