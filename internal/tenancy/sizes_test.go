package tenancy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestHumanBytes(t *testing.T) {
	cases := map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1.0 kB", 7_800_000: "7.4 MB", 12 << 30: "12 GB", 1_300_000_000_000: "1.2 TB"}
	for in, want := range cases {
		if got := HumanBytes(in); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestSizeWorthWriting(t *testing.T) {
	cases := map[string]struct {
		shown    *v1alpha1.DatabaseSize
		measured int64
		want     bool
	}{
		"NoneShown":         {measured: 7 << 20, want: true},
		"Unchanged":         {shown: &v1alpha1.DatabaseSize{Bytes: 7 << 20}, measured: 7 << 20},
		"SmallDatabaseGrew": {shown: &v1alpha1.DatabaseSize{Bytes: 7 << 20}, measured: 7<<20 + 1<<20},
		"CrossedAMebibyte":  {shown: &v1alpha1.DatabaseSize{Bytes: 7 << 20}, measured: 7<<20 + 1<<20 + 1, want: true},
		"UnderATenth":       {shown: &v1alpha1.DatabaseSize{Bytes: 10 << 30}, measured: 10<<30 + 1<<30},
		"OverATenth":        {shown: &v1alpha1.DatabaseSize{Bytes: 10 << 30}, measured: 10<<30 + 1<<30 + 1, want: true},
		"Shrank":            {shown: &v1alpha1.DatabaseSize{Bytes: 10 << 30}, measured: 8 << 30, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SizeWorthWriting(tc.shown, tc.measured); got != tc.want {
				t.Errorf("SizeWorthWriting() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSummarizeSizes(t *testing.T) {
	dbs := map[string]string{"a": "a", "b": "b_db", "c": "c", "d": "d", "e": "e", "f": "f", "gone": "gone"}
	sizes := map[string]int64{"a": 10, "b_db": 60 << 20, "c": 30, "d": 30, "e": 1, "f": 2}
	got := SummarizeSizes(dbs, sizes)
	want := v1alpha1.ConfigSizes{Databases: 6, TotalBytes: 60<<20 + 73, Total: "60 MB", Largest: []v1alpha1.NamedDatabaseSize{
		{Name: "b", Database: "b_db", Bytes: 60 << 20, Human: "60 MB"},
		{Name: "c", Database: "c", Bytes: 30, Human: "30 bytes"},
		{Name: "d", Database: "d", Bytes: 30, Human: "30 bytes"},
		{Name: "a", Database: "a", Bytes: 10, Human: "10 bytes"},
		{Name: "f", Database: "f", Bytes: 2, Human: "2 bytes"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff(v1alpha1.ConfigSizes{Total: "0 bytes"}, SummarizeSizes(nil, nil)); diff != "" {
		t.Error(diff)
	}
}
