package configuration

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// What becomes of each field of a Tenant's spec after the Tenant is
// created. A field is either fixed once set (the XRD refuses a change with
// a rule on oldSelf) or reaches the Database, the server or the Secrets
// when a Ready Tenant is edited, which the named subtest of
// test/delivery's TestTenantEditsReachTheServer proves on the real stack.
// A new field of the Tenant fails TestEveryTenantFieldIsFixedOrReachesTheServer
// until it is listed here, with its rule or its subtest.
var (
	fixedFields = []string{"instanceRef", "databaseRef", "database", "loginRole", "databaseOptions", "dataRoles[].access"}
	editedBy    = map[string]string{
		"extensions":             "extensions",
		"dataRoles[].name":       "dataRoles",
		"dataRoles[].secretName": "dataRoles.secretName",
		"credential.secretName":  "credential.secretName",
	}
)

// tenantSpecFields lists the Tenant's spec fields: a scalar, a list of
// scalars or an object the caller names as a whole is one field; an
// object's and a list of objects' fields are listed by path ("a.b",
// "a[].b").
func tenantSpecFields(prefix string, props map[string]any, whole func(string) bool) []string {
	var out []string
	for name, p := range props {
		path := prefix + name
		m, _ := p.(map[string]any)
		sub, _ := m["properties"].(map[string]any)
		if items, ok := m["items"].(map[string]any); ok {
			sub, _ = items["properties"].(map[string]any)
			if sub != nil {
				path += "[]"
			}
		}
		if sub == nil || whole(prefix+name) {
			out = append(out, prefix+name)
			continue
		}
		out = append(out, tenantSpecFields(path+".", sub, whole)...)
	}
	sort.Strings(out)
	return out
}

func TestEveryTenantFieldIsFixedOrReachesTheServer(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "package", "configuration", "xrd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var xrd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &xrd); err != nil {
		t.Fatal(err)
	}
	if len(xrd.Spec.Versions) != 1 {
		t.Fatalf("the Tenant XRD has %d versions; this check reads one", len(xrd.Spec.Versions))
	}
	root := xrd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := root["properties"].(map[string]any)["spec"].(map[string]any)
	// Every rule on oldSelf in the schema, wherever it sits.
	rules := strings.Join(oldSelfRules(spec), "\n")

	edits, err := os.ReadFile(filepath.Join("..", "delivery", "edits_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	fields := tenantSpecFields("", spec["properties"].(map[string]any), func(f string) bool { return slices.Contains(fixedFields, f) })
	if len(fields) < 8 {
		t.Fatalf("read only %d fields of the Tenant's spec (%v): the XRD's shape changed under this check", len(fields), fields)
	}
	for _, f := range fields {
		sub, edited := editedBy[f]
		fixed := slices.Contains(fixedFields, f)
		leaf := f[strings.LastIndexAny(f, ".]")+1:]
		switch {
		case edited && fixed:
			t.Errorf("spec.%s is listed both as fixed and as edited", f)
		case fixed && !regexp.MustCompile(`oldSelf\.`+regexp.QuoteMeta(leaf)+`\b`).MatchString(rules):
			t.Errorf("spec.%s is listed as fixed once set, but no rule of the XRD compares it with oldSelf", f)
		case edited && !strings.Contains(string(edits), `t.Run("`+sub+`"`):
			t.Errorf("spec.%s names the subtest %q, which test/delivery/edits_test.go does not have", f, sub)
		case !edited && !fixed:
			t.Errorf("spec.%s is new: make it immutable (a rule on oldSelf, listed in fixedFields) or give it a subtest in test/delivery's TestTenantEditsReachTheServer that edits a Ready Tenant and sees the change on the server (listed in editedBy)", f)
		}
	}
	for f := range editedBy {
		if !slices.Contains(fields, f) {
			t.Errorf("editedBy names spec.%s, which the Tenant XRD does not have", f)
		}
	}
	for _, f := range fixedFields {
		if !slices.Contains(fields, f) {
			t.Errorf("fixedFields names spec.%s, which the Tenant XRD does not have", f)
		}
	}
}

// oldSelfRules collects the CEL rules that mention oldSelf anywhere under
// schema.
func oldSelfRules(schema any) []string {
	var out []string
	switch v := schema.(type) {
	case map[string]any:
		if vs, ok := v["x-kubernetes-validations"].([]any); ok {
			for _, r := range vs {
				if m, ok := r.(map[string]any); ok {
					if rule, _ := m["rule"].(string); strings.Contains(rule, "oldSelf") {
						out = append(out, rule)
					}
				}
			}
		}
		for _, x := range v {
			out = append(out, oldSelfRules(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, oldSelfRules(x)...)
		}
	}
	return out
}
