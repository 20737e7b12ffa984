package docs

import (
	"context"
	"regexp"
	"strings"
	"testing"

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
