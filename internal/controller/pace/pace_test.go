package pace

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNeeded(t *testing.T) {
	cases := map[string]struct {
		count   int
		poll    time.Duration
		minimum int
		want    int
	}{
		"few resources: the flag":                         {count: 200, poll: time.Minute, minimum: 10, want: 10},
		"400 per minute needs 10 with headroom: the flag": {count: 400, poll: time.Minute, minimum: 10, want: 10},
		"1000 per minute: 25":                             {count: 1000, poll: time.Minute, minimum: 10, want: 25},
		"10000 per minute: 250":                           {count: 10000, poll: time.Minute, minimum: 10, want: 250},
		"a shorter poll needs more":                       {count: 10000, poll: 30 * time.Second, minimum: 10, want: 500},
		"a higher flag wins":                              {count: 1000, poll: time.Minute, minimum: 50, want: 50},
		"nothing counted: the flag":                       {count: 0, poll: time.Minute, minimum: 10, want: 10},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Needed(tc.count, tc.poll, tc.minimum)); diff != "" {
				t.Errorf("Needed (-want +got):\n%s", diff)
			}
		})
	}
}
