package database_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// dataRolesReady: Ready, and status lists every data role of the spec as
// ready.
func dataRolesReady(d *v1alpha1.Database) bool {
	if !ready(d) || len(d.Status.AtProvider.DataRoles) != len(d.Spec.ForProvider.DataRoles) {
		return false
	}
	for _, r := range d.Status.AtProvider.DataRoles {
		if !r.Ready {
			return false
		}
	}
	return true
}

// publicCreate: on PostgreSQL 14, where PUBLIC may create in the public
// schema of a new database and only a superuser can change that, the
// data roles wait with InsufficientPrivileges naming the statements; the
// test runs them as the superuser, as the docs tell an admin to.
func publicCreate(t *testing.T, d *v1alpha1.Database, database string) {
	t.Helper()
	publicCreateIf(t, d, database, true)
}

// publicCreateIf is publicCreate; with requirePublicCreate false, a
// database whose public schema PUBLIC may not create in (a database
// created from a template without that grant) may be Ready without it.
func publicCreateIf(t *testing.T, d *v1alpha1.Database, database string, requirePublicCreate bool) {
	t.Helper()
	if m, _ := strconv.Atoi(env.Postgres.Version); m >= 15 {
		return
	}
	grant := fmt.Sprintf(`GRANT USAGE, CREATE ON SCHEMA "public" TO %q`, database)
	revoke := `REVOKE CREATE ON SCHEMA "public" FROM PUBLIC`
	waitDB(t, d, "InsufficientPrivileges naming what a superuser runs", func(d *v1alpha1.Database) bool {
		c := d.GetCondition("Ready")
		return string(c.Reason) == "InsufficientPrivileges" && strings.Contains(c.Message, "as a superuser connected to "+database+", run: "+grant+"; "+revoke) ||
			(!requirePublicCreate && dataRolesReady(d))
	})
	if dataRolesReady(d) {
		return
	}
	c, err := env.Postgres.SuperConn(context.Background(), database)
	if err != nil {
		t.Fatal(err)
	}
	// Closed at once: a superuser's session would keep a Delete from
	// ending the database's sessions.
	defer c.Close(context.Background()) //nolint:errcheck // test
	testenv.RunSQL(t, c, "the superuser", grant, revoke)
}

// TestDataRolesUseTheOwnersDataOnly: a Database with a read-write and a
// read-only data role makes both, each with its own record, granted the
// owner's data now and later; their CONNECT is not other access; a revoked
// grant and a changed password are put back; a role removed from the spec
// is dropped with its record, and the Database deleted with reclaim Delete
// drops the rest.
func TestDataRolesUseTheOwnersDataOnly(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("drshop", func(d *v1alpha1.Database) {
		d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{
			{Name: "app", Access: v1alpha1.DataReadWrite, Limits: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](7)}},
			{Name: "report", Access: v1alpha1.DataReadOnly},
		}
	})
	next := newDB("drnext")
	apply(t, d)
	apply(t, next)
	publicCreate(t, d, "drshop")
	waitDB(t, d, "Ready with its data roles", dataRolesReady)
	waitDB(t, next, "Ready", ready)
	if c := d.GetCondition("OtherAccess"); c.Status == corev1.ConditionTrue {
		t.Errorf("the data roles' CONNECT is shown as other access: %s", c.Message)
	}

	owner := readKV(t, dbPath("drshop"))
	if got := owner.Owner["data-roles"]; got != "app,report" {
		t.Errorf("the Database's record lists data roles %v, want app,report", got)
	}
	app, report := readKV(t, dbPath("drshop")+"/roles/app"), readKV(t, dbPath("drshop")+"/roles/report")
	if app.Data["username"] != "drshop_app_1" || report.Data["username"] != "drshop_report_1" || app.Data["database"] != "drshop" {
		t.Fatalf("data role records: %v / %v", app.Data["username"], report.Data["username"])
	}
	if app.Data["password"] == report.Data["password"] || app.Data["password"] == owner.Data["password"] {
		t.Error("data roles share a password")
	}
	var connLimit int32
	sc := superConn(t, "postgres")
	if err := sc.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = 'drshop_app_1'").Scan(&connLimit); err != nil || connLimit != 7 {
		t.Errorf("drshop_app_1's connection limit %d (%v), want 7", connLimit, err)
	}
	// The connection budget counts the login roles the admin is a member
	// of.
	var member bool
	if err := sc.QueryRow(ctx, "SELECT pg_has_role($1, 'drshop_app_1', 'MEMBER') AND pg_has_role($1, 'drshop_report_1', 'MEMBER')", env.Postgres.AdminUser).Scan(&member); err != nil || !member {
		t.Errorf("the admin is not a member of both data roles: %v (%v)", member, err)
	}

	ownerConn, err := appLogin(t, "drshop", owner.Data["password"].(string), "drshop")
	if err != nil {
		t.Fatal(err)
	}
	defer ownerConn.Close(ctx) //nolint:errcheck // test
	testenv.RunSQL(t, ownerConn, "the owner", "CREATE TABLE items (id bigserial PRIMARY KEY, v text)", "CREATE SCHEMA later", "CREATE TABLE later.t (n int)")
	rw, err := appLogin(t, "drshop_app_1", app.Data["password"].(string), "drshop")
	if err != nil {
		t.Fatalf("the read-write role cannot log in with its record: %v", err)
	}
	defer rw.Close(ctx) //nolint:errcheck // test
	ro, err := appLogin(t, "drshop_report_1", report.Data["password"].(string), "drshop")
	if err != nil {
		t.Fatalf("the read-only role cannot log in with its record: %v", err)
	}
	defer ro.Close(ctx) //nolint:errcheck // test
	testenv.RunSQL(t, rw, "the read-write role", "INSERT INTO items (v) VALUES ('a')", "UPDATE items SET v = 'b'", "INSERT INTO later.t VALUES (1)", "DELETE FROM later.t")
	testenv.RefusedSQL(t, rw, "the read-write role", "DROP TABLE items", "TRUNCATE items", "CREATE TABLE mine (n int)", "ALTER TABLE items ADD COLUMN x int")
	testenv.RunSQL(t, ro, "the read-only role", "SELECT count(*) FROM items", "SELECT count(*) FROM later.t")
	testenv.RefusedSQL(t, ro, "the read-only role", "INSERT INTO items (v) VALUES ('c')", "DELETE FROM items")
	for role, pw := range map[string]any{"drshop_app_1": app.Data["password"], "drshop_report_1": report.Data["password"]} {
		if c, err := appLogin(t, role, pw.(string), "drnext"); err == nil {
			_ = c.Close(ctx)
			t.Errorf("%s reached another tenant's database", role)
		}
	}

	// A revoked grant and a changed password are put back (at the next
	// login check).
	testenv.RunSQL(t, ownerConn, "the owner", "REVOKE INSERT ON items FROM drshop_app")
	testenv.RunSQL(t, sc, "the superuser", "ALTER ROLE drshop_report_1 PASSWORD 'changed-by-hand'")
	err = testenv.WaitFor(ctx, 2*loginCheck+30*time.Second, func(ctx context.Context) error {
		if _, err := rw.Exec(ctx, "INSERT INTO items (v) VALUES ('again')"); err != nil {
			time.Sleep(time.Second)
			return err
		}
		c, err := appLogin(t, "drshop_report_1", report.Data["password"].(string), "drshop")
		if err != nil {
			time.Sleep(time.Second)
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		t.Fatalf("the revoked grant and the changed password were not put back: %v", err)
	}

	// Removed from the spec: its sessions end, the role and its record go.
	testenv.Edit(t, env.Kube.Client, d, func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = d.Spec.ForProvider.DataRoles[:1]
	})
	waitDB(t, d, "the read-only role removed", func(d *v1alpha1.Database) bool {
		return dataRolesReady(d) && !readPG(t, "drshop", "drshop_report").RoleExists && !readPG(t, "drshop", "drshop_report_1").RoleExists
	})
	if readKV(t, dbPath("drshop")+"/roles/report").Exists {
		t.Error("the removed role's record is still there")
	}
	if got := readKV(t, dbPath("drshop")).Owner["data-roles"]; got != "app" {
		t.Errorf("after the removal the record lists %v", got)
	}
	if err := ro.Ping(ctx); err == nil {
		t.Error("the removed role's session is alive")
	}

	// Deleted with reclaim Delete: the data role and its record go too.
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d)
	if readPG(t, "drshop", "drshop_app").RoleExists || readPG(t, "drshop", "drshop_app_1").RoleExists || readKV(t, dbPath("drshop")+"/roles/app").Exists {
		t.Error("the data role or its record outlived the deleted Database")
	}
}

// TestDataRoleMadeByHandIsNotTaken: a role that already has a data role's
// name is not this Database's: the Database reports a Conflict naming it,
// leaves its password and privileges alone and still makes its other data
// role; dropped by hand, the name is free and the role is made.
func TestDataRoleMadeByHandIsNotTaken(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	sc := superConn(t, "postgres")
	testenv.RunSQL(t, sc, "the superuser", "CREATE ROLE drhand_app LOGIN PASSWORD 'made-by-hand'")
	before := readPG(t, "drhand", "drhand_app").Verifier
	d := newDB("drhand", func(d *v1alpha1.Database) {
		d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{
			{Name: "app", Access: v1alpha1.DataReadWrite},
			{Name: "report", Access: v1alpha1.DataReadOnly},
		}
	})
	apply(t, d)
	publicCreate(t, d, "drhand")
	waitDB(t, d, "a Conflict naming the role made by hand, the other role made", func(d *v1alpha1.Database) bool {
		c := d.GetCondition("Ready")
		if string(c.Reason) != "Conflict" || !strings.Contains(c.Message, `the role "drhand_app" exists and this Database has no record of creating it`) {
			return false
		}
		for _, r := range d.Status.AtProvider.DataRoles {
			if r.Name == "report" && r.Ready {
				return true
			}
		}
		return false
	})
	if after := readPG(t, "drhand", "drhand_app"); after.Verifier != before {
		t.Error("the role made by hand got another password")
	}
	if readKV(t, dbPath("drhand")+"/roles/app").Exists {
		t.Error("a record was written for a role that is not this Database's")
	}
	var connect bool
	if err := sc.QueryRow(ctx, "SELECT has_database_privilege('drhand_app', 'drhand', 'CONNECT')").Scan(&connect); err != nil || connect {
		t.Errorf("the role made by hand may connect to the tenant's database: %v (%v)", connect, err)
	}

	testenv.RunSQL(t, sc, "the superuser", "DROP ROLE drhand_app")
	waitDB(t, d, "Ready once the name is free", dataRolesReady)
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d)
}
