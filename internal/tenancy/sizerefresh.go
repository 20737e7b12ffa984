package tenancy

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// A size refresh measures a config's databases in batches, each statement
// bounded by its own timeout. A batch that fails does not cost the others
// their results: every database keeps its last known size until it is
// measured again (shown as stale), the databases of a failed batch are
// measured one statement each at the next refresh, so that one slow or
// failing database spoils no batch, and a database that fails alone waits
// an exponential backoff, capped, before it is tried again. A refresh that
// cannot reach the server at all (no batch was the cause) stops, keeps
// everything as it was and is retried after a backoff of its own.

// SizeRetryBase and SizeRetryCap bound the backoffs of size measurements:
// after n consecutive failures the next attempt waits base·2^(n-1), at most
// SizeRetryCap, where base is SizeRetryBase unless a test sets a shorter
// one.
const (
	SizeRetryBase = 30 * time.Second
	SizeRetryCap  = time.Hour
)

// SizeBackoff is the wait after the n-th consecutive failure (n ≥ 1), from
// base (SizeRetryBase when 0).
func SizeBackoff(base time.Duration, n int) time.Duration {
	d := base
	if d <= 0 {
		d = SizeRetryBase
	}
	for i := 1; i < n && d < SizeRetryCap; i++ {
		d *= 2
	}
	return min(d, SizeRetryCap)
}

// MeasuredSize is the last known size of a database.
type MeasuredSize struct {
	Bytes int64
	At    time.Time
}

// SizeFailure is why a database's size could not be measured. Failures 0
// marks a database whose batch failed: it is measured alone at the next
// refresh, before anything is blamed on it.
type SizeFailure struct {
	Failures int
	Since    time.Time
	Next     time.Time
	Reason   string
}

// SizeState is what a config's size refreshes know, by PostgreSQL database.
type SizeState struct {
	// At is when the last refresh ended; zero: never.
	At time.Time
	// Failures counts refreshes in a row that could not reach the server;
	// Next is when the next may start, Problem why the last stopped.
	Failures int
	Next     time.Time
	Problem  string

	Sizes  map[string]MeasuredSize
	Failed map[string]SizeFailure
}

// SizeRefreshDue says whether a config's refresh is due at now: never
// refreshed, the interval passed since the last, or, after a refresh that
// could not reach the server, its backoff passed.
func SizeRefreshDue(s SizeState, now time.Time, every time.Duration) bool {
	if s.Failures > 0 {
		return !now.Before(s.Next)
	}
	return s.At.IsZero() || now.Sub(s.At) >= every
}

// PlanSizes splits the databases of a refresh into statements: a database
// whose backoff has not passed is deferred (it keeps its last size); one
// whose batch or own statement failed before is measured alone; the rest
// in batches of at most batch, in name order.
func PlanSizes(databases []string, failed map[string]SizeFailure, now time.Time, batch int) (batches [][]string, deferred []string) {
	names := append([]string(nil), databases...)
	sort.Strings(names)
	var rest []string
	for i, d := range names {
		if i > 0 && d == names[i-1] {
			continue
		}
		f, ok := failed[d]
		switch {
		case !ok:
			rest = append(rest, d)
		case now.Before(f.Next):
			deferred = append(deferred, d)
		default:
			batches = append(batches, []string{d})
		}
	}
	for start := 0; start < len(rest); start += batch {
		batches = append(batches, rest[start:min(start+batch, len(rest))])
	}
	return batches, deferred
}

// SizeOutcome is what one statement of a refresh gave.
type SizeOutcome struct {
	Databases []string
	// Sizes of the databases that exist and that the admin may measure
	// (when measured).
	Sizes map[string]int64
	// Err is why the statement failed ("" when it succeeded).
	Err string
	// NotAttempted: the refresh stopped before this statement.
	NotAttempted bool
}

// MergeSizes is the state after a refresh at now over databases (every
// database of the config's Databases) with these outcomes. problem, when
// set, is why the refresh stopped (it could not reach the server): the
// statements it did not run change nothing.
// retryBase is the backoff base of failed measurements (SizeBackoff).
func MergeSizes(prev SizeState, databases []string, outcomes []SizeOutcome, problem string, now time.Time, retryBase time.Duration) SizeState {
	next := SizeState{At: prev.At, Sizes: map[string]MeasuredSize{}, Failed: map[string]SizeFailure{}}
	listed := map[string]bool{}
	for _, d := range databases {
		listed[d] = true
		if m, ok := prev.Sizes[d]; ok {
			next.Sizes[d] = m
		}
		if f, ok := prev.Failed[d]; ok {
			next.Failed[d] = f
		}
	}
	for _, o := range outcomes {
		switch {
		case o.NotAttempted:
		case o.Err == "":
			for _, d := range o.Databases {
				delete(next.Failed, d)
				if b, ok := o.Sizes[d]; ok {
					next.Sizes[d] = MeasuredSize{Bytes: b, At: now}
				} else {
					// Gone, or not the admin's to measure.
					delete(next.Sizes, d)
				}
			}
		case len(o.Databases) == 1:
			d := o.Databases[0]
			f := prev.Failed[d]
			if f.Since.IsZero() {
				f.Since = now
			}
			f.Failures++
			f.Next = now.Add(SizeBackoff(retryBase, f.Failures))
			f.Reason = o.Err
			next.Failed[d] = f
		default:
			for _, d := range o.Databases {
				next.Failed[d] = SizeFailure{Since: now, Next: now, Reason: fmt.Sprintf("its batch of %d databases failed (%s); it is measured alone at the next refresh", len(o.Databases), o.Err)}
			}
		}
	}
	for d := range next.Sizes {
		if !listed[d] {
			delete(next.Sizes, d)
		}
	}
	if problem != "" {
		next.Failures = prev.Failures + 1
		next.Next = now.Add(SizeBackoff(retryBase, next.Failures))
		next.Problem = problem
		return next
	}
	next.At = now
	return next
}

// SizeFailuresShown is how many databases whose size could not be measured
// a config's status names.
const SizeFailuresShown = 5

// SummarizeSizeState is a config's sizes status from its size state:
// SummarizeSizes over the last known sizes, the number of them that are
// stale (their database is failing or was not measured at the last
// refresh), and the databases that could not be measured, the longest
// failing first, at most SizeFailuresShown. databases maps each Database's
// name to its PostgreSQL database.
func SummarizeSizeState(databases map[string]string, s SizeState) v1alpha1.ConfigSizes {
	bytes := make(map[string]int64, len(s.Sizes))
	for d, m := range s.Sizes {
		bytes[d] = m.Bytes
	}
	sum := SummarizeSizes(databases, bytes)
	var failing []v1alpha1.SizeNotMeasured
	for name, d := range databases {
		if m, ok := s.Sizes[d]; ok && m.At.Before(s.At) {
			sum.Stale++
		}
		f, ok := s.Failed[d]
		if !ok {
			continue
		}
		failing = append(failing, v1alpha1.SizeNotMeasured{Name: name, Database: d, Reason: f.Reason,
			Since: &metav1.Time{Time: f.Since}, NextAttempt: &metav1.Time{Time: f.Next}})
	}
	sort.Slice(failing, func(i, j int) bool {
		if !failing[i].Since.Equal(failing[j].Since) {
			return failing[i].Since.Before(failing[j].Since)
		}
		return failing[i].Name < failing[j].Name
	})
	sum.NotMeasured = len(failing)
	if len(failing) > SizeFailuresShown {
		failing = failing[:SizeFailuresShown]
	}
	if len(failing) > 0 {
		sum.NotMeasuredDatabases = failing
	}
	sum.Problem = s.Problem
	return sum
}
