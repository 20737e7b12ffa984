// Package docs checks the commands and policies the documentation tells an
// admin to use against what the test suite proves works on the real servers.
package docs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Postgres: true}, &env)
}

// block returns the fenced block of doc whose info string is "<lang> <name>".
func block(t *testing.T, doc, lang, name string) string {
	t.Helper()
	body, err := testenv.DocBlock(doc, lang, name)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// The OpenBao policies in the docs are the ones every test runs with.
func TestOpenBaoPoliciesAreTheTestedOnes(t *testing.T) {
	b := &testenv.OpenBao{KVMount: "kv", TenantBasePath: "postgresql-tenants"}
	if diff := cmp.Diff(b.ProviderPolicy(), block(t, "install.md", "hcl", "provider-policy")); diff != "" {
		t.Errorf("provider policy: -tested +documented:\n%s", diff)
	}
	if diff := cmp.Diff(b.TenantReaderPolicy("<ACCESSOR>"), block(t, "install.md", "hcl", "tenant-reader-policy")); diff != "" {
		t.Errorf("tenant reader policy: -tested +documented:\n%s", diff)
	}
}

// The documented admin role, created on the real server, has exactly the
// attributes of the admin role every provisioning test uses.
func TestAdminRoleSQLMatchesTheTestedRole(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test connection
	var name string
	for _, line := range strings.Split(block(t, "install.md", "sql", "admin-role"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, `\`) { // psql meta-commands (\password) are the admin's
			continue
		}
		if _, err := c.Exec(ctx, line); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if f := strings.Fields(line); len(f) > 2 && f[0] == "CREATE" && f[1] == "ROLE" {
			name = f[2]
		}
	}
	if name == "" {
		t.Fatal("the documented block creates no role")
	}
	attrs := func(role string) string {
		var s string
		if err := c.QueryRow(ctx, `SELECT format('super=%s createdb=%s createrole=%s login=%s inherit=%s replication=%s bypassrls=%s connlimit=%s',
			rolsuper, rolcreatedb, rolcreaterole, rolcanlogin, rolinherit, rolreplication, rolbypassrls, rolconnlimit) FROM pg_roles WHERE rolname = $1`, role).Scan(&s); err != nil {
			t.Fatalf("role %s: %v", role, err)
		}
		return s
	}
	if diff := cmp.Diff(attrs(env.Postgres.AdminUser), attrs(name)); diff != "" {
		t.Errorf("documented role vs the tested admin role: -tested +documented:\n%s", diff)
	}
}
