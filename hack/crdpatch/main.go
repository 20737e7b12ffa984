// Command crdpatch adjusts what controller-gen cannot express in defaults
// inherited from Crossplane's embedded managed resource specs. It runs as
// part of `make generate` on the Database and DatabaseBinding CRDs:
//
//   - Database: spec.managementPolicies defaults to
//     v1alpha1.DefaultManagementPolicies instead of ["*"] (its description
//     says what reclaimPolicy decides);
//   - both: spec.providerConfigRef has no default (Crossplane's is
//     {name: default}). A Database must name its server; a DatabaseBinding
//     names one only for dynamic provisioning, and a static binding takes
//     the bound Database's.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

const description = `ManagementPolicies specify the actions the provider may take on the
database. A list without Create is a read-only import of an existing
database; without Update, differences are reported and not repaired. The
default includes Delete so that the provider is called when the Database is
deleted: whether it drops anything is decided by spec.reclaimPolicy alone.`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch package/crds/<group>_databases.yaml package/crds/<group>_databasebindings.yaml")
		os.Exit(2)
	}
	for _, f := range os.Args[1:] {
		if err := patch(f); err != nil {
			fmt.Fprintln(os.Stderr, "crdpatch:", err)
			os.Exit(1)
		}
	}
}

func patch(path string) error {
	in, err := os.ReadFile(path) //nolint:gosec // a generated CRD of the repository
	if err != nil {
		return err
	}
	body := bytes.TrimPrefix(in, []byte("---\n"))
	var crd map[string]any
	if err := yaml.Unmarshal(body, &crd); err != nil {
		return err
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("%s: no spec.versions", path)
	}
	kind, _ := dig(crd, "spec", "names", "kind").(string)
	for _, v := range versions {
		pcr, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "providerConfigRef").(map[string]any)
		if !ok {
			return fmt.Errorf("%s: no spec.providerConfigRef in the schema", path)
		}
		delete(pcr, "default")
		if kind != v1alpha1.DatabaseKind {
			continue
		}
		mp, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "managementPolicies").(map[string]any)
		if !ok {
			return fmt.Errorf("%s: no spec.managementPolicies in the schema", path)
		}
		def := make([]any, 0, len(v1alpha1.DefaultManagementPolicies))
		for _, a := range v1alpha1.DefaultManagementPolicies {
			def = append(def, string(a))
		}
		mp["default"] = def
		mp["description"] = description
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(in), "---\n") {
		return os.WriteFile(path, out, 0o644) //nolint:gosec // a committed CRD, readable by all
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644) //nolint:gosec // a committed CRD, readable by all
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
