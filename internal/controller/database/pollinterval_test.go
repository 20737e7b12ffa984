package database_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// minPoll is the in-process controllers' floor for a poll-interval
// annotation (--min-poll-interval).
const minPoll = 2 * time.Second

// pollIntervals records the poll interval crossplane-runtime hands the
// Database controller's poll hook, per Database.
type pollIntervals struct {
	mu   sync.Mutex
	last map[string]time.Duration
}

var polls = &pollIntervals{last: map[string]time.Duration{}}

func (p *pollIntervals) observe(name string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[name] = d
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
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			meta.AddAnnotations(d, map[string]string{meta.AnnotationKeyPollInterval: tc.annotation.String()})
			return env.Kube.Client.Update(ctx, d)
		})
		if err != nil {
			t.Fatal(err)
		}
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
