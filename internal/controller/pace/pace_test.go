package pace

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
)

func TestNeeded(t *testing.T) {
	cases := map[string]struct {
		load    Load
		poll    time.Duration
		minimum int
		want    int
	}{
		"few resources: the flag":                         {load: Load{Resources: 200}, poll: time.Minute, minimum: 10, want: 10},
		"400 per minute needs 10 with headroom: the flag": {load: Load{Resources: 400}, poll: time.Minute, minimum: 10, want: 10},
		"1000 per minute: 25":                             {load: Load{Resources: 1000}, poll: time.Minute, minimum: 10, want: 25},
		"10000 per minute: 250":                           {load: Load{Resources: 10000}, poll: time.Minute, minimum: 10, want: 250},
		"a shorter poll needs more":                       {load: Load{Resources: 10000}, poll: 30 * time.Second, minimum: 10, want: 500},
		"a higher flag wins":                              {load: Load{Resources: 1000}, poll: time.Minute, minimum: 50, want: 50},
		"nothing counted: the flag":                       {load: Load{}, poll: time.Minute, minimum: 10, want: 10},
		"a wave of 400 arriving: one a second each, on top of the polls": {
			load: Load{Resources: 1400, Arriving: 400}, poll: time.Minute, minimum: 10, want: 35 + 400,
		},
		"one arriving among few: still at least the flag": {load: Load{Resources: 3, Arriving: 1}, poll: time.Minute, minimum: 10, want: 10},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Needed(tc.load, tc.poll, tc.minimum)); diff != "" {
				t.Errorf("Needed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArriving(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		age   time.Duration
		ready bool
		want  bool
	}{
		"new and not Ready: arriving":                        {age: 3 * time.Second, want: true},
		"new and Ready: done":                                {age: 3 * time.Second, ready: true},
		"not Ready after the window (failing): not arriving": {age: ArrivalWindow + time.Second},
		"old and not Ready (an outage): not arriving":        {age: 24 * time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Arriving(now.Add(-tc.age), tc.ready, now); got != tc.want {
				t.Errorf("Arriving: %t, want %t", got, tc.want)
			}
		})
	}
}

// The Scaler raises both limits as soon as a wave arrives (woken, without
// waiting for its recount interval), and lowers them again once the wave is
// Ready, while resources are arriving recounting every Busy.
func TestScalerFollowsAWave(t *testing.T) {
	var load atomic.Pointer[Load]
	load.Store(&Load{Resources: 100})
	wake := make(chan struct{}, 1)
	global, rest := rate.NewLimiter(10, 100), NewRESTLimiter(10)
	s := &Scaler{
		Limiter: global, REST: rest.L, Min: 10, Poll: time.Minute,
		Every: time.Hour, Busy: 10 * time.Millisecond, Wake: wake,
		Count: func(context.Context) (Load, error) { return *load.Load(), nil },
		Log:   logging.NewNopLogger(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()

	waitFor := func(what string, wantRate int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if global.Limit() == rate.Limit(wantRate) && rest.QPS() == float32(wantRate*RESTPerReconcile) &&
				global.Burst() == wantRate*10 && rest.L.Burst() == wantRate*RESTBurst {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("%s: rate %v (burst %d), apiserver client %v (burst %d); want %d", what, global.Limit(), global.Burst(), rest.QPS(), rest.L.Burst(), wantRate)
	}

	load.Store(&Load{Resources: 500, Arriving: 400})
	wake <- struct{}{}
	waitFor("a wave of 400 arrives", Needed(Load{Resources: 500, Arriving: 400}, time.Minute, 10))
	load.Store(&Load{Resources: 500})
	waitFor("the wave is Ready", 13)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}
