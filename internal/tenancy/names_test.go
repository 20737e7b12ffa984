package tenancy

import (
	"strings"
	"testing"
)

func TestValidIdentifier(t *testing.T) {
	cases := map[string]bool{
		"netbox":                true,
		"a":                     true,
		"app_1":                 true,
		strings.Repeat("a", 63): true,
		strings.Repeat("a", 64): false,
		"":                      false,
		"1app":                  false,
		"_app":                  false,
		"App":                   false,
		"my-app":                false,
		"app;drop":              false,
		"app\"x":                false,
		"ünï":                   false,
	}
	for in, want := range cases {
		if got := ValidIdentifier(in); got != want {
			t.Errorf("ValidIdentifier(%q) = %v, want %v", in, got, want)
		}
		if err := ValidateIdentifier("loginRole", in); (err == nil) != want {
			t.Errorf("ValidateIdentifier(%q) = %v, want valid=%v", in, err, want)
		}
	}
}

func TestValidatePath(t *testing.T) {
	cases := []struct {
		path    string
		wantErr string
	}{
		{path: "postgresql-tenants", wantErr: ""},
		{path: "postgresql-tenants/netbox/netbox", wantErr: ""},
		{path: "a.b/c_d/e-f", wantErr: ""},
		{path: "", wantErr: "must not be empty"},
		{path: "/abs", wantErr: "must not start with '/'"},
		{path: "trailing/", wantErr: "must not end with '/'"},
		{path: "a//b", wantErr: "empty segment"},
		{path: "a/./b", wantErr: `"." segment`},
		{path: "a/../b", wantErr: `".." segment`},
		{path: "..", wantErr: `".." segment`},
		{path: "data/tenants", wantErr: `"data" API layer`},
		{path: "metadata/tenants", wantErr: `"metadata" API layer`},
		{path: "tenants/data", wantErr: ""},
	}
	for _, tc := range cases {
		err := ValidatePath("path", tc.path)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ValidatePath(%q) = %v, want nil", tc.path, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ValidatePath(%q) = %v, want an error containing %q", tc.path, err, tc.wantErr)
		}
	}
}

func TestValidateImportPath(t *testing.T) {
	const tenants = "postgresql-tenants"
	cases := map[string]struct {
		path, tenantBase string
		wantErr          []string
	}{
		"UnderTheDatabaseBasePath":   {path: "postgresql-databases/imports/legacy", tenantBase: tenants},
		"AnotherDatabasesOwnRecord":  {path: "postgresql-databases/orders", tenantBase: tenants},
		"ElsewhereInTheMount":        {path: "imports/erp", tenantBase: tenants},
		"SamePrefixOtherSegment":     {path: "postgresql-tenants-old/shop/app", tenantBase: tenants},
		"AboveANestedTenantBasePath": {path: "platform", tenantBase: "platform/tenants"},
		"BesideANestedTenantBase":    {path: "platform/tenantsx/shop", tenantBase: "platform/tenants"},
		"CaseDiffers":                {path: "PostgreSQL-Tenants/shop/app", tenantBase: tenants},
		"TheTenantBasePath": {path: tenants, tenantBase: tenants,
			wantErr: []string{`spec.forProvider.credentialPath "postgresql-tenants" is the tenant base path (--openbao-tenant-base-path "postgresql-tenants")`, "nothing was read from or written to it", "then delete this Database (with reclaimPolicy Retain"}},
		"ANamespacesDirectory": {path: "postgresql-tenants/shop", tenantBase: tenants,
			wantErr: []string{`the namespace "shop" reads its delivery copies`}},
		"ADeliveryCopy": {path: "postgresql-tenants/shop/app", tenantBase: tenants,
			wantErr: []string{`"postgresql-tenants/shop/app" lies under the tenant base path`, `the namespace "shop"`, "<database base path>/imports/<name>"}},
		"DeeperThanACopy": {path: "postgresql-tenants/legacy/a/b", tenantBase: tenants,
			wantErr: []string{`the namespace "legacy"`}},
		"UnderANestedTenantBasePath": {path: "platform/tenants/shop/app", tenantBase: "platform/tenants",
			wantErr: []string{`the namespace "shop"`}},
		"TenantBaseWithSlashes": {path: "postgresql-tenants/shop/app", tenantBase: "/postgresql-tenants/",
			wantErr: []string{`the namespace "shop"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateImportPath("spec.forProvider.credentialPath", tc.path, tc.tenantBase)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ValidateImportPath(%q, %q) = %v, want nil", tc.path, tc.tenantBase, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateImportPath(%q, %q) = nil, want a refusal", tc.path, tc.tenantBase)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	for s, ok := range map[string]bool{
		"shop": true, "pgshop": true, "shop_pg_": true, "postgresql": true, "publication": true,
		"pg_catalog": false, "pg_trgm": false, "pg_": false,
		"postgres": false, "template0": false, "template1": false, "public": false, "none": false,
		"Shop": false, "": false,
	} {
		if err := ValidateName("database", s); (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}
