package tenancy

import (
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
