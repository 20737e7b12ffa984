package binding

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// The version shown is the one read now; an Observe that relied on the
// last reading keeps the version shown for the same copy, and a copy
// moved elsewhere shows none until read.
func TestVersionedCredential(t *testing.T) {
	at := func(p string, v int64) v1alpha1.CredentialObservation {
		return v1alpha1.CredentialObservation{Path: p, OpenBaoURL: "https://bao/v1/kv/data/" + p, Version: v}
	}
	cases := map[string]struct {
		read       int
		last, want v1alpha1.CredentialObservation
	}{
		"ReadNow":                  {read: 4, last: at("a", 3), want: at("a", 4)},
		"LastReadingStands":        {read: 0, last: at("a", 3), want: at("a", 3)},
		"FirstReadingStandsUnread": {read: 0, last: v1alpha1.CredentialObservation{}, want: at("a", 0)},
		"AnotherCopyShowsNone":     {read: 0, last: at("b", 3), want: at("a", 0)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, versioned(at("a", 0), tc.read, tc.last)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}
