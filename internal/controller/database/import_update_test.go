package database_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestImportWithUpdateRepairsTemplateAndConnectionLimit: an import whose
// policies allow Update repairs what a provisioned Database repairs: its
// owner marking the database a template or giving it a connection limit
// of its own is undone, and its Ready condition says Update is allowed,
// not read-only.
func TestImportWithUpdateRepairsTemplateAndConnectionLimit(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	const name = "impupd"
	const record = "postgresql-databases/imports/" + name
	su := superConn(t, "postgres")
	pw := testenv.RandomSecret("imp-")
	if err := env.Postgres.CreateRole(ctx, name, pw, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE "+name+" OWNER "+name); err != nil {
		t.Fatal(err)
	}
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	if _, err := root.KVv2("kv").Put(ctx, record, map[string]any{"username": name, "password": pw}); err != nil {
		t.Fatal(err)
	}
	if adminOptionNeeded() {
		// A role the admin did not create is repaired only with ADMIN
		// OPTION on it (PostgreSQL 16 and later).
		grantAdminOption(t, name)
	}
	d := newDB(name, func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionUpdate}
		d.Spec.ForProvider.CredentialPath = ptr.To(record)
		d.Spec.ForProvider.Extensions = nil
	})
	want := fmt.Sprintf("imported with Update allowed: database %q, role %q and the credential at %s match; drift is repaired", name, name, record)
	readyUpdate := func(d *v1alpha1.Database) bool {
		return ready(d) && d.GetCondition(xpv2.TypeReady).Message == want
	}
	apply(t, d)
	// Made by the superuser, PUBLIC may connect: repaired first.
	waitDB(t, d, "Ready as an import with Update allowed", readyUpdate)

	attributes := func() (template bool, limit int32) {
		if err := su.QueryRow(ctx, "SELECT datistemplate, datconnlimit FROM pg_database WHERE datname = $1", name).Scan(&template, &limit); err != nil {
			t.Fatal(err)
		}
		return template, limit
	}
	testenv.RunSQL(t, su, "the superuser", "ALTER DATABASE "+name+" IS_TEMPLATE true", "ALTER DATABASE "+name+" CONNECTION LIMIT 3")
	if tpl, limit := attributes(); !tpl || limit != 3 {
		t.Fatalf("the superuser's ALTER DATABASE did not hold: template %v, limit %d", tpl, limit)
	}
	waitDB(t, d, "the template flag and the connection limit repaired, Ready", func(d *v1alpha1.Database) bool {
		tpl, limit := attributes()
		return !tpl && limit == -1 && readyUpdate(d)
	})
	if c := d.GetCondition(xpv2.TypeReady); strings.Contains(c.Message, "read-only") {
		t.Errorf("an import with Update allowed says read-only: %q", c.Message)
	}
	if k := readKV(t, record); k.Versions != 1 || len(k.Owner) != 0 {
		t.Error("the import's repair changed the credential record")
	}
}
