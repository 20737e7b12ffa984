package docs

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestAdminOptionGrantLetsTheAdminChangeAnImportedRole runs admins.md's
// GRANT for an imported role: a role a superuser made (as another tool
// would) cannot be changed by the admin role on PostgreSQL 16 and later
// until the block has run, and can after.
func TestAdminOptionGrantLetsTheAdminChangeAnImportedRole(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	super := env.Postgres.SuperConnT(t, "postgres")
	const role = "docs_imported"
	testenv.RunSQL(t, super, "the superuser", "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { _, _ = super.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	admin := env.Postgres.AdminConnT(t, "postgres")
	change := "ALTER ROLE " + role + " CONNECTION LIMIT 5"
	var major int
	if err := super.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, change); major >= 16 && err == nil {
		t.Fatalf("PostgreSQL %d: the admin role changed a role a superuser made without ADMIN OPTION: the block below proves nothing", major)
	}
	body := block(t, "admins.md", "sql", "admin-option")
	body = regexp.MustCompile(`\berp\b`).ReplaceAllString(body, role)
	body = regexp.MustCompile(`\btenant_provisioner\b`).ReplaceAllString(body, env.Postgres.AdminUser)
	for _, q := range queries(t, body, nil) {
		testenv.RunSQL(t, super, "the superuser", strings.TrimSuffix(q, ";"))
	}
	if _, err := admin.Exec(ctx, change); err != nil {
		t.Errorf("after admins.md's GRANT the admin role still cannot change the role: %v", err)
	}
}

// TestDocumentedImportPathsAreReadable: every credentialPath the docs show
// lies where the provider's OpenBao policy (install.md) lets it read and
// outside the tenant base path an import may not name. One that does not
// leaves the admin who copies it with a Database that cannot read its
// record, and a credentialPath that cannot be changed.
func TestDocumentedImportPathsAreReadable(t *testing.T) {
	var readable []string
	for _, m := range regexp.MustCompile(`(?m)^path "kv/data/([^"*]*)\*"`).FindAllStringSubmatch(block(t, "install.md", "hcl", "provider-policy"), -1) {
		readable = append(readable, m[1])
	}
	if len(readable) == 0 {
		t.Fatal("install.md's provider policy names no readable path")
	}
	paths := regexp.MustCompile(`(?m)^\s*credentialPath:\s*"?([^"\s#]+)`)
	seen := 0
	for _, f := range docFiles(t) {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range paths.FindAllStringSubmatch(string(body), -1) {
			seen++
			p := m[1]
			if !slices.ContainsFunc(readable, func(r string) bool { return strings.HasPrefix(p, r) }) {
				t.Errorf("%s: credentialPath %s is outside what the provider may read (%v)", filepath.Base(f), p, readable)
			}
			if err := tenancy.ValidateImportPath("credentialPath", p, "postgresql-tenants"); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	}
	if seen == 0 {
		t.Error("no credentialPath found in the docs: the check reads nothing")
	}
}
