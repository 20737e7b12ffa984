package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	providerName      = "provider-postgresql-tenant"
	functionName      = "function-postgresql-tenant"
	configurationName = "configuration-postgresql-tenant"
	// spdxApache is the license the packages declare and LICENSE holds.
	spdxApache = "Apache-2.0"
)

type options struct {
	output, platforms, crds, configuration, license string
	host                                            string // this machine's platform
}

// The package metadata annotations a registry or marketplace shows: the
// ones the xpkg specification defines, and the display name.
var metadataAnnotations = []string{
	"meta.crossplane.io/maintainer",
	"meta.crossplane.io/source",
	"meta.crossplane.io/license",
	"meta.crossplane.io/description",
	"meta.crossplane.io/readme",
	"friendly-name.meta.crossplane.io",
}

// run checks everything and returns what is wrong.
func run(o options) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	license, err := os.ReadFile(o.license)
	if err != nil {
		add("license: %v", err)
	} else if !isApache2(license) {
		add("%s is not the Apache License 2.0 text the packages declare (%s)", o.license, spdxApache)
	}
	crds, err := crdNames(o.crds)
	if err != nil {
		add("%v", err)
	}

	platforms := strings.Fields(o.platforms)
	if len(platforms) == 0 {
		add("no platforms")
	}
	checkImages(o, providerName, platforms, add, func(img image, p string) []string { return checkProvider(img, p, crds, license) })
	checkImages(o, functionName, platforms, add, func(img image, p string) []string { return checkFunction(img, p, license) })

	cfg := filepath.Join(o.output, configurationName+".xpkg")
	img, err := readTarball(cfg)
	if err != nil {
		add("configuration: %v", err)
	} else {
		for _, pr := range checkConfiguration(img, o.configuration) {
			add("%s: %s", cfg, pr)
		}
	}
	return problems
}

// checkImages checks the packages with an embedded runtime image of name:
// each platform's, this machine's copy at the stable path, and the index
// over every platform's.
func checkImages(o options, name string, platforms []string, add func(string, ...any), check func(image, string) []string) {
	built := map[string]image{}
	for _, p := range platforms {
		file := filepath.Join(o.output, name+"-"+strings.ReplaceAll(p, "/", "-")+".xpkg")
		img, err := readTarball(file)
		if err != nil {
			add("%s: %v", p, err)
			continue
		}
		built[p] = img
		for _, pr := range check(img, p) {
			add("%s: %s", file, pr)
		}
	}

	// This machine's package, at the path tests and `make dev` install.
	stable := filepath.Join(o.output, name+".xpkg")
	if slices.Contains(platforms, o.host) {
		if img, err := readTarball(stable); err != nil {
			add("this machine's package: %v", err)
		} else if h, ok := built[o.host]; ok && !bytes.Equal(img.rawConfig, h.rawConfig) {
			add("%s is not the %s package", stable, o.host)
		}
	}

	// The multi-platform package: one index over every platform's package.
	if len(platforms) > 1 {
		layout := filepath.Join(o.output, name+".oci")
		idx, err := readLayout(layout)
		if err != nil {
			add("%s: %v", layout, err)
			return
		}
		var listed []string
		for p := range idx {
			listed = append(listed, p)
		}
		sort.Strings(listed)
		want := slices.Clone(platforms)
		sort.Strings(want)
		if !slices.Equal(listed, want) {
			add("%s: the index lists %v, want %v", layout, listed, want)
		}
		for p, img := range idx {
			if img.platform() != p {
				add("%s: the %s entry's image is for %s", layout, p, img.platform())
			}
			if h, ok := built[p]; ok && !bytes.Equal(img.rawConfig, h.rawConfig) {
				add("%s: the %s entry is not the package built for %s", layout, p, p)
			}
		}
	}
}

// isApache2 reports whether b is the Apache License 2.0 text.
func isApache2(b []byte) bool {
	s := string(b)
	for _, w := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "9. Accepting Warranty or Additional Liability.", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// object is what the checks read of a manifest.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Capabilities []string     `json:"capabilities"`
		DependsOn    []dependency `json:"dependsOn"`
		// Group and Names.Kind of a CRD or an XRD.
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
	} `json:"spec"`
}

type dependency struct {
	APIVersion    string `json:"apiVersion,omitempty"`
	Kind          string `json:"kind,omitempty"`
	Package       string `json:"package,omitempty"`
	Provider      string `json:"provider,omitempty"`
	Function      string `json:"function,omitempty"`
	Configuration string `json:"configuration,omitempty"`
	Version       string `json:"version,omitempty"`
}

// kindAndPackage reads both forms of a dependency: kind and package, or the
// older provider/function/configuration keys.
func (d dependency) kindAndPackage() (string, string) {
	switch {
	case d.Provider != "":
		return "Provider", d.Provider
	case d.Function != "":
		return "Function", d.Function
	case d.Configuration != "":
		return "Configuration", d.Configuration
	}
	return d.Kind, d.Package
}

// parseStream parses a YAML stream of manifests.
func parseStream(s string) ([]object, error) {
	var out []object
	r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		if o.Kind != "" {
			out = append(out, o)
		}
	}
	return out, nil
}

// crdNames reads the names of the CRDs of a directory.
func crdNames(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // the repository's own files
		if err != nil {
			return nil, err
		}
		objs, err := parseStream(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if o.Kind == "CustomResourceDefinition" {
				names = append(names, o.Metadata.Name)
			}
		}
	}
	return names, nil
}

var (
	// repositoryURL is the URL of a git repository.
	repositoryURL = regexp.MustCompile(`^https://([^/\s]+/\S+\.git|(github\.com|gitlab\.com|codeberg\.org)/[^/\s]+/[^/\s]+/?)$`)
	// maintainerContact is a name followed by a mail address in brackets.
	maintainerContact = regexp.MustCompile(`\S\s+<[^<>@\s]+@[^<>@\s]+\.[^<>@\s]+>$`)
)

// friendlyNames checks that the metadata m names every API group and kind
// of the definitions (CRDs or XRDs) defs for people:
// friendly-group-name.meta.crossplane.io/<group> and
// friendly-kind-name.meta.crossplane.io/<kind, lower case>.<group>.
func friendlyNames(m object, defs []object) []string {
	var problems []string
	seen := map[string]bool{}
	for _, d := range defs {
		if d.Spec.Group == "" || d.Spec.Names.Kind == "" {
			problems = append(problems, fmt.Sprintf("%s %s has no group or kind", d.Kind, d.Metadata.Name))
			continue
		}
		for _, a := range []string{
			"friendly-group-name.meta.crossplane.io/" + d.Spec.Group,
			"friendly-kind-name.meta.crossplane.io/" + strings.ToLower(d.Spec.Names.Kind) + "." + d.Spec.Group,
		} {
			if !seen[a] && strings.TrimSpace(m.Metadata.Annotations[a]) == "" {
				problems = append(problems, "no "+a+" annotation")
			}
			seen[a] = true
		}
	}
	return problems
}

// checkMeta checks the package's metadata object: its kind, name and
// annotations.
func checkMeta(objs []object, kind, name string) (object, []string) {
	var metas []object
	for _, o := range objs {
		if strings.HasPrefix(o.APIVersion, "meta.pkg.crossplane.io/") {
			metas = append(metas, o)
		}
	}
	if len(metas) != 1 || metas[0].Kind != kind || metas[0].Metadata.Name != name {
		return object{}, []string{fmt.Sprintf("package.yaml holds %d meta.pkg.crossplane.io objects, want one %s named %s", len(metas), kind, name)}
	}
	m := metas[0]
	var problems []string
	for _, a := range metadataAnnotations {
		if strings.TrimSpace(m.Metadata.Annotations[a]) == "" {
			problems = append(problems, "no "+a+" annotation")
		}
	}
	if s := m.Metadata.Annotations["meta.crossplane.io/source"]; s != "" && !strings.HasPrefix(s, "https://") {
		problems = append(problems, fmt.Sprintf("meta.crossplane.io/source %q is not an https:// URL", s))
	} else if s != "" && !repositoryURL.MatchString(s) {
		problems = append(problems, fmt.Sprintf("meta.crossplane.io/source %q is not a repository: want the URL git clones (ending in .git) or github.com/gitlab.com/codeberg.org/<owner>/<name>", s))
	}
	if mt := m.Metadata.Annotations["meta.crossplane.io/maintainer"]; mt != "" && !maintainerContact.MatchString(mt) {
		problems = append(problems, fmt.Sprintf("meta.crossplane.io/maintainer %q names no contact: want \"Name <address@domain>\"", mt))
	}
	if l := m.Metadata.Annotations["meta.crossplane.io/license"]; l != "" && l != spdxApache {
		problems = append(problems, fmt.Sprintf("meta.crossplane.io/license %q, want %s (the LICENSE file)", l, spdxApache))
	}
	return m, problems
}

func checkProvider(img image, platform string, crds []string, license []byte) []string {
	problems := checkRuntime(img, platform, "provider", license)
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	pkgYAML := string(img.contents["package.yaml"])
	objs, err := parseStream(pkgYAML)
	if err != nil {
		add("package.yaml: %v", err)
		return problems
	}
	m, mp := checkMeta(objs, "Provider", providerName)
	problems = append(problems, mp...)
	if m.Kind != "" && !slices.Contains(m.Spec.Capabilities, "safe-start") {
		add("the Provider lacks the safe-start capability")
	}
	var have []string
	var defs []object
	for _, o := range objs {
		switch o.Kind {
		case "CustomResourceDefinition":
			have = append(have, o.Metadata.Name)
			defs = append(defs, o)
		case "CompositeResourceDefinition", "Composition", "ClusterRole":
			add("the provider package holds a %s (it belongs to the Configuration)", o.Kind)
		}
	}
	for _, n := range crds {
		if !slices.Contains(have, n) {
			add("package.yaml lacks the CRD %s", n)
		}
	}
	if m.Kind != "" {
		problems = append(problems, friendlyNames(m, defs)...)
	}
	if !strings.Contains(string(img.contents[".up/examples.yaml"]), "kind: Database\n") {
		add("no examples layer with a Database")
	}
	return problems
}

// checkRuntime checks a package's embedded runtime image: /entry, a
// binary for the platform, run as 65532, with the license and its labels.
func checkRuntime(img image, platform, entry string, license []byte) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	c := img.config.Config
	if strings.Join(c.Entrypoint, " ") != "/"+entry || c.User != "65532" || img.platform() != platform {
		add("runtime image: entrypoint %v user %q platform %s, want [/%s] 65532 %s", c.Entrypoint, c.User, img.platform(), entry, platform)
	}
	if c.Labels["org.opencontainers.image.licenses"] != spdxApache || !strings.HasPrefix(c.Labels["org.opencontainers.image.source"], "https://") {
		add("runtime image labels: licenses %q source %q, want %s and an https:// URL",
			c.Labels["org.opencontainers.image.licenses"], c.Labels["org.opencontainers.image.source"], spdxApache)
	}
	if _, ok := img.contents[entry]; !ok {
		add("no /%s binary in the runtime image", entry)
	} else if arch := elfArch(img.contents[entry]); "linux/"+arch != platform {
		add("/%s is a binary for %q, want %s", entry, arch, platform)
	}
	if l, ok := img.contents["LICENSE"]; !ok || (license != nil && !bytes.Equal(l, license)) {
		add("the runtime image lacks the LICENSE file")
	}
	return problems
}

// checkFunction checks the composition function's package of a platform:
// its runtime image, its metadata, and the schema of its input.
func checkFunction(img image, platform string, license []byte) []string {
	problems := checkRuntime(img, platform, "function", license)
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	objs, err := parseStream(string(img.contents["package.yaml"]))
	if err != nil {
		return append(problems, "package.yaml: "+err.Error())
	}
	_, mp := checkMeta(objs, "Function", functionName)
	problems = append(problems, mp...)
	input := false
	for _, o := range objs {
		switch o.Kind {
		case "CustomResourceDefinition":
			input = input || strings.HasPrefix(o.Metadata.Name, "inputs.")
		case "CompositeResourceDefinition", "Composition", "ClusterRole":
			add("the function package holds a %s (it belongs to the Configuration)", o.Kind)
		}
	}
	if !input {
		add("package.yaml lacks the schema of the function's input")
	}
	return problems
}

// elfArch reads the GOARCH of an ELF binary's machine field.
func elfArch(b []byte) string {
	if len(b) < 20 || string(b[:4]) != "\x7fELF" {
		return "not ELF"
	}
	switch uint16(b[18]) | uint16(b[19])<<8 { // little-endian e_machine
	case 62:
		return "amd64"
	case 183:
		return "arm64"
	}
	return fmt.Sprintf("ELF machine %d", uint16(b[18])|uint16(b[19])<<8)
}

var (
	// A range with a lower bound: ">=v0.1.0", optionally "<v1.0.0" after it.
	versionRange = regexp.MustCompile(`^>=\s*v\d+\.\d+\.\d+(,?\s*<\s*v\d+\.\d+\.\d+)?$`)
)

func checkConfiguration(img image, configDir string) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	objs, err := parseStream(string(img.contents["package.yaml"]))
	if err != nil {
		return []string{"package.yaml: " + err.Error()}
	}
	m, mp := checkMeta(objs, "Configuration", configurationName)
	problems = append(problems, mp...)

	// The dependencies, as the source declares them: the provider and the
	// function of this repository, each with a version range.
	src, err := readObjects(filepath.Join(configDir, "crossplane.yaml"))
	if err != nil {
		return append(problems, err.Error())
	}
	if len(src) != 1 || !depsEqual(src[0].Spec.DependsOn, m.Spec.DependsOn) {
		add("the package's dependsOn differs from %s", filepath.Join(configDir, "crossplane.yaml"))
	}
	providers, functions := 0, 0
	for _, d := range m.Spec.DependsOn {
		kind, pkg := d.kindAndPackage()
		switch kind {
		case "Provider":
			providers++
			if !strings.HasSuffix(pkg, "/"+providerName) || strings.Contains(pkg, ":") || strings.Contains(pkg, "@") {
				add("provider dependency %q: want <registry>/<org>/%s, no tag or digest", pkg, providerName)
			}
			if !versionRange.MatchString(strings.TrimSpace(d.Version)) {
				add("provider dependency version %q: want a range such as \">=v0.1.0\"", d.Version)
			}
		case "Function":
			functions++
			if !strings.HasSuffix(pkg, "/"+functionName) || strings.Contains(pkg, ":") || strings.Contains(pkg, "@") {
				add("function dependency %q: want <registry>/<org>/%s, no tag or digest", pkg, functionName)
			}
			if !versionRange.MatchString(strings.TrimSpace(d.Version)) {
				add("function dependency version %q: want a range such as \">=v0.1.0\" (it is released with the provider)", d.Version)
			}
		default:
			add("unexpected dependency %s %s", kind, pkg)
		}
	}
	if providers != 1 {
		add("%d provider dependencies, want 1", providers)
	}
	if functions != 1 {
		add("%d function dependencies, want 1 (%s)", functions, functionName)
	}

	// Every XRD and Composition of the source directory, and only those.
	var want, have []string
	err = filepath.WalkDir(configDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		found, err := readObjects(p)
		if err != nil {
			return err
		}
		for _, o := range found {
			if o.Kind == "Composition" || o.Kind == "CompositeResourceDefinition" {
				want = append(want, o.Kind+" "+o.Metadata.Name)
			}
		}
		return nil
	})
	if err != nil {
		return append(problems, err.Error())
	}
	var xrds []object
	for _, o := range objs {
		if o.Kind == "Composition" || o.Kind == "CompositeResourceDefinition" {
			have = append(have, o.Kind+" "+o.Metadata.Name)
		}
		if o.Kind == "CompositeResourceDefinition" {
			xrds = append(xrds, o)
		}
	}
	if m.Kind != "" {
		problems = append(problems, friendlyNames(m, xrds)...)
	}
	sort.Strings(want)
	sort.Strings(have)
	if len(want) != 4 || !slices.Equal(want, have) {
		add("package.yaml holds %v, want the two XRDs and two Compositions %v", have, want)
	}
	if !strings.Contains(string(img.contents[".up/examples.yaml"]), "kind: Tenant\n") {
		add("no examples layer with a Tenant")
	}
	return problems
}

func readObjects(path string) ([]object, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the repository's own files
	if err != nil {
		return nil, err
	}
	objs, err := parseStream(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

func depsEqual(a, b []dependency) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return len(a) > 0 && bytes.Equal(ja, jb)
}
