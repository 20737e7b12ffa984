package tenancy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The checks before any write: asked for only where a write could follow,
// and what they find turns the verdict into a refusal that creates and
// changes nothing.
func TestPreWriteChecks(t *testing.T) {
	nothing := func(o *Observation) {
		o.KV, o.DB, o.R, o.Login, o.Installed = KVState{}, DBState{}, RoleState{}, LoginNotTried, nil
	}
	missingExtension := func(o *Observation) { o.Installed = []string{"plpgsql"} }
	type out struct {
		ExtensionCheck, OptionsCheck bool
		Exists, UpToDate             bool
		Reason, Message              string
	}
	cases := map[string]struct {
		o    []func(*Observation)
		want out
	}{
		"NewDatabaseIsCheckedFirst": {
			o:    []func(*Observation){nothing},
			want: out{ExtensionCheck: true, OptionsCheck: true},
		},
		"ReadyDatabaseIsNotChecked": {
			want: out{Exists: true, UpToDate: true},
		},
		"AMissingExtensionIsCheckedBeforeItIsInstalled": {
			o:    []func(*Observation){missingExtension},
			want: out{ExtensionCheck: true, Exists: true},
		},
		"AnImportIsNeverChecked": {
			o:    []func(*Observation){nothing, func(o *Observation) { o.Import = true }},
			want: out{UpToDate: true, Reason: ReasonImportDifferences},
		},
		"NothingIsCheckedWhileDeleting": {
			o:    []func(*Observation){nothing, func(o *Observation) { o.Deleting = true }},
			want: out{},
		},
		"AnExtensionProblemRefusesTheCreation": {
			o: []func(*Observation){nothing, func(o *Observation) {
				o.PreWrite.ExtensionProblems = []string{"extension x is not available", "extension y is not trusted"}
				o.PreWrite.OptionsReason, o.PreWrite.OptionsMessage = ReasonDatabaseOptionsUnsupported, "not this one"
			}},
			want: out{ExtensionCheck: true, OptionsCheck: true, Exists: true, UpToDate: true, Reason: ReasonInvalidSpec,
				Message: "extension x is not available; extension y is not trusted; nothing was created or changed"},
		},
		"AnExtensionProblemRefusesTheRepair": {
			o:    []func(*Observation){missingExtension, func(o *Observation) { o.PreWrite.ExtensionProblems = []string{"extension x is gone"} }},
			want: out{ExtensionCheck: true, Exists: true, UpToDate: true, Reason: ReasonInvalidSpec, Message: "extension x is gone; nothing was created or changed"},
		},
		"AnOptionsRefusalRefusesTheCreation": {
			o: []func(*Observation){nothing, func(o *Observation) {
				o.PreWrite.OptionsReason, o.PreWrite.OptionsMessage = ReasonDatabaseOptionsNotAllowed, "the config allows no ICU"
			}},
			want: out{ExtensionCheck: true, OptionsCheck: true, Exists: true, UpToDate: true, Reason: ReasonDatabaseOptionsNotAllowed, Message: "the config allows no ICU"},
		},
		// Findings that no check asked for change nothing.
		"FindingsOnAReadyDatabaseAreIgnored": {
			o: []func(*Observation){func(o *Observation) {
				o.PreWrite = PreWriteChecks{ExtensionProblems: []string{"x"}, OptionsReason: ReasonDatabaseOptionsNotAllowed}
			}},
			want: out{Exists: true, UpToDate: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			for _, m := range tc.o {
				m(&o)
			}
			checks := o
			checks.PreWrite = PreWriteChecks{}
			first := Decide(checks)
			v := Decide(o)
			got := out{
				ExtensionCheck: NeedsExtensionCheck(checks, first), OptionsCheck: NeedsOptionsCheck(checks, first),
				Exists: v.Exists, UpToDate: v.UpToDate, Reason: v.Reason,
			}
			if tc.want.Message != "" {
				got.Message = v.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}
