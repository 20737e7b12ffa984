package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// accessRole creates a login role beside a tenant's owner and returns its
// password.
func accessRole(t *testing.T, p *postgres.Pool, role string) string {
	t.Helper()
	pw := testenv.RandomSecret(role + "-")
	v, err := scram.Verifier(pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CreateRole(context.Background(), role, v); err != nil {
		t.Fatalf("CreateRole %s: %v", role, err)
	}
	return pw
}

// TestAccessRolesUseDataOnly: a read-write and a read-only login role
// beside a tenant's owner, with real sessions. The read-write role reads
// and writes rows, uses sequences and calls routines, and is refused DDL,
// TRUNCATE and CREATE; the read-only role reads and is refused every
// write. What the owner creates after the grant (a table, a sequence, a
// schema with a table) is reachable by both at once, with no grant run
// again. What the owner revokes is reported and put back. Neither role
// reaches another tenant's database.
func TestAccessRolesUseDataOnly(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	ownerPW := testenv.RandomSecret("acc-")
	provision(t, p, "acc_owner", ownerPW)
	provision(t, p, "acc_next", testenv.RandomSecret("next-"))
	owner, err := appConn(t, "acc_owner", ownerPW, "acc_owner")
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx) //nolint:errcheck // test connection
	testenv.RunSQL(t, owner, "the owner",
		"CREATE TABLE public.items (id bigserial PRIMARY KEY, v text)",
		"INSERT INTO public.items (v) VALUES ('before')",
		"CREATE FUNCTION public.item_count() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM public.items'",
		"CREATE SCHEMA app",
		"CREATE TABLE app.events (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())")
	rwPW, roPW := accessRole(t, p, "acc_rw"), accessRole(t, p, "acc_ro")

	// Before the grant every privilege is missing, CONNECT first (but
	// EXECUTE on routines, which PUBLIC holds unless the owner revoked it).
	missing, err := p.ObserveAccess(ctx, "acc_owner", "acc_owner", "acc_rw", postgres.AccessReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) < 10 || !contains(missing, "database: CONNECT") || !contains(missing, "table public.items: INSERT") ||
		!contains(missing, "default privileges on schemas: USAGE") {
		t.Fatalf("before the grant, missing %q", missing)
	}
	// PUBLIC may create in a schema: an owner's grant here, and public
	// itself before 15 (owned by the bootstrap superuser there, which only
	// a superuser can change: the grant is refused with the statement).
	testenv.RunSQL(t, owner, "the owner", "GRANT CREATE ON SCHEMA app TO PUBLIC")
	major, err := p.Major(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if major < 15 {
		err := p.GrantAccess(ctx, "acc_owner", "acc_owner", "acc_rw", postgres.AccessReadWrite)
		want := `as a superuser connected to acc_owner, run: GRANT USAGE, CREATE ON SCHEMA "public" TO "acc_owner"; REVOKE CREATE ON SCHEMA "public" FROM PUBLIC`
		if postgres.ClassOf(err) != postgres.ClassPrivileges || !strings.Contains(err.Error(), want) {
			t.Fatalf("GrantAccess with PUBLIC creating in the superuser's public: %v, want %s and %q", err, postgres.ClassPrivileges, want)
		}
		superExec(t, "acc_owner", `GRANT USAGE, CREATE ON SCHEMA "public" TO "acc_owner"`, `REVOKE CREATE ON SCHEMA "public" FROM PUBLIC`)
	}
	for role, a := range map[string]postgres.Access{"acc_rw": postgres.AccessReadWrite, "acc_ro": postgres.AccessReadOnly} {
		if err := p.GrantAccess(ctx, "acc_owner", "acc_owner", role, a); err != nil {
			t.Fatalf("GrantAccess %s: %v", role, err)
		}
		if missing, err := p.ObserveAccess(ctx, "acc_owner", "acc_owner", role, a); err != nil || len(missing) > 0 {
			t.Fatalf("after the grant %s misses %q (%v)", role, missing, err)
		}
	}

	rw, err := appConn(t, "acc_rw", rwPW, "acc_owner")
	if err != nil {
		t.Fatalf("the read-write role cannot log in to its database: %v", err)
	}
	defer rw.Close(ctx) //nolint:errcheck // test connection
	ro, err := appConn(t, "acc_ro", roPW, "acc_owner")
	if err != nil {
		t.Fatalf("the read-only role cannot log in to its database: %v", err)
	}
	defer ro.Close(ctx) //nolint:errcheck // test connection

	testenv.RunSQL(t, rw, "the read-write role",
		"INSERT INTO public.items (v) VALUES ('rw')",
		"UPDATE public.items SET v = 'rw2' WHERE v = 'rw'",
		"DELETE FROM public.items WHERE v = 'rw2'",
		"SELECT public.item_count()",
		"SELECT nextval('public.items_id_seq')",
		"INSERT INTO app.events DEFAULT VALUES")
	testenv.RefusedSQL(t, rw, "the read-write role",
		"DROP TABLE public.items",
		"ALTER TABLE public.items ADD COLUMN x int",
		"TRUNCATE public.items",
		"CREATE TABLE public.mine (id int)",
		"CREATE SCHEMA mine",
		"CREATE TABLE app.mine (id int)",
		"ALTER ROLE acc_owner PASSWORD NULL",
		"GRANT acc_owner TO acc_rw")
	testenv.RunSQL(t, ro, "the read-only role",
		"SELECT count(*) FROM public.items",
		"SELECT count(*) FROM app.events",
		"SELECT last_value FROM public.items_id_seq")
	testenv.RefusedSQL(t, ro, "the read-only role",
		"INSERT INTO public.items (v) VALUES ('ro')",
		"UPDATE public.items SET v = 'ro'",
		"DELETE FROM public.items",
		"TRUNCATE public.items",
		"SELECT nextval('public.items_id_seq')",
		"INSERT INTO app.events DEFAULT VALUES",
		"CREATE TABLE public.mine (id int)",
		"DROP TABLE public.items")

	// What the owner creates later is covered by its default privileges.
	testenv.RunSQL(t, owner, "the owner",
		"CREATE TABLE public.later (id bigserial PRIMARY KEY, v text)",
		"CREATE SCHEMA reports",
		"CREATE TABLE reports.daily (id bigserial PRIMARY KEY, n int)")
	testenv.RunSQL(t, rw, "the read-write role",
		"INSERT INTO public.later (v) VALUES ('x')",
		"INSERT INTO reports.daily (n) VALUES (1)")
	testenv.RunSQL(t, ro, "the read-only role",
		"SELECT count(*) FROM public.later",
		"SELECT count(*) FROM reports.daily")
	testenv.RefusedSQL(t, ro, "the read-only role", "INSERT INTO reports.daily (n) VALUES (2)")

	// What the owner revokes is reported, then put back.
	testenv.RunSQL(t, owner, "the owner",
		"REVOKE INSERT ON public.items FROM acc_rw",
		"ALTER DEFAULT PRIVILEGES REVOKE SELECT ON TABLES FROM acc_ro")
	missing, err = p.ObserveAccess(ctx, "acc_owner", "acc_owner", "acc_rw", postgres.AccessReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"table public.items: INSERT"}, missing); diff != "" {
		t.Errorf("the read-write role's drift: -want +got:\n%s", diff)
	}
	missing, err = p.ObserveAccess(ctx, "acc_owner", "acc_owner", "acc_ro", postgres.AccessReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default privileges on tables: SELECT"}, missing); diff != "" {
		t.Errorf("the read-only role's drift: -want +got:\n%s", diff)
	}
	for role, a := range map[string]postgres.Access{"acc_rw": postgres.AccessReadWrite, "acc_ro": postgres.AccessReadOnly} {
		if err := p.GrantAccess(ctx, "acc_owner", "acc_owner", role, a); err != nil {
			t.Fatalf("GrantAccess %s again: %v", role, err)
		}
		if missing, err := p.ObserveAccess(ctx, "acc_owner", "acc_owner", role, a); err != nil || len(missing) > 0 {
			t.Errorf("after the repair %s misses %q (%v)", role, missing, err)
		}
	}
	testenv.RunSQL(t, rw, "the read-write role", "INSERT INTO public.items (v) VALUES ('again')")

	// Neither reaches another tenant's database.
	for role, pw := range map[string]string{"acc_rw": rwPW, "acc_ro": roPW} {
		if c, err := appConn(t, role, pw, "acc_next"); err == nil {
			_ = c.Close(ctx)
			t.Errorf("%s logged in to another tenant's database", role)
		}
	}

	// Removed: the role is refused DROP ROLE while it holds the owner's
	// grants; after RevokeAccess it holds none, and it goes.
	if err := p.DropRole(ctx, "acc_rw"); postgres.ClassOf(err) != postgres.ClassDependentObjects {
		t.Errorf("DROP ROLE of a role holding grants: %v, want %s", err, postgres.ClassDependentObjects)
	}
	if err := p.RevokeAccess(ctx, "acc_owner", "acc_owner", "acc_rw"); err != nil {
		t.Fatalf("RevokeAccess: %v", err)
	}
	if missing, err := p.ObserveAccess(ctx, "acc_owner", "acc_owner", "acc_rw", postgres.AccessReadWrite); err != nil || !contains(missing, "database: CONNECT") || !contains(missing, "default privileges on schemas: USAGE") {
		t.Errorf("after RevokeAccess the role misses %q (%v), want everything", missing, err)
	}
	if err := p.DropRole(ctx, "acc_rw"); err != nil {
		t.Errorf("DROP ROLE after RevokeAccess: %v", err)
	}
	testenv.RunSQL(t, ro, "the read-only role", "SELECT count(*) FROM public.items")

	// An unknown access is refused before any statement.
	if err := p.GrantAccess(ctx, "acc_owner", "acc_owner", "acc_ro", postgres.Access("admin")); postgres.ClassOf(err) != postgres.ClassInvalid {
		t.Errorf("GrantAccess with an unknown access: %v, want an invalid-input error", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
