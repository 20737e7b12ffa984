package database

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestConfirmAfterRepair(t *testing.T) {
	const poll = time.Minute
	dbA := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{UID: types.UID("a")}}
	dbB := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{UID: types.UID("b")}}
	// Each step: advance the clock, maybe record a repair, then ask for the
	// interval.
	type step struct {
		after    time.Duration
		repaired *v1alpha1.Database
		created  *v1alpha1.Database
		ask      *v1alpha1.Database
		poll     time.Duration
	}
	cases := map[string]struct {
		steps []step
		want  []time.Duration
	}{
		"NoRepairIsThePoll": {
			steps: []step{{ask: dbA, poll: poll}},
			want:  []time.Duration{poll},
		},
		"RepairIsConfirmedSoonOnce": {
			steps: []step{{repaired: dbA, ask: dbA, poll: poll}, {after: 2 * time.Second, ask: dbA, poll: poll}},
			want:  []time.Duration{confirmAfterRepair, poll},
		},
		"OnlyTheRepairedDatabase": {
			steps: []step{{repaired: dbA, ask: dbB, poll: poll}, {ask: dbA, poll: poll}},
			want:  []time.Duration{poll, confirmAfterRepair},
		},
		"RepeatedRepairsWithinAPollAreNotALoop": {
			steps: []step{
				{repaired: dbA, ask: dbA, poll: poll},
				{after: 2 * time.Second, repaired: dbA, ask: dbA, poll: poll},
				{after: poll, repaired: dbA, ask: dbA, poll: poll},
			},
			want: []time.Duration{confirmAfterRepair, poll, confirmAfterRepair},
		},
		// The owner's repair right after its create used the early
		// confirmation; the data roles created next are confirmed at once
		// all the same (a new Tenant waits for them).
		"DataRolesCreatedAfterAnEarlyConfirmation": {
			steps: []step{
				{repaired: dbA, ask: dbA, poll: poll},
				{after: 2 * time.Second, repaired: dbA, created: dbA, ask: dbA, poll: poll},
				{after: 2 * time.Second, repaired: dbA, ask: dbA, poll: poll},
			},
			want: []time.Duration{confirmAfterRepair, confirmAfterCreate, poll},
		},
		// Data roles created with the owner's first write: no fixed wait
		// before the Observe that shows them Ready.
		"DataRolesCreatedAreConfirmedAtOnce": {
			steps: []step{{created: dbA, ask: dbA, poll: poll}, {after: time.Second, ask: dbA, poll: poll}},
			want:  []time.Duration{confirmAfterCreate, poll},
		},
		"PollShorterThanTheConfirmation": {
			steps: []step{{repaired: dbA, ask: dbA, poll: time.Second}},
			want:  []time.Duration{time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newConfirmer()
			now := time.Unix(0, 0)
			c.now = func() time.Time { return now }
			var got []time.Duration
			for _, s := range tc.steps {
				now = now.Add(s.after)
				if s.repaired != nil {
					c.Repaired(s.repaired.GetUID())
				}
				if s.created != nil {
					c.Created(s.created.GetUID())
				}
				got = append(got, c.PollInterval(s.ask, s.poll))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("intervals (-want +got):\n%s", diff)
			}
		})
	}
}

// Something due before the next poll (a grace ending, a rotation by age)
// brings the next observation forward to just after it, once; something
// due later, or already past, changes nothing or asks for a second.
func TestObservedAgainWhenDue(t *testing.T) {
	const poll = time.Minute
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{UID: types.UID("a")}}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	c := newConfirmer()
	c.now = func() time.Time { return now }
	for _, tc := range []struct {
		at   []time.Time
		want time.Duration
	}{
		{want: poll},
		{at: []time.Time{now.Add(20 * time.Second)}, want: 21 * time.Second},
		{want: poll},
		{at: []time.Time{now.Add(30 * time.Second), now.Add(10 * time.Second), {}}, want: 11 * time.Second},
		{at: []time.Time{now.Add(2 * poll)}, want: poll},
		{at: []time.Time{now.Add(-time.Hour)}, want: time.Second},
	} {
		for _, at := range tc.at {
			c.At(db.GetUID(), at)
		}
		if got := c.PollInterval(db, poll); got != tc.want {
			t.Errorf("due at %v: observed again after %v, want %v", tc.at, got, tc.want)
		}
	}
}
