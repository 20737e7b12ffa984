package database_test

import (
	"context"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// requestRotation sets spec.credentialRotation.
func requestRotation(t *testing.T, d *v1alpha1.Database, id string, terminate bool) {
	t.Helper()
	testenv.Edit(t, env.Kube.Client, d, func(d *v1alpha1.Database) {
		d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: id, TerminateSessions: terminate}
	})
}

func rotated(id string) func(*v1alpha1.Database) bool {
	return func(d *v1alpha1.Database) bool {
		r := d.Status.AtProvider.CredentialRotation
		return ready(d) && r != nil && r.ID == id && r.CompletedAt != nil
	}
}

// alive reports whether a session still answers.
func alive(c *pgx.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Exec(ctx, "SELECT 1")
	return err == nil
}

// checkRotated asserts the end state of one completed rotation from old:
// exactly one more version, only the password changed, the old password
// refused and the new one logging in.
func checkRotated(t *testing.T, name string, old kvState, id string) string {
	t.Helper()
	k := readKV(t, dbPath(name))
	if k.Versions != old.Versions+1 {
		t.Errorf("%d KV versions after the rotation, want exactly one more than %d", k.Versions, old.Versions)
	}
	if len(k.Data) != 7 {
		t.Errorf("the rotated record has %d keys, want 7", len(k.Data))
	}
	for key, v := range old.Data {
		if key != "password" && k.Data[key] != v {
			t.Errorf("the rotation changed %s", key)
		}
	}
	pw, _ := k.Data["password"].(string)
	if pw == "" || pw == old.Data["password"] {
		t.Fatal("the record's password did not change")
	}
	if k.Owner["rotation-completed-id"] != id {
		t.Errorf("rotation-completed-id = %v, want %s", k.Owner["rotation-completed-id"], id)
	}
	if c, err := appLogin(t, name, old.Data["password"].(string), name); err == nil {
		_ = c.Close(context.Background())
		t.Error("the old password still logs in")
	}
	c, err := appLogin(t, name, pw, name)
	if err != nil {
		t.Fatalf("the new password does not log in: %v", err)
	}
	_ = c.Close(context.Background())
	return pw
}

func TestRotationEndsOldSessionsWhenAsked(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		terminate bool
	}{{"rotkill", true}, {"rotkeep", false}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDB(tc.name)
			apply(t, d)
			waitDB(t, d, "Ready", ready)
			old := readKV(t, dbPath(tc.name))
			verifier := readPG(t, tc.name, tc.name).Verifier
			app, err := appLogin(t, tc.name, old.Data["password"].(string), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close(ctx) //nolint:errcheck // may be ended by the server

			requestRotation(t, d, "r1", tc.terminate)
			waitDB(t, d, "rotated", rotated("r1"))
			checkRotated(t, tc.name, old, "r1")
			if v := readPG(t, tc.name, tc.name).Verifier; v == verifier {
				t.Error("the role's verifier did not change")
			}
			if got := alive(app); got == tc.terminate {
				t.Errorf("terminateSessions %v: the session of the old password is alive: %v", tc.terminate, got)
			}
		})
	}
}

func TestRotationInterruptedAfterTheKVWriteFinishesWithTheNewPassword(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	for i, step := range []string{database.StepRotateRole, database.StepRotateSessions, database.StepRotateRecord} {
		t.Run(step, func(t *testing.T) {
			name := []string{"rotfault0", "rotfault1", "rotfault2"}[i]
			d := newDB(name)
			apply(t, d)
			waitDB(t, d, "Ready", ready)
			old := readKV(t, dbPath(name))
			inject(step, 1)
			requestRotation(t, d, "r1", true)
			waitDB(t, d, "rotated", rotated("r1"))
			fmu.Lock()
			left := faults[step]
			fmu.Unlock()
			if left != 0 {
				t.Fatalf("the fault before %s was never hit", step)
			}
			pw := checkRotated(t, name, old, "r1")

			// Status lost: rebuilt from the record, and nothing rotates
			// again.
			// The controller may write the status at the same time:
			// wipe the latest one.
			testenv.EditStatus(t, env.Kube.Client, d, func(d *v1alpha1.Database) { d.Status = v1alpha1.DatabaseStatus{} })
			waitDB(t, d, "status rebuilt", rotated("r1"))
			awaitPolls(t, []*v1alpha1.Database{d}, 3)
			if k := readKV(t, dbPath(name)); k.Versions != old.Versions+1 || k.Data["password"] != pw {
				t.Errorf("after the status was wiped: %d versions, password changed %v", k.Versions, k.Data["password"] != pw)
			}
		})
	}
}

func TestRotationRequestedAgainAndAtCreation(t *testing.T) {
	testenv.Need(t)
	// A Database created with the field does not rotate.
	d := newDB("rotnew", func(d *v1alpha1.Database) {
		d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: "initial"}
	})
	apply(t, d)
	waitDB(t, d, "Ready with the initial rotation shown", rotated("initial"))
	k1 := readKV(t, dbPath("rotnew"))
	if k1.Versions != 1 {
		t.Fatalf("a Database created with spec.credentialRotation has %d versions, want 1", k1.Versions)
	}
	// A new ID rotates once; the same ID again does nothing more.
	requestRotation(t, d, "second", false)
	waitDB(t, d, "rotated", rotated("second"))
	checkRotated(t, "rotnew", k1, "second")
	awaitPolls(t, []*v1alpha1.Database{d}, 3)
	if k := readKV(t, dbPath("rotnew")); k.Versions != 2 {
		t.Errorf("%d versions after one rotation, want 2", k.Versions)
	}
}

func TestRotationWithoutUpdateIsReportedAndNothingWritten(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	d := newDB("rotro", func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionDelete}
	})
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	old := readKV(t, dbPath("rotro"))
	requestRotation(t, d, "r1", true)
	waitDB(t, d, "InvalidSpec naming Update", func(d *v1alpha1.Database) bool {
		c := d.GetCondition(xpv2.TypeReady)
		return string(c.Reason) == "InvalidSpec" && strings.Contains(c.Message, "add Update to spec.managementPolicies")
	})
	awaitPolls(t, []*v1alpha1.Database{d}, 3)
	if k := readKV(t, dbPath("rotro")); k.Versions != old.Versions || k.Data["password"] != old.Data["password"] {
		t.Errorf("without Update: %d versions (want %d), password changed %v", k.Versions, old.Versions, k.Data["password"] != old.Data["password"])
	}
	c, err := appLogin(t, "rotro", old.Data["password"].(string), "rotro")
	if err != nil {
		t.Fatalf("the password stopped working: %v", err)
	}
	_ = c.Close(context.Background())
}
