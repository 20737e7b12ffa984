package database_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// minPoll is the in-process controllers' floor for a poll-interval
// annotation (--min-poll-interval).
const minPoll = 2 * time.Second

// pollIntervals records the poll interval crossplane-runtime hands the
// Database controller's poll hook, per Database.
type pollIntervals struct {
	mu    sync.Mutex
	last  map[string]time.Duration
	count map[string]int // reconciles that ended with a poll interval
}

var polls = &pollIntervals{last: map[string]time.Duration{}, count: map[string]int{}}

func (p *pollIntervals) observe(name string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[name] = d
	p.count[name]++
}

// polled is how many reconciles of the Database name ended waiting for
// its next poll.
func (p *pollIntervals) polled(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count[name]
}

func (p *pollIntervals) of(name string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[name]
}

// TestPollIntervalAnnotationHasAFloor: a Database's
// crossplane.io/poll-interval annotation sets its own poll interval, but one
// shorter than --min-poll-interval is raised to it, so one resource cannot
// make the provider poll the shared server at will.
func TestPollIntervalAnnotationHasAFloor(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("pollfloor")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	for _, tc := range []struct{ annotation, want time.Duration }{
		{annotation: 3 * time.Minute, want: 3 * time.Minute},
		{annotation: time.Millisecond, want: minPoll},
	} {
		// The controller may write the Database meanwhile: annotate the
		// latest one.
		testenv.Edit(t, env.Kube.Client, d, func(d *v1alpha1.Database) {
			meta.AddAnnotations(d, map[string]string{meta.AnnotationKeyPollInterval: tc.annotation.String()})
		})
		if err := testenv.WaitFor(ctx, 60*time.Second, func(context.Context) error {
			if got := polls.of(d.Name); got != tc.want {
				return fmt.Errorf("%w: poll interval %s", testenv.ErrNotYet, got)
			}
			return nil
		}); err != nil {
			t.Errorf("annotation %s: want a poll interval of %s: %v", tc.annotation, tc.want, err)
		}
	}
}
