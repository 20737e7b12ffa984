package database_test

import (
	"context"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestImportGetsDataRolesOnlyWithUpdate: a read-only import that lists
// data roles is refused (InvalidSpec) and nothing is made: its grants are
// never changed. With Update the roles are made, their records and their
// list beside the import's record (which stays as the admin wrote it),
// and the read-write role works the owner's data.
func TestImportGetsDataRolesOnlyWithUpdate(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	su := superConn(t, "postgres")
	pw := testenv.RandomSecret("imp-")
	if err := env.Postgres.CreateRole(ctx, "handroles", pw, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE handroles OWNER handroles"); err != nil {
		t.Fatal(err)
	}
	const record = "postgresql-databases/imports/handroles"
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	if _, err := root.KVv2("kv").Put(ctx, record, map[string]any{"username": "handroles", "password": pw}); err != nil {
		t.Fatal(err)
	}
	d := newDB("handroles", func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
		d.Spec.ForProvider.CredentialPath = ptr.To(record)
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}
	})
	apply(t, d)
	waitDB(t, d, "refused", func(d *v1alpha1.Database) bool {
		c := d.GetCondition(xpv2.TypeReady)
		return string(c.Reason) == "InvalidSpec" && strings.Contains(c.Message, "a read-only import never changes the database's grants")
	})
	time.Sleep(4 * poll)
	if pg := readPG(t, "handroles", "handroles_app"); pg.RoleExists {
		t.Error("a read-only import made a data role")
	}
	if k := readKV(t, dbPath("handroles")); k.Exists {
		t.Errorf("a read-only import wrote %s", dbPath("handroles"))
	}

	edit(t, d, func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionUpdate}
	})
	if adminOptionNeeded() {
		grantAdminOption(t, "handroles")
	}
	// Made from template1 by the superuser: whether PUBLIC may create in
	// its public schema on PostgreSQL 14 depends on template1.
	publicCreateIf(t, d, "handroles", false)
	waitDB(t, d, "Ready with its data role", dataRolesReady)
	list := readKV(t, dbPath("handroles"))
	if list.Owner["data-roles"] != "app" || list.Owner["database-uid"] != string(d.GetUID()) || list.Versions != 0 {
		t.Errorf("the import's data roles are listed as %v (versions %d); want app, owned by the Database, no data", list.Owner, list.Versions)
	}
	if k := readKV(t, record); k.Versions != 1 || len(k.Owner) != 0 {
		t.Error("the import's own record was changed")
	}
	app := readKV(t, dbPath("handroles")+"/roles/app")
	owner, err := appLogin(t, "handroles", pw, "handroles")
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx) //nolint:errcheck // test
	// In a schema of its own: on PostgreSQL 14 the owner of a database made
	// from a hardened template1 may not create in public.
	testenv.RunSQL(t, owner, "the import's owner", "CREATE SCHEMA app", "CREATE TABLE app.notes (n int)")
	rw, err := appLogin(t, app.Data["username"].(string), app.Data["password"].(string), "handroles")
	if err != nil {
		t.Fatalf("the import's data role does not log in: %v", err)
	}
	defer rw.Close(ctx) //nolint:errcheck // test
	testenv.RunSQL(t, rw, "the data role", "INSERT INTO app.notes VALUES (1)")
	testenv.RefusedSQL(t, rw, "the data role", "DROP TABLE app.notes")
}
