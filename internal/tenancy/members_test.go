package tenancy

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestCredentialPolicyOf(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	cases := map[string]struct {
		cfg, db    *v1alpha1.CredentialPolicy
		maxAge, gr time.Duration
	}{
		"None: rotated on request only, the default grace": {gr: DefaultGracePeriod},
		"Config":       {cfg: &v1alpha1.CredentialPolicy{MaxAge: d(90 * 24 * time.Hour)}, maxAge: 90 * 24 * time.Hour, gr: DefaultGracePeriod},
		"FieldByField": {cfg: &v1alpha1.CredentialPolicy{MaxAge: d(time.Hour), GracePeriod: d(time.Minute)}, db: &v1alpha1.CredentialPolicy{GracePeriod: d(0)}, maxAge: time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := CredentialPolicyOf(tc.cfg, tc.db, "uid/app")
			if p.MaxAge != tc.maxAge || p.Grace != tc.gr {
				t.Errorf("got maxAge %v grace %v", p.MaxAge, p.Grace)
			}
			if p.Offset < 0 || (p.MaxAge > 0 && p.Offset >= p.MaxAge/10) || (p.MaxAge == 0 && p.Offset != 0) {
				t.Errorf("offset %v outside the last tenth of %v", p.Offset, p.MaxAge)
			}
		})
	}
}

// Roles made at once rotate apart: their offsets spread over the last
// tenth of maxAge, each fixed.
func TestRotationOffsetSpreads(t *testing.T) {
	maxAge := 90 * 24 * time.Hour
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		key := fmt.Sprintf("uid-%d/app", i)
		o := RotationOffset(maxAge, key)
		if o < 0 || o >= maxAge/10 {
			t.Fatalf("offset %v outside [0, %v)", o, maxAge/10)
		}
		if o != RotationOffset(maxAge, key) {
			t.Fatalf("the offset of %q changes", key)
		}
		seen[o.Truncate(time.Hour)] = true
	}
	// 1000 roles over 216 hours: most hours hold one.
	if len(seen) < 150 {
		t.Errorf("1000 roles fall in %d hours of 216", len(seen))
	}
}

func TestRotationTurnsBetweenMembers(t *testing.T) {
	for _, tc := range []struct {
		login      string
		target     int
		targetName string
	}{
		{"shop_app", 1, "shop_app_1"},
		{"shop_app_1", 2, "shop_app_2"},
		{"shop_app_2", 1, "shop_app_1"},
	} {
		o := dataRole()
		o.KV.Data["username"] = tc.login
		o.KV.Owner[MetaMemberOID(2)] = "5002"
		o.Members[1] = MemberState{Exists: true, OID: 5002, CanLogin: true, AttributesOK: true, Inherits: true, AdminMember: true}
		if tc.login == "shop_app" {
			o.R.CanLogin, o.R.AttributesOK = true, true
		}
		o.Rotation = DataRoleRotation{ID: "r1"}
		v := DecideDataRole(o, me)
		if v.Target != tc.target || v.From != tc.login || MemberName(o.Role, v.Target) != tc.targetName {
			t.Errorf("from %q: target %d (%s), from %q", tc.login, v.Target, MemberName(o.Role, v.Target), v.From)
		}
	}
}

func TestLoginsShownAndWake(t *testing.T) {
	o := dataRole()
	o.Policy.MaxAge = 2 * time.Hour
	until := now.Add(5 * time.Minute)
	maps.Copy(o.KV.Owner, PreviousLogin("shop_app_2", until))
	got := LoginsOf(o)
	want := DataRoleLogins{Login: "shop_app_1", Previous: "shop_app_2", PreviousUntil: until.Truncate(time.Second),
		PasswordSetAt: now.Add(-time.Hour), NextRotation: now.Add(time.Hour)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
	if w := DecideDataRole(o, me).WakeAt(); !w.Equal(until.Truncate(time.Second)) {
		t.Errorf("woken at %v, want the grace's end %v", w, until)
	}
	// After the grace: the next rotation.
	o.Now = until.Add(time.Second)
	maps.Copy(o.KV.Owner, PreviousLogin("", time.Time{}))
	if w := DecideDataRole(o, me).WakeAt(); !w.Equal(now.Add(time.Hour)) {
		t.Errorf("woken at %v, want the rotation at %v", w, now.Add(time.Hour))
	}
	if l := LoginsOf(o); l.Previous != "" || !l.PreviousUntil.IsZero() {
		t.Errorf("no grace on record, shown %q until %v", l.Previous, l.PreviousUntil)
	}
}

// A rotation keeps no grace only when the request that asked it (the one
// whose id is new) asks to end sessions: an earlier request still in the
// spec, or a rotation by age, keeps the grace.
func TestRotationTerminatesOnlyForTheNewRequest(t *testing.T) {
	for name, tc := range map[string]struct {
		spec      DataRoleRotation
		completed [2]string
		want      bool
	}{
		"TheRolesNewRequestEndsSessions": {spec: DataRoleRotation{ID: "r2", RoleTerminates: true}, completed: [2]string{"r1", ""}, want: true},
		"TheDatabasesNewRequestEndsSessions": {spec: DataRoleRotation{ID: "r1", DatabaseID: "rebind-2", DatabaseTerminates: true},
			completed: [2]string{"r1", "rebind-1"}, want: true},
		"AnEarlierRebindStillInTheSpec": {spec: DataRoleRotation{ID: "r2", DatabaseID: "rebind-1", DatabaseTerminates: true},
			completed: [2]string{"r1", "rebind-1"}},
		"NoneAsks": {spec: DataRoleRotation{ID: "r2"}, completed: [2]string{"r1", ""}},
	} {
		t.Run(name, func(t *testing.T) {
			o := dataRole()
			o.Rotation = tc.spec
			o.Rotation.TerminateSessions = tc.spec.RoleTerminates || tc.spec.DatabaseTerminates
			maps.Copy(o.KV.Owner, DataRoleRotationCompletion([3]string{tc.completed[0], tc.completed[1], ""}, now.Add(-time.Hour), "", time.Time{}))
			v := DecideDataRole(o, me)
			if len(v.Actions) != 1 || v.Actions[0] != DataRoleRotate || v.Terminate != tc.want {
				t.Errorf("actions %v, terminate %v; want a rotation, terminate %v", v.Actions, v.Terminate, tc.want)
			}
		})
	}
	o := dataRole()
	o.Rotation = DataRoleRotation{DatabaseID: "rebind-1", DatabaseTerminates: true, TerminateSessions: true}
	maps.Copy(o.KV.Owner, DataRoleRotationCompletion([3]string{"", "rebind-1", ""}, now.Add(-time.Hour), "", time.Time{}))
	o.Policy.MaxAge = 30 * time.Minute
	if v := DecideDataRole(o, me); len(v.Actions) != 1 || v.Actions[0] != DataRoleRotate || v.Terminate {
		t.Errorf("a rotation by age with a rebind's request in the spec: actions %v, terminate %v; want a rotation keeping the grace", v.Actions, v.Terminate)
	}
}
