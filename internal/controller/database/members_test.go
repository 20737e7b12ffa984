package database_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// credentialOf is the login and password a data role's record holds now.
func credentialOf(t *testing.T, path string) (string, string) {
	t.Helper()
	k := readKV(t, path)
	u, _ := k.Data["username"].(string)
	p, _ := k.Data["password"].(string)
	return u, p
}

// dataApp is an app that logs in with the credential it was last given,
// as often as it can, and counts the logins refused.
type dataApp struct {
	mu             sync.Mutex
	user, password string
	tries, refused atomic.Int64
	stop           chan struct{}
	done           sync.WaitGroup
}

func startDataApp(t *testing.T, user, password, database string) *dataApp {
	a := &dataApp{user: user, password: password, stop: make(chan struct{})}
	a.done.Add(1)
	go func() {
		defer a.done.Done()
		for {
			select {
			case <-a.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			a.mu.Lock()
			u, p := a.user, a.password
			a.mu.Unlock()
			a.tries.Add(1)
			c, err := appLogin(t, u, p, database)
			if err != nil {
				if a.refused.Add(1) <= 3 {
					t.Logf("the app's login as %q was refused: %v", u, err)
				}
				continue
			}
			_ = c.Close(context.Background())
		}
	}()
	t.Cleanup(a.halt)
	return a
}

// take gives the app a new credential, as a mounted Secret's refresh does.
func (a *dataApp) take(user, password string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.user, a.password = user, password
}

func (a *dataApp) halt() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	a.done.Wait()
}

// TestRotationHandsOverWithoutAFailedLogin: a data role's logins take
// turns. An app logging in every 100 ms keeps the credential it has for a
// while after each rotation (a mounted Secret refreshes late): none of its
// logins is refused, because the previous login keeps its password for the
// grace period; once the grace is over the previous password logs in no
// more. The role that holds the privileges never logs in, and a removed
// data role leaves none of its roles behind.
func TestRotationHandsOverWithoutAFailedLogin(t *testing.T) {
	testenv.Need(t)
	// The statements of the handover are proven on every major by the
	// postgres client's tests and by every data role this package makes.
	testenv.MajorIndependent(t)
	const grace = 12 * time.Second
	d := newDB("hand", func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}
		d.Spec.ForProvider.CredentialPolicy = &v1alpha1.CredentialPolicy{GracePeriod: &metav1.Duration{Duration: grace}}
	})
	apply(t, d)
	publicCreate(t, d, "hand")
	waitDB(t, d, "Ready with its data role", dataRolesReady)
	path := dbPath("hand") + "/roles/app"
	user, pw := credentialOf(t, path)
	if user != "hand_app_1" || d.Status.AtProvider.DataRoles[0].LoginRole != "hand_app_1" {
		t.Fatalf("a new data role logs in as %q (status %q), want its member hand_app_1", user, d.Status.AtProvider.DataRoles[0].LoginRole)
	}
	if g := readPG(t, "hand", "hand_app"); !g.RoleExists || g.Login || g.Verifier != "" {
		t.Errorf("the data role's own role: exists %v, LOGIN %v, has a password %v; want NOLOGIN without one", g.RoleExists, g.Login, g.Verifier != "")
	}
	app := startDataApp(t, user, pw, "hand")
	for i := 1; i <= 3; i++ {
		id := []string{"", "r1", "r2", "r3"}[i]
		edit(t, d, func(d *v1alpha1.Database) {
			d.Spec.ForProvider.DataRoles[0].CredentialRotation = &v1alpha1.CredentialRotation{ID: id}
		})
		waitDB(t, d, "rotation "+id+" completed", roleRotated(id, ""))
		newUser, newPW := credentialOf(t, path)
		if newUser == user || newPW == pw {
			t.Fatalf("rotation %s: the record names %q (was %q), password changed %v", id, newUser, user, newPW != pw)
		}
		if s := d.Status.AtProvider.DataRoles[0]; s.PreviousLogin != user || s.PreviousLoginEndsAt == nil || s.LoginRole != newUser {
			t.Errorf("rotation %s: status shows login %q, previous %q until %v; want %q then %q", id, s.LoginRole, s.PreviousLogin, s.PreviousLoginEndsAt, newUser, user)
		}
		// The app's Secret refreshes late: half the grace after the
		// rotation completed, as the server counts it (at once when this
		// test saw the completion later than that).
		if ends := d.Status.AtProvider.DataRoles[0].PreviousLoginEndsAt; ends != nil {
			if wait := time.Until(ends.Add(-grace / 2)); wait > 0 {
				time.Sleep(wait)
			}
		}
		app.take(newUser, newPW)
		waitDB(t, d, "the previous login's grace over", func(d *v1alpha1.Database) bool {
			return dataRolesReady(d) && d.Status.AtProvider.DataRoles[0].PreviousLogin == ""
		})
		if c, err := appLogin(t, user, pw, "hand"); err == nil {
			_ = c.Close(context.Background())
			t.Errorf("rotation %s: the previous login %q still logs in after its grace", id, user)
		}
		user, pw = newUser, newPW
	}
	app.halt()
	if app.refused.Load() != 0 || app.tries.Load() < 20 {
		t.Errorf("the app's logins through three rotations: %d refused of %d; want none refused", app.refused.Load(), app.tries.Load())
	}

	// Removed: its role and both members go.
	edit(t, d, func(d *v1alpha1.Database) { d.Spec.ForProvider.DataRoles = nil })
	waitDB(t, d, "the data role removed", func(d *v1alpha1.Database) bool {
		return ready(d) && len(d.Status.AtProvider.DataRoles) == 0 && !readKV(t, path).Exists
	})
	for _, r := range []string{"hand_app", "hand_app_1", "hand_app_2"} {
		if readPG(t, "hand", r).RoleExists {
			t.Errorf("the role %q outlived its data role", r)
		}
	}
}

// TestCredentialAgeRotates: with a maxAge, a data role's password is
// rotated when it is that old (here seconds), with no request, and status
// shows when it was set and when it rotates next. A rotation by age keeps
// the grace and the sessions, even though the spec still carries an
// earlier request that ended sessions (as a rebind leaves it).
func TestCredentialAgeRotates(t *testing.T) {
	testenv.Need(t)
	// When a rotation is due is told from the record and the policy; the
	// statements it sends are the handover's, proven on every major.
	testenv.MajorIndependent(t)
	ctx := context.Background()
	d := newDB("aged", func(d *v1alpha1.Database) {
		d.Spec.ForProvider.DataRoles = []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}
		d.Spec.ForProvider.CredentialPolicy = &v1alpha1.CredentialPolicy{
			MaxAge: &metav1.Duration{Duration: 8 * time.Second}, GracePeriod: &metav1.Duration{Duration: 20 * time.Second}}
		d.Spec.CredentialRotation = &v1alpha1.CredentialRotation{ID: "rebound", TerminateSessions: true}
	})
	apply(t, d)
	publicCreate(t, d, "aged")
	waitDB(t, d, "Ready with its data role", dataRolesReady)
	s := d.Status.AtProvider.DataRoles[0]
	if s.PasswordSetAt == nil || s.NextRotationAt == nil || !s.NextRotationAt.After(s.PasswordSetAt.Time) ||
		s.NextRotationAt.Sub(s.PasswordSetAt.Time) > 8*time.Second {
		t.Fatalf("status shows the password set at %v, next rotation %v; want one within 8 s of it", s.PasswordSetAt, s.NextRotationAt)
	}
	path := dbPath("aged") + "/roles/app"
	user, pw := credentialOf(t, path)
	session, err := appLogin(t, user, pw, "aged")
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx) //nolint:errcheck // test connection
	first := s.PasswordSetAt.Time
	waitDB(t, d, "rotated by age", func(d *v1alpha1.Database) bool {
		s := d.Status.AtProvider.DataRoles
		return dataRolesReady(d) && s[0].PasswordSetAt != nil && s[0].PasswordSetAt.After(first)
	})
	newUser, newPW := credentialOf(t, path)
	if newUser == user || newPW == pw {
		t.Errorf("a rotation by age left the record naming %q (was %q), password changed %v", newUser, user, newPW != pw)
	}
	for _, cred := range [][2]string{{newUser, newPW}, {user, pw}} {
		c, err := appLogin(t, cred[0], cred[1], "aged")
		if err != nil {
			t.Fatalf("after a rotation by age, %q does not log in (the new login, then the previous one in its grace): %v", cred[0], err)
		}
		_ = c.Close(ctx)
	}
	if _, err := session.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("a rotation by age ended the previous login's session: %v", err)
	}
}
