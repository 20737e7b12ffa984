package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a build output in miniature: what hack/build-package.sh
// writes, with small stand-ins for the binaries.
type fixture struct {
	platforms    []string
	host         string
	providerMeta string // the Provider's package.yaml head
	functionMeta string // the Function's package.yaml head
	// functionInput is the input schema in the Function's package;
	// functionEntry the entrypoint of its image.
	functionInput, functionEntry string
	configMeta                   string // the Configuration's crossplane.yaml, in the package
	sourceMeta                   string // and in its source directory
	license                      string
	configArch                   map[string]string // image config architecture per platform
	binaryArch                   map[string]uint16 // ELF machine of /provider per platform
	indexOmits                   string            // a platform left out of the index
	stableFrom                   string            // the platform copied to the stable path
	labels                       string            // the runtime image's labels, JSON
}

const goodProviderMeta = `apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-postgresql-tenant
  annotations:
    friendly-name.meta.crossplane.io: Provider PostgreSQL Tenant
    friendly-group-name.meta.crossplane.io/example.org: Example Databases
    friendly-kind-name.meta.crossplane.io/database.example.org: Database
    meta.crossplane.io/maintainer: The Authors <authors@example.org>
    meta.crossplane.io/source: https://example.org/provider-postgresql-tenant.git
    meta.crossplane.io/license: Apache-2.0
    meta.crossplane.io/description: Databases.
    meta.crossplane.io/readme: |
      Longer.
spec:
  capabilities:
  - safe-start
`

const goodConfigMeta = `apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-postgresql-tenant
  annotations:
    friendly-name.meta.crossplane.io: Configuration PostgreSQL Tenant
    friendly-group-name.meta.crossplane.io/example.org: Example Tenants
    friendly-kind-name.meta.crossplane.io/tenant.example.org: Tenant
    friendly-group-name.meta.crossplane.io/legacy.example.org: Example Tenants (legacy claims)
    friendly-kind-name.meta.crossplane.io/xtenant.legacy.example.org: Tenant (legacy)
    meta.crossplane.io/maintainer: The Authors <authors@example.org>
    meta.crossplane.io/source: https://example.org/provider-postgresql-tenant.git
    meta.crossplane.io/license: Apache-2.0
    meta.crossplane.io/description: Tenants.
    meta.crossplane.io/readme: Longer.
spec:
  dependsOn:
  - apiVersion: pkg.crossplane.io/v1
    kind: Provider
    package: xpkg.example.org/org/provider-postgresql-tenant
    version: ">=v0.1.0"
  - apiVersion: pkg.crossplane.io/v1
    kind: Function
    package: xpkg.example.org/org/function-postgresql-tenant
    version: ">=v0.1.0"
`

const goodFunctionMeta = `apiVersion: meta.pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-postgresql-tenant
  annotations:
    friendly-name.meta.crossplane.io: Function PostgreSQL Tenant
    meta.crossplane.io/maintainer: The Authors <authors@example.org>
    meta.crossplane.io/source: https://example.org/provider-postgresql-tenant.git
    meta.crossplane.io/license: Apache-2.0
    meta.crossplane.io/description: Composes tenants.
    meta.crossplane.io/readme: Longer.
`

const inputCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: inputs.fn.example.org
`

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: databases.example.org
spec:
  group: example.org
  names: {kind: Database, plural: databases}
`

func configObjects() map[string]string {
	return map[string]string{
		"xrd.yaml":                "apiVersion: apiextensions.crossplane.io/v2\nkind: CompositeResourceDefinition\nmetadata:\n  name: tenants.example.org\nspec:\n  group: example.org\n  names: {kind: Tenant}\n",
		"composition.yaml":        "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata:\n  name: tenants.example.org\n",
		"legacy/xrd.yaml":         "apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata:\n  name: xtenants.legacy.example.org\nspec:\n  group: legacy.example.org\n  names: {kind: XTenant}\n",
		"legacy/composition.yaml": "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata:\n  name: xtenants.legacy.example.org\n",
	}
}

func goodFixture(t *testing.T) *fixture {
	license, err := os.ReadFile(filepath.Join("..", "..", "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{
		platforms:     []string{"linux/amd64", "linux/arm64"},
		host:          "linux/amd64",
		providerMeta:  goodProviderMeta,
		functionMeta:  goodFunctionMeta,
		functionInput: inputCRD,
		functionEntry: "function",
		configMeta:    goodConfigMeta,
		sourceMeta:    goodConfigMeta,
		license:       string(license),
		configArch:    map[string]string{"linux/amd64": "amd64", "linux/arm64": "arm64"},
		binaryArch:    map[string]uint16{"linux/amd64": 62, "linux/arm64": 183},
		stableFrom:    "linux/amd64",
		labels:        `"org.opencontainers.image.licenses":"Apache-2.0","org.opencontainers.image.source":"https://example.org/p"`,
	}
}

// write lays the fixture out and returns the checker's options for it.
func (f *fixture) write(t *testing.T) options {
	t.Helper()
	root := t.TempDir()
	o := options{
		output:        filepath.Join(root, "out"),
		platforms:     strings.Join(f.platforms, " "),
		crds:          filepath.Join(root, "crds"),
		configuration: filepath.Join(root, "configuration"),
		license:       filepath.Join(root, "LICENSE"),
		host:          f.host,
	}
	files := map[string]string{
		"LICENSE":                         f.license,
		"crds/example.org_databases.yaml": crd,
		"configuration/crossplane.yaml":   f.sourceMeta,
	}
	configYAML := f.configMeta
	for name, obj := range configObjects() {
		files["configuration/"+name] = obj
		configYAML += "---\n" + obj
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(o.output, 0o755); err != nil {
		t.Fatal(err)
	}

	f.writeImages(t, o, "provider-postgresql-tenant", "provider", map[string][]byte{
		"package.yaml":      []byte("---\n" + f.providerMeta + "---\n" + crd),
		".up/examples.yaml": []byte("---\nkind: Database\n"),
	})
	f.writeImages(t, o, "function-postgresql-tenant", f.functionEntry, map[string][]byte{
		"package.yaml": []byte("---\n" + f.functionMeta + "---\n" + f.functionInput),
	})
	cfgLayer := layer(t, map[string][]byte{
		"package.yaml":      []byte("---\n" + configYAML),
		".up/examples.yaml": []byte("---\nkind: Tenant\n"),
	})
	writeTarball(t, filepath.Join(o.output, "configuration-postgresql-tenant.xpkg"), []byte(`{"os":"linux","architecture":"amd64"}`), cfgLayer)
	return o
}

// writeImages writes, for each platform, the package name with a runtime
// image whose entrypoint is /entry and the package layer pkg; this
// machine's copy; and the OCI layout of their index.
func (f *fixture) writeImages(t *testing.T, o options, name, entry string, pkg map[string][]byte) {
	t.Helper()
	type built struct{ config, manifest []byte }
	images := map[string]built{}
	blobs := map[string][]byte{}
	for _, p := range f.platforms {
		elf := make([]byte, 64)
		copy(elf, "\x7fELF")
		binary.LittleEndian.PutUint16(elf[18:], f.binaryArch[p])
		runtimeLayer := layer(t, map[string][]byte{entry: elf, "LICENSE": []byte(f.license)})
		pkgLayer := layer(t, pkg)
		config := fmt.Appendf(nil, `{"os":"linux","architecture":%q,"config":{"Entrypoint":["/%s"],"User":"65532","Labels":{%s}}}`, f.configArch[p], entry, f.labels)
		file := filepath.Join(o.output, name+"-"+strings.ReplaceAll(p, "/", "-")+".xpkg")
		writeTarball(t, file, config, runtimeLayer, pkgLayer)
		if p == f.stableFrom {
			writeTarball(t, filepath.Join(o.output, name+".xpkg"), config, runtimeLayer, pkgLayer)
		}
		manifest := fmt.Appendf(nil, `{"schemaVersion":2,"config":{"digest":%q},"layers":[{"digest":%q},{"digest":%q}]}`,
			digest(config), digest(runtimeLayer), digest(pkgLayer))
		for _, b := range [][]byte{config, runtimeLayer, pkgLayer, manifest} {
			blobs[digest(b)] = b
		}
		images[p] = built{config, manifest}
	}

	// The OCI layout: index.json -> index -> one manifest per platform.
	var entries []string
	for _, p := range f.platforms {
		if p == f.indexOmits {
			continue
		}
		goos, arch, _ := strings.Cut(p, "/")
		entries = append(entries, fmt.Sprintf(`{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":%q,"platform":{"os":%q,"architecture":%q}}`,
			digest(images[p].manifest), goos, arch))
	}
	index := []byte(`{"schemaVersion":2,"manifests":[` + strings.Join(entries, ",") + `]}`)
	blobs[digest(index)] = index
	layout := filepath.Join(o.output, name+".oci")
	if err := os.MkdirAll(filepath.Join(layout, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	for d, b := range blobs {
		if err := os.WriteFile(filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	top := fmt.Sprintf(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":%q}]}`, digest(index))
	if err := os.WriteFile(filepath.Join(layout, "index.json"), []byte(top), 0o600); err != nil {
		t.Fatal(err)
	}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func layer(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	tw := tar.NewWriter(z)
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeTarball writes a package file as `crossplane xpkg build` does: a
// manifest.json naming the config and the gzipped layers.
func writeTarball(t *testing.T, path string, config []byte, layers ...[]byte) {
	t.Helper()
	files := map[string][]byte{digest(config): config}
	var names []string
	for _, l := range layers {
		n := strings.TrimPrefix(digest(l), "sha256:") + ".tar.gz"
		files[n] = l
		names = append(names, n)
	}
	m, err := json.Marshal([]map[string]any{{"Config": digest(config), "Layers": names}})
	if err != nil {
		t.Fatal(err)
	}
	files["manifest.json"] = m
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestGoodBuildPasses(t *testing.T) {
	for _, platforms := range [][]string{{"linux/amd64", "linux/arm64"}, {"linux/amd64"}, {"linux/arm64"}} {
		f := goodFixture(t)
		f.platforms = platforms
		if problems := run(f.write(t)); len(problems) > 0 {
			t.Errorf("%v: %q", platforms, problems)
		}
	}
}

func TestDefectsAreReported(t *testing.T) {
	cases := map[string]struct {
		change func(*fixture)
		want   string
	}{
		"arm64 image config says amd64": {
			func(f *fixture) { f.configArch["linux/arm64"] = "amd64" },
			"platform linux/amd64, want [/provider] 65532 linux/arm64",
		},
		"arm64 package holds an amd64 binary": {
			func(f *fixture) { f.binaryArch["linux/arm64"] = 62 },
			`/provider is a binary for "amd64", want linux/arm64`,
		},
		"index lacks arm64": {
			func(f *fixture) { f.indexOmits = "linux/arm64" },
			"the index lists [linux/amd64], want [linux/amd64 linux/arm64]",
		},
		"stable path holds the other platform": {
			func(f *fixture) { f.stableFrom = "linux/arm64" },
			"provider-postgresql-tenant.xpkg is not the linux/amd64 package",
		},
		"stable path missing": {
			func(f *fixture) { f.stableFrom = "" },
			"this machine's package",
		},
		"runtime image without the license label": {
			func(f *fixture) { f.labels = `"org.opencontainers.image.source":"https://example.org/p"` },
			`runtime image labels: licenses ""`,
		},
		"provider without a readme": {
			func(f *fixture) {
				f.providerMeta = strings.Replace(f.providerMeta, "meta.crossplane.io/readme", "x-readme", 1)
			},
			"no meta.crossplane.io/readme annotation",
		},
		"provider without a friendly name": {
			func(f *fixture) {
				f.providerMeta = strings.Replace(f.providerMeta, "friendly-name.meta.crossplane.io", "friendly", 1)
			},
			"no friendly-name.meta.crossplane.io annotation",
		},
		"source is not a URL": {
			func(f *fixture) {
				f.providerMeta = strings.Replace(f.providerMeta, "https://example.org/", "example.org/", 1)
			},
			`meta.crossplane.io/source "example.org/provider-postgresql-tenant.git" is not an https:// URL`,
		},
		"source is a web page, not a repository": {
			func(f *fixture) {
				f.functionMeta = strings.Replace(f.functionMeta, "provider-postgresql-tenant.git", "provider-postgresql-tenant", 1)
			},
			`meta.crossplane.io/source "https://example.org/provider-postgresql-tenant" is not a repository`,
		},
		"maintainer without a contact": {
			func(f *fixture) {
				f.configMeta = strings.Replace(f.configMeta, " <authors@example.org>", "", 1)
				f.sourceMeta = f.configMeta
			},
			`meta.crossplane.io/maintainer "The Authors" names no contact`,
		},
		"a CRD's kind without a friendly name": {
			func(f *fixture) {
				f.providerMeta = strings.Replace(f.providerMeta, "friendly-kind-name.meta.crossplane.io/database.example.org", "x-kind", 1)
			},
			"no friendly-kind-name.meta.crossplane.io/database.example.org annotation",
		},
		"an XRD's group without a friendly name": {
			func(f *fixture) {
				f.configMeta = strings.Replace(f.configMeta, "friendly-group-name.meta.crossplane.io/legacy.example.org", "x-group", 1)
				f.sourceMeta = f.configMeta
			},
			"no friendly-group-name.meta.crossplane.io/legacy.example.org annotation",
		},
		"another license declared": {
			func(f *fixture) {
				f.configMeta = strings.Replace(f.configMeta, "license: Apache-2.0", "license: MIT", 1)
			},
			`meta.crossplane.io/license "MIT", want Apache-2.0`,
		},
		"LICENSE is not Apache 2.0": {
			func(f *fixture) { f.license = "All rights reserved.\n" },
			"is not the Apache License 2.0 text",
		},
		"provider without safe-start": {
			func(f *fixture) { f.providerMeta = strings.Replace(f.providerMeta, "- safe-start", "- other", 1) },
			"lacks the safe-start capability",
		},
		"configuration without the provider dependency": {
			func(f *fixture) {
				i := strings.Index(f.configMeta, "  - apiVersion: pkg.crossplane.io/v1\n    kind: Provider")
				j := strings.Index(f.configMeta, "  - apiVersion: pkg.crossplane.io/v1\n    kind: Function")
				f.configMeta = f.configMeta[:i] + f.configMeta[j:]
				f.sourceMeta = f.configMeta
			},
			"0 provider dependencies, want 1",
		},
		"provider dependency without a range": {
			func(f *fixture) {
				f.configMeta = strings.Replace(f.configMeta, `">=v0.1.0"`, "v0.1.0", 1)
				f.sourceMeta = f.configMeta
			},
			`provider dependency version "v0.1.0": want a range`,
		},
		"function dependency without a range": {
			func(f *fixture) {
				i := strings.Index(f.configMeta, "    kind: Function")
				f.configMeta = f.configMeta[:i] + strings.Replace(f.configMeta[i:], `">=v0.1.0"`, "v0.1.0", 1)
				f.sourceMeta = f.configMeta
			},
			`function dependency version "v0.1.0": want a range`,
		},
		"another function": {
			func(f *fixture) {
				f.configMeta = strings.Replace(f.configMeta, "org/function-postgresql-tenant", "org/function-other", 1)
				f.sourceMeta = f.configMeta
			},
			`function dependency "xpkg.example.org/org/function-other": want <registry>/<org>/function-postgresql-tenant`,
		},
		"function package without its input schema": {
			func(f *fixture) { f.functionInput = "" },
			"function-postgresql-tenant-linux-amd64.xpkg: package.yaml lacks the schema of the function's input",
		},
		"function package of another name": {
			func(f *fixture) {
				f.functionMeta = strings.Replace(f.functionMeta, "name: function-postgresql-tenant", "name: function-x", 1)
			},
			"function-postgresql-tenant-linux-amd64.xpkg: package.yaml holds 1 meta.pkg.crossplane.io objects, want one Function named function-postgresql-tenant",
		},
		"function image with the provider's entrypoint": {
			func(f *fixture) { f.functionEntry = "provider" },
			"function-postgresql-tenant-linux-arm64.xpkg: runtime image: entrypoint [/provider]",
		},
		"package dependencies differ from the source": {
			func(f *fixture) {
				f.sourceMeta = strings.Replace(f.sourceMeta, "org/function-postgresql-tenant", "other/function-postgresql-tenant", 1)
			},
			"the package's dependsOn differs from",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := goodFixture(t)
			c.change(f)
			problems := run(f.write(t))
			if !strings.Contains(strings.Join(problems, "\n"), c.want) {
				t.Errorf("problems %q, want one containing %q", problems, c.want)
			}
		})
	}
}
