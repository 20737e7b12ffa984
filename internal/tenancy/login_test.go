package tenancy

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoginDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	proven := func() *ProvenLogin {
		return &ProvenLogin{Fingerprint: "fp-1", Installed: []string{"pg_trgm"}, Due: now.Add(time.Minute)}
	}
	cases := map[string]struct {
		o     func(*Observation)
		c     func(*LoginCheck)
		skips bool
	}{
		"steady state, nothing changed, not due: no login": {skips: true},
		"no login proven yet (new Database, provider restarted)": {
			c: func(c *LoginCheck) { c.Last = nil },
		},
		"a changed fingerprint (dropped role, revoked CONNECT, new password verifier, new record version)": {
			c: func(c *LoginCheck) { c.Fingerprint = "fp-2" },
		},
		"the periodic check is due": {
			c: func(c *LoginCheck) { c.Now = c.Last.Due },
		},
		"an import is proven every time": {
			o: func(o *Observation) { o.Import = true },
		},
		"deleting": {
			o: func(o *Observation) { o.Deleting = true },
		},
		"a rotation is pending": {
			o: func(o *Observation) { o.Rotation = RotationRequest{ID: "2", StatusID: "1", MayUpdate: true} },
		},
		"the role's OID is not on record": {
			o: func(o *Observation) { delete(o.KV.Owner, MetaRoleOID) },
		},
		"the database's OID is not on record": {
			o: func(o *Observation) { delete(o.KV.Owner, MetaDatabaseOID) },
		},
		"the record is not ours": {
			o: func(o *Observation) { o.KV.Owner[MetaUID] = "someone-else" },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			c := LoginCheck{Last: proven(), Fingerprint: "fp-1", Now: now}
			if tc.o != nil {
				tc.o(&o)
			}
			if tc.c != nil {
				tc.c(&c)
			}
			why := LoginDue(o, c)
			if diff := cmp.Diff(tc.skips, why == ""); diff != "" {
				t.Errorf("LoginDue(...) = %q; skips the login (-want +got):\n%s", why, diff)
			}
		})
	}
}

func TestNextLoginDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		every  time.Duration
		spread float64
		want   time.Time
	}{
		"no spread: a full interval":         {every: time.Hour, spread: 0, want: now.Add(time.Hour)},
		"half the spread: an eighth earlier": {every: time.Hour, spread: 0.5, want: now.Add(time.Hour - 450*time.Second)},
		"0: every Observe logs in":           {every: 0, spread: 0.9, want: now},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NextLoginDue(now, tc.every, tc.spread)); diff != "" {
				t.Errorf("NextLoginDue(...) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithoutPassword(t *testing.T) {
	rec := ourKV(map[string]string{MetaRoleOID: "1"})
	rec.Data["password"] = "canary-password-3f9a"
	got := rec.WithoutPassword()
	switch got.Data["password"] {
	case "canary-password-3f9a":
		t.Error("the copy keeps the password, want the withheld marker")
	case "":
		t.Error("the copy has no password: decisions that need to know one is there would go wrong")
	}
	if rec.Data["password"] != "canary-password-3f9a" {
		t.Error("the original record was changed")
	}
	got.Owner[MetaRoleOID], got.Data["port"] = "2", "9"
	if rec.Owner[MetaRoleOID] != "1" || rec.Data["port"] == "9" {
		t.Error("the copy shares its maps with the original")
	}
	if diff := cmp.Diff(KVState{}, KVState{}.WithoutPassword()); diff != "" {
		t.Errorf("an absent record (-want +got):\n%s", diff)
	}
	empty := ourKV(nil)
	empty.Data["password"] = ""
	if got := empty.WithoutPassword(); got.Data["password"] != "" {
		t.Errorf("an empty password became %q: a missing password must stay missing", got.Data["password"])
	}
}

func TestRememberedRecord(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	stored := func() *KVState {
		k := base().KV
		k.Version = 3
		k = k.WithoutPassword()
		return &k
	}
	fingerprint := func(version int) string { return fmt.Sprintf("catalog-1 kv=%d", version) }
	cases := map[string]struct {
		o       func(*Observation)
		c       func(*LoginCheck)
		fp      func(int) string
		remains bool
	}{
		"the login stands: the record kept with it is used":  {remains: true},
		"no login proven (new Database, provider restarted)": {c: func(c *LoginCheck) { c.Last = nil }},
		"a login proven without a record":                    {c: func(c *LoginCheck) { c.Last.Record = nil }},
		"the catalog changed since the login":                {fp: func(v int) string { return fmt.Sprintf("catalog-2 kv=%d", v) }},
		"the periodic check is due: the record is read with the login": {
			c: func(c *LoginCheck) { c.Now = c.Last.Due },
		},
		"deleting":           {o: func(o *Observation) { o.Deleting = true }},
		"an import":          {o: func(o *Observation) { o.Import = true }},
		"a rotation pending": {o: func(o *Observation) { o.Rotation = RotationRequest{ID: "2", StatusID: "1", MayUpdate: true} }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			o.KV = KVState{} // what Observe knows before it has any record
			c := LoginCheck{Last: &ProvenLogin{Fingerprint: fingerprint(3), Due: now.Add(time.Minute), Record: stored()}, Now: now}
			if tc.o != nil {
				tc.o(&o)
			}
			if tc.c != nil {
				tc.c(&c)
			}
			fp := fingerprint
			if tc.fp != nil {
				fp = tc.fp
			}
			got := RememberedRecord(o, c, fp)
			if (got != nil) != tc.remains {
				t.Fatalf("RememberedRecord(...) = %v, want a remembered record: %v", got, tc.remains)
			}
			if got == nil {
				return
			}
			if diff := cmp.Diff(*stored(), *got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			got.Owner[MetaUID] = "changed"
			if c.Last.Record.Owner[MetaUID] == "changed" {
				t.Error("the remembered record is handed out by reference: an Observe could change what is kept")
			}
		})
	}
}

func TestSteady(t *testing.T) {
	o := base()
	if v := Decide(o); !Steady(v) {
		t.Fatalf("the base observation is not steady: %+v", v)
	}
	cases := map[string]func(*Observation){
		"a repair (CONNECT granted to PUBLIC)": func(o *Observation) { o.DB.PublicConnect = true },
		"the admin lost its membership":        func(o *Observation) { o.R.AdminMember = false },
		"a changed record field":               func(o *Observation) { o.WantData["port"] = "6543" },
		"a missing requested extension":        func(o *Observation) { o.Installed = []string{"plpgsql"} },
		"a rotation requested":                 func(o *Observation) { o.Rotation = RotationRequest{ID: "2", StatusID: "1", MayUpdate: true} },
		"a record that is not ours (conflict)": func(o *Observation) { o.KV.Owner[MetaUID] = "someone-else" },
		"the database is gone":                 func(o *Observation) { o.DB = DBState{} },
		"the login is refused":                 func(o *Observation) { o.Login = LoginRefused },
		"an import's first, read-only look":    func(o *Observation) { o.Import = true; o.DB.Owner = "someone" },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			mut(&o)
			if v := Decide(o); Steady(v) {
				t.Errorf("Steady(%+v) = true, want false", v)
			}
		})
	}
}

func TestLoginFailure(t *testing.T) {
	cases := map[string]struct {
		login Login
		want  string
	}{
		"NotTried":     {login: LoginNotTried, want: ""},
		"OK":           {login: LoginOK, want: ""},
		"AuthOK":       {login: LoginAuthOK, want: ""},
		"NotAccepting": {login: LoginNotAccepting, want: ""},
		"Refused":      {login: LoginRefused, want: "refused"},
		"Unavailable":  {login: LoginUnavailable, want: "unavailable"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LoginFailure(tc.login)); diff != "" {
				t.Errorf("LoginFailure(%d): -want +got:\n%s", tc.login, diff)
			}
		})
	}
}
