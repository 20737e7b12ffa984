package options

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func valid() Options {
	return Options{
		Namespace: "crossplane-system",
		OpenBao: OpenBao{
			Address:        "https://openbao.example:8200/",
			AuthMount:      DefaultAuthMount,
			AuthRole:       "provider",
			KVMount:        DefaultKVMount,
			TenantBasePath: DefaultTenantBasePath,

			DatabaseBasePath:        DefaultDatabaseBasePath,
			ServiceAccountTokenFile: DefaultSATokenFile,
		},
	}
}

func TestComplete(t *testing.T) {
	o := valid()
	o.Complete()
	want := OpenBao{
		Address:         "https://openbao.example:8200",
		ConsumerAddress: "https://openbao.example:8200",
		AuthMount:       DefaultAuthMount,
		AuthRole:        "provider",
		KVMount:         DefaultKVMount,
		TenantBasePath:  DefaultTenantBasePath,

		DatabaseBasePath:        DefaultDatabaseBasePath,
		ServiceAccountTokenFile: DefaultSATokenFile,
	}
	if diff := cmp.Diff(want, o.OpenBao); diff != "" {
		t.Errorf("Complete(): -want +got:\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mutate  func(*Options)
		wantErr []string
	}{
		"Valid":           {mutate: func(*Options) {}},
		"TokenFileNoRole": {mutate: func(o *Options) { o.OpenBao.AuthRole = ""; o.OpenBao.TokenFile = "/tmp/token" }},
		"NoAddress":       {mutate: func(o *Options) { o.OpenBao.Address = "" }, wantErr: []string{"--openbao-address is required"}},
		"BadScheme":       {mutate: func(o *Options) { o.OpenBao.Address = "ftp://x" }, wantErr: []string{"--openbao-address", "must be an https:// URL"}},
		// Plain http only with the local-development flag, for both
		// addresses; the message names the flag that allows it.
		"HTTPAddress": {
			mutate:  func(o *Options) { o.OpenBao.Address = "http://openbao.example:8200" },
			wantErr: []string{"--openbao-address", "must be https://", "--openbao-allow-insecure-http", "local development only"},
		},
		"HTTPConsumerAddress": {
			mutate:  func(o *Options) { o.OpenBao.ConsumerAddress = "http://openbao.example:8200" },
			wantErr: []string{"--openbao-consumer-address", "must be https://"},
		},
		"HTTPAllowedForDevelopment": {mutate: func(o *Options) {
			o.OpenBao.Address, o.OpenBao.ConsumerAddress, o.OpenBao.AllowInsecureHTTP = "http://127.0.0.1:8200", "http://127.0.0.1:8200", true
		}},
		"HTTPSWithTheFlagStillFine": {mutate: func(o *Options) { o.OpenBao.AllowInsecureHTTP = true }},
		"NoSATokenFile":             {mutate: func(o *Options) { o.OpenBao.ServiceAccountTokenFile = "" }, wantErr: []string{"--openbao-sa-token-file must not be empty"}},
		"TokenFileNeedsNoSAToken": {mutate: func(o *Options) {
			o.OpenBao.ServiceAccountTokenFile, o.OpenBao.TokenFile = "", "/tmp/token"
		}},
		"CredentialsInURL":  {mutate: func(o *Options) { o.OpenBao.Address = "https://u:p@x" }, wantErr: []string{"without credentials"}},
		"NoRole":            {mutate: func(o *Options) { o.OpenBao.AuthRole = "" }, wantErr: []string{"--openbao-auth-role is required"}},
		"BadBasePath":       {mutate: func(o *Options) { o.OpenBao.TenantBasePath = "a/../b" }, wantErr: []string{"--openbao-tenant-base-path", `".." segment`}},
		"DataLayer":         {mutate: func(o *Options) { o.OpenBao.TenantBasePath = "data/x" }, wantErr: []string{`"data" API layer`}},
		"EmptyMount":        {mutate: func(o *Options) { o.OpenBao.KVMount = "" }, wantErr: []string{"--openbao-kv-mount must not be empty"}},
		"EmptyDatabaseBase": {mutate: func(o *Options) { o.OpenBao.DatabaseBasePath = "" }, wantErr: []string{"--openbao-database-base-path must not be empty"}},
		"NoNamespace":       {mutate: func(o *Options) { o.Namespace = "" }, wantErr: []string{"--namespace"}},
		"MissingCABundle":   {mutate: func(o *Options) { o.CABundle = "/nonexistent/ca.pem" }, wantErr: []string{"--ca-bundle"}},
		"SeveralAtOnce": {
			mutate:  func(o *Options) { o.OpenBao.Address = ""; o.OpenBao.KVMount = "/kv" },
			wantErr: []string{"--openbao-address is required", "--openbao-kv-mount"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := valid()
			tc.mutate(&o)
			o.Complete()
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestOverlappingBasePathsAreRefused(t *testing.T) {
	cases := map[string]struct {
		tenant, database string
		// wantErr: every string the error must contain; none: no overlap
		// error at all.
		wantErr []string
	}{
		"Defaults":               {tenant: DefaultTenantBasePath, database: DefaultDatabaseBasePath},
		"Siblings":               {tenant: "tenants/app", database: "tenants/db"},
		"SharedPrefixNotSegment": {tenant: "a/b", database: "a/bc"},
		"SharedPrefixReverse":    {tenant: "a/bc", database: "a/b"},
		"CaseDiffers":            {tenant: "tenants", database: "Tenants/db"},
		"Equal": {tenant: "kv-tenants", database: "kv-tenants",
			wantErr: []string{"--openbao-tenant-base-path", "--openbao-database-base-path", "same path"}},
		"DatabaseUnderTenant": {tenant: "postgresql-tenants", database: "postgresql-tenants/databases",
			wantErr: []string{"--openbao-database-base-path \"postgresql-tenants/databases\" lies under --openbao-tenant-base-path \"postgresql-tenants\"", `a namespace named "databases" would read every Database's own record`, "neither of which contains the other"}},
		"DatabaseDeepUnderTenant": {tenant: "a", database: "a/b/c",
			wantErr: []string{"lies under --openbao-tenant-base-path", `a namespace named "b"`}},
		"TenantUnderDatabase": {tenant: "shared/tenants", database: "shared",
			wantErr: []string{"--openbao-tenant-base-path \"shared/tenants\" lies under --openbao-database-base-path \"shared\"", `a Database named "tenants"`}},
		// Normalisation: slashes do not hide an overlap (the malformed
		// path is reported too).
		"TrailingSlashEqual": {tenant: "a/b/", database: "a/b",
			wantErr: []string{"same path", "must not end with '/'"}},
		"TrailingSlashUnder": {tenant: "a/", database: "a/b",
			wantErr: []string{"lies under", "must not end with '/'"}},
		"RepeatedSlashUnder": {tenant: "a", database: "a//b",
			wantErr: []string{"lies under", "empty segment"}},
		"LeadingSlashEqual": {tenant: "/a", database: "a",
			wantErr: []string{"same path", "must not start with '/'"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := valid()
			o.OpenBao.TenantBasePath, o.OpenBao.DatabaseBasePath = tc.tenant, tc.database
			o.Complete()
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
