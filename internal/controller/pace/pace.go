// Package pace keeps the provider's global reconcile rate limit high enough
// for every resource to be observed once per poll interval, and for new
// resources to get through their first reconciles without waiting behind
// each other.
//
// crossplane-runtime's global rate limiter admits --max-reconcile-rate
// reconciles a second, polls included: with the default of 10 and a poll
// interval of one minute, at most 600 resources can be observed each
// minute, and above that every resource is observed less often than the
// poll interval promises. A wave of new resources (a team onboarding two
// hundred Tenants at once) needs several reconciles each within seconds:
// at 10 a second those queue behind each other for minutes, and the first
// Tenant is ready only when nearly the whole wave is. The limiter exists to
// stop a storm (an error loop, a resync of everything) from hammering the
// shared server and the apiserver, not to starve the steady state or slow
// down creation, so the Scaler raises its rate to what the resources need,
// with headroom, and never below the flag. Failing resources are still
// held back by the per-resource exponential backoff, and resources that
// were Ready once do not count as arriving when they fail later, so an
// outage of the server does not raise the rate.
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

// PerArrival is the reconciles a second allowed for each arriving
// resource: one that is new (created within ArrivalWindow) and not Ready
// yet. A Database needs about three reconciles to become Ready and a
// DatabaseBinding about six, so at one a second each gets through in
// seconds.
const PerArrival = 1

// ArrivalWindow is how long after its creation a resource that is not
// Ready counts as arriving. A resource that does not become Ready by then
// is failing, and the per-resource backoff paces it.
const ArrivalWindow = 5 * time.Minute

// RESTPerReconcile is the apiserver requests a second the provider's client
// may send per reconcile a second of the limit, and RESTBurst its burst
// per reconcile: crossplane-runtime sizes the client the same way from the
// flag.
const (
	RESTPerReconcile = 5
	RESTBurst        = 10
)

// Load is what the Scaler counts in the cache.
type Load struct {
	// Resources is how many resources are polled.
	Resources int
	// Arriving is how many of them were created within ArrivalWindow and
	// are not Ready yet.
	Arriving int
}

// Needed returns the reconcile rate (per second) that observes every
// resource once per poll interval with Headroom, plus PerArrival for each
// arriving resource, and at least minimum.
func Needed(l Load, poll time.Duration, minimum int) int {
	need := 0
	if poll > 0 && l.Resources > 0 {
		need = int(math.Ceil(Headroom * float64(l.Resources) / poll.Seconds()))
	}
	need += PerArrival * max(l.Arriving, 0)
	return max(need, minimum)
}

// Arriving reports whether a resource created at created, Ready or not,
// counts as arriving at now.
func Arriving(created time.Time, ready bool, now time.Time) bool {
	return !ready && now.Sub(created) < ArrivalWindow
}

// Scaler recounts the resources and sets Limiter's rate (and its burst, ten
// times the rate as crossplane-runtime sizes it) to Needed, and REST's (the
// provider's apiserver client) to RESTPerReconcile times that. It recounts
// every Every, every Busy while resources are arriving, and soon after a
// Wake (a resource was created).
type Scaler struct {
	Limiter *rate.Limiter
	// REST limits the provider's apiserver client; nil leaves it alone.
	REST *rate.Limiter
	// Min is --max-reconcile-rate.
	Min  int
	Poll time.Duration
	// Count returns the load (from the cache).
	Count func(context.Context) (Load, error)
	Every time.Duration
	// Busy is the recount interval while resources are arriving.
	Busy time.Duration
	// Wake asks for a recount (nil: none).
	Wake <-chan struct{}
	Log  logging.Logger
}

// Start runs until ctx ends (a manager.Runnable).
func (s *Scaler) Start(ctx context.Context) error {
	metrics.ReconcileRate.Set(float64(s.Min))
	current := s.Min
	for {
		next := s.Every
		if l, err := s.Count(ctx); err == nil {
			if want := Needed(l, s.Poll, s.Min); want != current {
				s.set(want)
				s.Log.Info("Global reconcile rate limit set for the resources", "resources", l.Resources, "arriving", l.Arriving, "perSecond", want, "poll", s.Poll.String(), "minimum", s.Min)
				current = want
			}
			if l.Arriving > 0 && s.Busy > 0 {
				next = s.Busy
			}
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-s.Wake:
			t.Stop()
			// A wave of creations wakes many times: let it gather.
			if err := sleep(ctx, min(s.Busy, next)); err != nil {
				return nil //nolint:nilerr // the context ended: stop quietly
			}
		}
	}
}

func (s *Scaler) set(want int) {
	s.Limiter.SetLimit(rate.Limit(want))
	s.Limiter.SetBurst(want * 10)
	if s.REST != nil {
		s.REST.SetLimit(rate.Limit(want * RESTPerReconcile))
		s.REST.SetBurst(want * RESTBurst)
	}
	metrics.ReconcileRate.Set(float64(want))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// NeedLeaderElection is true: only the leader reconciles, so only it counts.
func (s *Scaler) NeedLeaderElection() bool { return true }

// RESTLimiter is client-go's flowcontrol.RateLimiter over a rate.Limiter
// whose rate the Scaler can change.
type RESTLimiter struct{ L *rate.Limiter }

// NewRESTLimiter limits the apiserver client as crossplane-runtime does for
// a reconcile rate of rps.
func NewRESTLimiter(rps int) RESTLimiter {
	return RESTLimiter{L: rate.NewLimiter(rate.Limit(rps*RESTPerReconcile), rps*RESTBurst)}
}

// TryAccept takes a token if one is available now.
func (r RESTLimiter) TryAccept() bool { return r.L.Allow() }

// Accept waits for a token.
func (r RESTLimiter) Accept() { _ = r.L.Wait(context.Background()) }

// Wait waits for a token until ctx ends.
func (r RESTLimiter) Wait(ctx context.Context) error { return r.L.Wait(ctx) }

// QPS is the current rate.
func (r RESTLimiter) QPS() float32 { return float32(r.L.Limit()) }

// Stop does nothing: there is nothing to release.
func (r RESTLimiter) Stop() {}
