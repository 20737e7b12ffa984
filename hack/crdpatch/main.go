// Command crdpatch adjusts what controller-gen cannot express: the default of
// spec.managementPolicies of the Database CRD, which is inherited from
// Crossplane's embedded ManagedResourceSpec as ["*"] (Delete included). The
// provider's default must keep data, so it becomes
// v1alpha1.DefaultManagementPolicies. It runs as part of `make generate`.
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
database. The default omits Delete: deleting a Database never drops anything
unless Delete (or "*") is listed explicitly. A list without Create is a
read-only import of an existing database.`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch package/crds/<group>_databases.yaml")
		os.Exit(2)
	}
	if err := patch(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func patch(path string) error {
	in, err := os.ReadFile(path)
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
	for _, v := range versions {
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
		return os.WriteFile(path, out, 0o644)
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
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
