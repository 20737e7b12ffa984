package database_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// holderPassword is what the holder of a tenant's credential sets as the
// role's own password.
const holderPassword = "the-holders-own-password"

// refused asserts that password does not log in as role.
func refused(t *testing.T, role, password, what string) {
	t.Helper()
	if c, err := appLogin(t, role, password, role); err == nil {
		_ = c.Close(context.Background())
		t.Errorf("%s still logs in", what)
	}
}

// logsIn reports whether password logs in as role to its database.
func logsIn(t *testing.T, role, password string) bool {
	t.Helper()
	c, err := appLogin(t, role, password, role)
	if err != nil {
		return false
	}
	_ = c.Close(context.Background())
	return true
}

// TestHolderChangedPasswordIsSetBackFromTheRecord: whoever holds a
// tenant's credential sets its own password on the role (ALTER ROLE
// CURRENT_USER PASSWORD). The record is the truth: at the next login
// check the role gets the record's password back, without a new version,
// and the holder's own password no longer logs in.
func TestHolderChangedPasswordIsSetBackFromTheRecord(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	name := "holderpw"
	d := newDB(name)
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	k := readKV(t, dbPath(name))
	pw := k.Data["password"].(string)

	holder, err := appLogin(t, name, pw, name)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx) //nolint:errcheck // test
	if _, err := holder.Exec(ctx, "ALTER ROLE CURRENT_USER PASSWORD '"+holderPassword+"'"); err != nil {
		t.Fatal(err)
	}
	if !logsIn(t, name, holderPassword) {
		t.Fatal("the holder's own password does not log in: the attack did not happen")
	}
	waitDB(t, d, "Ready with the record's password back on the role", func(d *v1alpha1.Database) bool {
		return ready(d) && logsIn(t, name, pw) && !logsIn(t, name, holderPassword)
	})
	if after := readKV(t, dbPath(name)); after.Versions != k.Versions || after.Data["password"] != pw {
		t.Errorf("the record changed: %d versions (want %d), password changed %v", after.Versions, k.Versions, after.Data["password"] != pw)
	}
	// Sessions are left alone by the repair (they may be the app's): a
	// rotation with terminateSessions ends them.
	if !alive(holder) {
		t.Error("the repair ended a session; only a rotation with terminateSessions does")
	}
}

// TestRotationCompletesWhateverTheHolderDid: the holder of a tenant's
// credential fills the role's connection limit with its sessions and, from
// one of them, keeps setting its own password on the role. A rotation with
// terminateSessions still completes; afterwards none of the holder's
// sessions is left, and neither its own password nor the old one logs in,
// while the record's new password does.
func TestRotationCompletesWhateverTheHolderDid(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	name := "holderrot"
	d := newDB(name, func(d *v1alpha1.Database) {
		d.Spec.ForProvider.Limits = &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](2)}
	})
	apply(t, d)
	su := superConn(t, "postgres")
	waitDB(t, d, "Ready with its connection limit", func(d *v1alpha1.Database) bool {
		var limit int32
		_ = su.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", name).Scan(&limit)
		return ready(d) && limit == 2
	})
	// The holder fills the role's connection limit: the provider's login
	// check is refused after authentication, which proves the password,
	// and a rotation with terminateSessions completes.
	old := readKV(t, dbPath(name))
	fill := func(pw string) []*pgx.Conn {
		t.Helper()
		var sessions []*pgx.Conn
		for range 2 {
			// The provider proves a new password by logging in as the
			// role: while that session lasts, it holds one of the two
			// slots, so a full limit is retried for a few seconds.
			c, err := appLogin(t, name, pw, name)
			for end := time.Now().Add(10 * time.Second); err != nil && strings.Contains(err.Error(), "53300") && time.Now().Before(end); {
				time.Sleep(200 * time.Millisecond)
				c, err = appLogin(t, name, pw, name)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(ctx) })
			sessions = append(sessions, c)
		}
		if logsIn(t, name, pw) {
			t.Fatal("a third session logged in: the role's connection limit is not full")
		}
		return sessions
	}
	sessions := fill(old.Data["password"].(string))
	// It also sets session defaults on its own role that would break a
	// session that did not pin its own.
	for _, stmt := range []string{
		"ALTER ROLE CURRENT_USER SET default_transaction_read_only = on",
		"ALTER ROLE CURRENT_USER SET statement_timeout = '1ms'",
		"ALTER ROLE CURRENT_USER IN DATABASE " + name + " SET search_path = nowhere",
	} {
		if _, err := sessions[1].Exec(ctx, stmt); err != nil {
			t.Fatalf("as the holder, %s: %v", stmt, err)
		}
	}
	requestRotation(t, d, "limitfull", true)
	waitDB(t, d, "rotated with the limit full", rotated("limitfull"))
	for i, c := range sessions {
		if alive(c) {
			t.Errorf("the holder's session %d survived the rotation with terminateSessions", i)
		}
	}
	pw := checkRotated(t, name, old, "limitfull")

	// With the new password, the holder fills the limit again and, from
	// one of its sessions, keeps setting its own password on the role.
	old = readKV(t, dbPath(name))
	sessions = fill(pw)
	loop, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for loop.Err() == nil {
			if _, err := sessions[0].Exec(loop, "ALTER ROLE CURRENT_USER PASSWORD '"+holderPassword+"'"); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	requestRotation(t, d, "lockout", true)
	waitDB(t, d, "rotated", rotated("lockout"))
	stop()
	wg.Wait()
	for i, c := range sessions {
		if alive(c) {
			t.Errorf("the holder's session %d survived the rotation with terminateSessions", i)
		}
	}
	refused(t, name, holderPassword, "the holder's own password")
	checkRotated(t, name, old, "lockout")
}

// TestOwnerCannotMakeItsDatabaseATemplate: the owner marks its database a
// template and gives it a connection limit of 0; both are repaired. A
// database marked a template when its Database is deleted (with the
// repair held back) is still dropped.
func TestOwnerCannotMakeItsDatabaseATemplate(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	name := "ownertpl"
	d := newDB(name, func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete })
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	pw := readKV(t, dbPath(name)).Data["password"].(string)
	owner, err := appLogin(t, name, pw, name)
	if err != nil {
		t.Fatal(err)
	}
	su := superConn(t, "postgres")
	attributes := func() (template bool, limit int32) {
		if err := su.QueryRow(ctx, "SELECT datistemplate, datconnlimit FROM pg_database WHERE datname = $1", name).Scan(&template, &limit); err != nil {
			t.Fatal(err)
		}
		return template, limit
	}
	for _, stmt := range []string{"ALTER DATABASE " + name + " IS_TEMPLATE true", "ALTER DATABASE " + name + " CONNECTION LIMIT 0"} {
		if _, err := owner.Exec(ctx, stmt); err != nil {
			t.Fatalf("as the owner, %s: %v", stmt, err)
		}
	}
	_ = owner.Close(ctx)
	if tpl, limit := attributes(); !tpl || limit != 0 {
		t.Fatalf("the owner's ALTER DATABASE did not hold: template %v, limit %d", tpl, limit)
	}
	waitDB(t, d, "Ready with the attributes repaired", func(d *v1alpha1.Database) bool {
		tpl, limit := attributes()
		return ready(d) && !tpl && limit == -1
	})

	// Marked again, with every repair failing: the drop still happens.
	inject(database.StepRepair, 1000)
	defer inject(database.StepRepair, 0)
	owner, err = appLogin(t, name, pw, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, "ALTER DATABASE "+name+" IS_TEMPLATE true"); err != nil {
		t.Fatal(err)
	}
	_ = owner.Close(ctx)
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d)
	if s := readPG(t, name, name); s.DBExists || s.RoleExists {
		t.Errorf("after Delete of a database its owner marked a template: %+v", s)
	}
}
