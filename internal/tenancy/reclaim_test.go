package tenancy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestReclaimRecord(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	got := ReclaimRecord(v1alpha1.ReclaimDelete, "u-1", at)
	if want := "Delete; uid=u-1; deletionTimestamp=2025-01-02T02:04:05Z"; got != want {
		t.Errorf("ReclaimRecord() = %q, want %q", got, want)
	}
}

func TestReclaimAtDeletion(t *testing.T) {
	const uid = "u-1"
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(p v1alpha1.ReclaimPolicy) string { return ReclaimRecord(p, uid, at) }
	retain, del := v1alpha1.ReclaimRetain, v1alpha1.ReclaimDelete
	cases := map[string]struct {
		recorded  string
		hasRecord bool
		spec      v1alpha1.ReclaimPolicy
		noUID     bool
		noTime    bool
		want      ReclaimVerdict
	}{
		"FirstPassRetain":               {spec: retain, want: ReclaimVerdict{Policy: retain, Record: rec(retain)}},
		"FirstPassDelete":               {spec: del, want: ReclaimVerdict{Policy: del, Record: rec(del)}},
		"FirstPassUnset":                {want: ReclaimVerdict{Policy: retain, Record: rec(retain)}},
		"FirstPassNonsenseSpecIsRetain": {spec: "delete", want: ReclaimVerdict{Policy: retain, Record: rec(retain)}},

		// Recorded for this deletion: later spec edits change nothing.
		"RecordedRetainSpecNowDelete": {recorded: rec(retain), hasRecord: true, spec: del, want: ReclaimVerdict{Policy: retain}},
		"RecordedDeleteSpecNowRetain": {recorded: rec(del), hasRecord: true, spec: retain, want: ReclaimVerdict{Policy: del}},

		// Not recorded for this deletion: ignored, the spec decides and is recorded.
		"PresetBareDeleteOnRetain": {recorded: "Delete", hasRecord: true, spec: retain,
			want: ReclaimVerdict{Policy: retain, Record: rec(retain), Ignored: true}},
		"PresetBareRetainOnDelete": {recorded: "Retain", hasRecord: true, spec: del,
			want: ReclaimVerdict{Policy: del, Record: rec(del), Ignored: true}},
		"RestoredFromAnotherUID": {recorded: ReclaimRecord(del, "u-old", at), hasRecord: true, spec: retain,
			want: ReclaimVerdict{Policy: retain, Record: rec(retain), Ignored: true}},
		"RestoredFromAnotherDeletion": {recorded: ReclaimRecord(del, uid, at.Add(-time.Hour)), hasRecord: true, spec: retain,
			want: ReclaimVerdict{Policy: retain, Record: rec(retain), Ignored: true}},
		"RecordOffByOneSecond": {recorded: ReclaimRecord(del, uid, at.Add(time.Second)), hasRecord: true, spec: retain,
			want: ReclaimVerdict{Policy: retain, Record: rec(retain), Ignored: true}},
		"RecordWithTrailingSpace": {recorded: rec(del) + " ", hasRecord: true, spec: retain,
			want: ReclaimVerdict{Policy: retain, Record: rec(retain), Ignored: true}},
		"RecordLowerCasePolicy": {recorded: "delete; uid=u-1; deletionTimestamp=2025-01-02T03:04:05Z", hasRecord: true, spec: retain,
			want: ReclaimVerdict{Policy: retain, Record: rec(retain), Ignored: true}},
		"EmptyValue": {recorded: "", hasRecord: true, spec: retain,
			want: ReclaimVerdict{Policy: retain, Record: rec(retain), Ignored: true}},

		// Nothing to tie a record to: nothing recorded, nothing dropped.
		"NoUID":               {spec: del, noUID: true, want: ReclaimVerdict{Policy: retain}},
		"NoDeletionTimestamp": {spec: del, recorded: rec(del), hasRecord: true, noTime: true, want: ReclaimVerdict{Policy: retain}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u, a := uid, at
			if tc.noUID {
				u = ""
			}
			if tc.noTime {
				a = time.Time{}
			}
			got := ReclaimAtDeletion(tc.recorded, tc.hasRecord, tc.spec, u, a)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReclaimAtDeletion(): -want +got:\n%s", diff)
			}
		})
	}
}
