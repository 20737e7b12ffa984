// Package pace keeps the provider's global reconcile rate limit high enough
// for every resource to be observed once per poll interval.
//
// crossplane-runtime's global rate limiter admits --max-reconcile-rate
// reconciles a second, polls included: with the default of 10 and a poll
// interval of one minute, at most 600 resources can be observed each
// minute, and above that every resource is observed less often than the
// poll interval promises. The limiter exists to stop a storm (a creation
// wave, an error loop) from hammering the shared server, not to starve the
// steady state, so the Scaler raises its rate to what the number of
// resources needs, with headroom, and never below the flag.
package pace

import (
	"context"
	"math"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"golang.org/x/time/rate"

	"ddupan.top/provider-postgresql-tenant/internal/metrics"
)

// Headroom is the share of the rate left for everything but the polls:
// creations, repairs, watch events, retries.
const Headroom = 1.5

// Needed returns the reconcile rate (per second) that observes count
// resources once per poll interval with Headroom, and at least min.
func Needed(count int, poll time.Duration, minimum int) int {
	if poll <= 0 || count <= 0 {
		return minimum
	}
	need := int(math.Ceil(Headroom * float64(count) / poll.Seconds()))
	return max(need, minimum)
}

// Scaler recounts the polled resources every Every and sets Limiter's rate
// (and its burst, ten times the rate as crossplane-runtime sizes it) to
// Needed.
type Scaler struct {
	Limiter *rate.Limiter
	// Min is --max-reconcile-rate.
	Min  int
	Poll time.Duration
	// Count returns how many resources are polled (from the cache).
	Count func(context.Context) (int, error)
	Every time.Duration
	Log   logging.Logger
}

// Start runs until ctx ends (a manager.Runnable).
func (s *Scaler) Start(ctx context.Context) error {
	metrics.ReconcileRate.Set(float64(s.Min))
	t := time.NewTicker(s.Every)
	defer t.Stop()
	current := s.Min
	for {
		if n, err := s.Count(ctx); err == nil {
			if want := Needed(n, s.Poll, s.Min); want != current {
				s.Limiter.SetLimit(rate.Limit(want))
				s.Limiter.SetBurst(want * 10)
				s.Log.Info("Global reconcile rate limit set for the number of resources", "resources", n, "perSecond", want, "poll", s.Poll.String(), "minimum", s.Min)
				current = want
				metrics.ReconcileRate.Set(float64(want))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is true: only the leader reconciles, so only it counts.
func (s *Scaler) NeedLeaderElection() bool { return true }
