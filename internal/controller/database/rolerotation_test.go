package database_test

import (
	"context"
	"testing"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// edit updates d with mut, re-read on every conflict.
func edit(t *testing.T, d *v1alpha1.Database, mut func(*v1alpha1.Database)) {
	t.Helper()
	testenv.Edit(t, env.Kube.Client, d, mut)
}

// roleRotated: Ready, and the data role's status shows the rotation of
// the role's id and the Database's id completed.
func roleRotated(id, databaseID string) func(*v1alpha1.Database) bool {
	return func(d *v1alpha1.Database) bool {
		if !dataRolesReady(d) {
			return false
		}
		r := d.Status.AtProvider.DataRoles[0].CredentialRotation
		return r != nil && r.ID == id && r.DatabaseID == databaseID && r.CompletedAt != nil
	}
}

// TestDataRoleRotationLocksTheHolderOut: the holder of a data role's
// credential, in a session of its own, sets its own password on the login
// it holds. The role's rotation with terminateSessions (no grace: it locks
// the old credential's holders out) writes one new version naming the
// other login, ends the holder's session and leaves neither the old
// password nor the holder's logging in. The Database's own rotation rotates its data roles
// too (how a rebind locks the old team out of every identity).
func TestDataRoleRotationLocksTheHolderOut(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("drrot", func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}
	})
	apply(t, d)
	publicCreate(t, d, "drrot")
	waitDB(t, d, "Ready with its data role", dataRolesReady)
	if r := d.Status.AtProvider.DataRoles[0].CredentialRotation; r != nil {
		t.Errorf("a role never rotated shows a rotation: %+v", r)
	}
	path := dbPath("drrot") + "/roles/app"
	before := readKV(t, path)
	old := before.Data["password"].(string)
	login := before.Data["username"].(string)

	holder, err := appLogin(t, login, old, "drrot")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx) //nolint:errcheck // test
	if _, err := holder.Exec(ctx, "ALTER ROLE CURRENT_USER PASSWORD '"+holderPassword+"'"); err != nil {
		t.Fatal(err)
	}

	edit(t, d, func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles[0].CredentialRotation = &v1alpha1.CredentialRotation{ID: "r1", TerminateSessions: true}
	})
	waitDB(t, d, "the role's rotation completed", roleRotated("r1", ""))
	after := readKV(t, path)
	if after.Versions != before.Versions+1 {
		t.Errorf("the role's record has %d versions after one rotation, want %d", after.Versions, before.Versions+1)
	}
	pw := after.Data["password"].(string)
	if pw == old {
		t.Fatal("the rotation kept the password")
	}
	if alive(holder) {
		t.Error("the holder's session survived a rotation with terminateSessions")
	}
	for what, p := range map[string]string{"the old password": old, "the holder's own password": holderPassword} {
		if c, err := appLogin(t, login, p, "drrot"); err == nil {
			_ = c.Close(ctx)
			t.Errorf("%s still logs in after the rotation", what)
		}
	}
	c, err := appLogin(t, after.Data["username"].(string), pw, "drrot")
	if err != nil {
		t.Fatalf("the rotated password does not log in: %v", err)
	}
	_ = c.Close(ctx)

	// The Database's rotation: the owner and every data role.
	owner := readKV(t, dbPath("drrot"))
	edit(t, d, func(d *v1alpha1.Database) { d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: "all-1"} })
	waitDB(t, d, "the owner and the role rotated", func(d *v1alpha1.Database) bool {
		r := d.Status.AtProvider.CredentialRotation
		return roleRotated("r1", "all-1")(d) && r != nil && r.ID == "all-1"
	})
	if got := readKV(t, path); got.Versions != after.Versions+1 || got.Data["password"] == pw {
		t.Errorf("the Database's rotation left the role's record at %d versions (want %d), password changed %v", got.Versions, after.Versions+1, got.Data["password"] != pw)
	}
	if got := readKV(t, dbPath("drrot")); got.Versions != owner.Versions+1 {
		t.Errorf("the owner's record has %d versions, want %d", got.Versions, owner.Versions+1)
	}
}
