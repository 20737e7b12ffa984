package tenancy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSizeBackoff(t *testing.T) {
	want := map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 7: 32 * time.Minute, 8: time.Hour, 9: time.Hour, 1000: time.Hour}
	for n, w := range want {
		if got := SizeBackoff(0, n); got != w {
			t.Errorf("SizeBackoff(%d) = %s, want %s", n, got, w)
		}
	}
}

func TestSizeRefreshDue(t *testing.T) {
	cases := map[string]struct {
		s    SizeState
		now  time.Time
		want bool
	}{
		"Never":                   {now: t0, want: true},
		"UnderTheInterval":        {s: SizeState{At: t0}, now: t0.Add(59 * time.Second)},
		"AtTheInterval":           {s: SizeState{At: t0}, now: t0.Add(time.Minute), want: true},
		"StoppedBackoffNotPassed": {s: SizeState{At: t0, Failures: 2, Next: t0.Add(5 * time.Minute)}, now: t0.Add(4 * time.Minute)},
		"StoppedBackoffPassed":    {s: SizeState{Failures: 1, Next: t0.Add(30 * time.Second)}, now: t0.Add(30 * time.Second), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SizeRefreshDue(tc.s, tc.now, time.Minute); got != tc.want {
				t.Errorf("SizeRefreshDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanSizes(t *testing.T) {
	cases := map[string]struct {
		dbs          []string
		failed       map[string]SizeFailure
		wantBatches  [][]string
		wantDeferred []string
	}{
		"NoneFailed": {dbs: []string{"e", "a", "d", "b", "c"}, wantBatches: [][]string{{"a", "b"}, {"c", "d"}, {"e"}}},
		"Duplicates": {dbs: []string{"a", "a", "b"}, wantBatches: [][]string{{"a", "b"}}},
		"SuspectsAlone": {dbs: []string{"a", "b", "c", "d"}, failed: map[string]SizeFailure{"b": {Next: t0}, "c": {Failures: 2, Next: t0.Add(-time.Second)}},
			wantBatches: [][]string{{"b"}, {"c"}, {"a", "d"}}},
		"BackoffDefers": {dbs: []string{"a", "b", "c"}, failed: map[string]SizeFailure{"b": {Failures: 3, Next: t0.Add(time.Second)}},
			wantBatches: [][]string{{"a", "c"}}, wantDeferred: []string{"b"}},
		"Nothing": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, d := PlanSizes(tc.dbs, tc.failed, t0, 2)
			if diff := cmp.Diff(tc.wantBatches, b, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("batches: -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDeferred, d, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("deferred: -want +got:\n%s", diff)
			}
		})
	}
}

func TestMergeSizes(t *testing.T) {
	before := t0.Add(-5 * time.Minute)
	prev := SizeState{At: before, Sizes: map[string]MeasuredSize{
		"a": {Bytes: 1, At: before}, "b": {Bytes: 2, At: before}, "c": {Bytes: 3, At: before}, "d": {Bytes: 4, At: before}, "gone": {Bytes: 9, At: before},
	}}
	const timeout = "measuring took longer than 10s"
	cases := map[string]struct {
		prev     SizeState
		dbs      []string
		outcomes []SizeOutcome
		problem  string
		want     SizeState
	}{
		"AllMeasured": {
			prev: prev, dbs: []string{"a", "b", "c", "d"},
			outcomes: []SizeOutcome{{Databases: []string{"a", "b"}, Sizes: map[string]int64{"a": 10, "b": 20}}, {Databases: []string{"c", "d"}, Sizes: map[string]int64{"c": 30}}},
			// d is gone or not measurable; "gone" is no Database's.
			want: SizeState{At: t0, Sizes: map[string]MeasuredSize{"a": {10, t0}, "b": {20, t0}, "c": {30, t0}}, Failed: map[string]SizeFailure{}},
		},
		"OneBatchFailsTheOthersKeepTheirResults": {
			prev: prev, dbs: []string{"a", "b", "c", "d"},
			outcomes: []SizeOutcome{{Databases: []string{"a", "b"}, Sizes: map[string]int64{"a": 10, "b": 20}}, {Databases: []string{"c", "d"}, Err: timeout}},
			want: SizeState{At: t0,
				Sizes: map[string]MeasuredSize{"a": {10, t0}, "b": {20, t0}, "c": {3, before}, "d": {4, before}},
				Failed: map[string]SizeFailure{
					"c": {Since: t0, Next: t0, Reason: "its batch of 2 databases failed (" + timeout + "); it is measured alone at the next refresh"},
					"d": {Since: t0, Next: t0, Reason: "its batch of 2 databases failed (" + timeout + "); it is measured alone at the next refresh"},
				}},
		},
		"AloneFailsAgainBacksOff": {
			prev: SizeState{At: before, Sizes: map[string]MeasuredSize{"c": {3, before}, "d": {4, before}},
				Failed: map[string]SizeFailure{"c": {Failures: 2, Since: before, Next: t0, Reason: "old"}, "d": {Since: before, Next: t0, Reason: "batch"}}},
			dbs:      []string{"c", "d"},
			outcomes: []SizeOutcome{{Databases: []string{"c"}, Err: timeout}, {Databases: []string{"d"}, Sizes: map[string]int64{"d": 40}}},
			want: SizeState{At: t0, Sizes: map[string]MeasuredSize{"c": {3, before}, "d": {40, t0}},
				Failed: map[string]SizeFailure{"c": {Failures: 3, Since: before, Next: t0.Add(2 * time.Minute), Reason: timeout}}},
		},
		"FirstFailureAlone": {
			prev: SizeState{At: before, Failed: map[string]SizeFailure{"c": {Since: before, Next: t0, Reason: "batch"}}},
			dbs:  []string{"c"}, outcomes: []SizeOutcome{{Databases: []string{"c"}, Err: "permission denied"}},
			want: SizeState{At: t0, Sizes: map[string]MeasuredSize{}, Failed: map[string]SizeFailure{"c": {Failures: 1, Since: before, Next: t0.Add(30 * time.Second), Reason: "permission denied"}}},
		},
		"DeferredAndRemovedDatabases": {
			prev: SizeState{At: before, Sizes: map[string]MeasuredSize{"a": {1, before}, "b": {2, before}, "x": {7, before}},
				Failed: map[string]SizeFailure{"b": {Failures: 4, Since: before, Next: t0.Add(time.Hour), Reason: "slow"}, "x": {Failures: 1, Reason: "slow"}}},
			dbs:      []string{"a", "b"},
			outcomes: []SizeOutcome{{Databases: []string{"a"}, Sizes: map[string]int64{"a": 11}}},
			want: SizeState{At: t0, Sizes: map[string]MeasuredSize{"a": {11, t0}, "b": {2, before}},
				Failed: map[string]SizeFailure{"b": {Failures: 4, Since: before, Next: t0.Add(time.Hour), Reason: "slow"}}},
		},
		"StoppedKeepsWhatItCouldNotMeasure": {
			prev:     SizeState{At: before, Failures: 1, Sizes: map[string]MeasuredSize{"a": {1, before}, "c": {3, before}}},
			dbs:      []string{"a", "c"},
			outcomes: []SizeOutcome{{Databases: []string{"a"}, Sizes: map[string]int64{"a": 10}}, {Databases: []string{"c"}, NotAttempted: true}},
			problem:  "the refresh stopped at statement 2 of 2: connection refused",
			want: SizeState{At: before, Failures: 2, Next: t0.Add(time.Minute), Problem: "the refresh stopped at statement 2 of 2: connection refused",
				Sizes: map[string]MeasuredSize{"a": {10, t0}, "c": {3, before}}, Failed: map[string]SizeFailure{}},
		},
		"RecoveredAfterStopping": {
			prev: SizeState{At: before, Failures: 3, Next: t0, Problem: "down", Sizes: map[string]MeasuredSize{"a": {1, before}}},
			dbs:  []string{"a"}, outcomes: []SizeOutcome{{Databases: []string{"a"}, Sizes: map[string]int64{"a": 2}}},
			want: SizeState{At: t0, Sizes: map[string]MeasuredSize{"a": {2, t0}}, Failed: map[string]SizeFailure{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := MergeSizes(tc.prev, tc.dbs, tc.outcomes, tc.problem, t0, 0)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MergeSizes: -want +got:\n%s", diff)
			}
		})
	}
}

func TestSummarizeSizeState(t *testing.T) {
	before := t0.Add(-5 * time.Minute)
	s := SizeState{At: t0, Problem: "",
		Sizes: map[string]MeasuredSize{"a": {10 << 20, t0}, "b": {20 << 20, before}, "c": {30 << 20, t0}},
		Failed: map[string]SizeFailure{
			"b": {Failures: 2, Since: before, Next: t0.Add(time.Minute), Reason: "slow"},
			"n": {Since: t0, Next: t0, Reason: "batch"},
		}}
	got := SummarizeSizeState(map[string]string{"A": "a", "B": "b", "C": "c", "N": "n"}, s)
	want := v1alpha1.ConfigSizes{Databases: 3, TotalBytes: 60 << 20, Total: "60 MB", Stale: 1, NotMeasured: 2,
		Largest: []v1alpha1.NamedDatabaseSize{{Name: "C", Database: "c", Bytes: 30 << 20, Human: "30 MB"}, {Name: "B", Database: "b", Bytes: 20 << 20, Human: "20 MB"}, {Name: "A", Database: "a", Bytes: 10 << 20, Human: "10 MB"}},
		NotMeasuredDatabases: []v1alpha1.SizeNotMeasured{
			{Name: "B", Database: "b", Reason: "slow", Since: &metav1.Time{Time: before}, NextAttempt: &metav1.Time{Time: t0.Add(time.Minute)}},
			{Name: "N", Database: "n", Reason: "batch", Since: &metav1.Time{Time: t0}, NextAttempt: &metav1.Time{Time: t0}},
		}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SummarizeSizeState: -want +got:\n%s", diff)
	}
	many := SizeState{At: t0, Failed: map[string]SizeFailure{}}
	dbs := map[string]string{}
	for _, n := range []string{"f1", "f2", "f3", "f4", "f5", "f6", "f7"} {
		many.Failed[n] = SizeFailure{Since: t0, Next: t0, Reason: "x"}
		dbs[n] = n
	}
	if got := SummarizeSizeState(dbs, many); got.NotMeasured != 7 || len(got.NotMeasuredDatabases) != SizeFailuresShown || got.NotMeasuredDatabases[0].Name != "f1" {
		t.Errorf("seven failing: %+v", got)
	}
}
