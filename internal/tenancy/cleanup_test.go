package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cleaning is base() with an access cleanup requested in the spec.
func cleaning(id string) Observation {
	o := base()
	o.Cleanup = CleanupRequest{ID: id, MayUpdate: true}
	return o
}

func TestDecideCleanup(t *testing.T) {
	type out struct {
		Cleanup                 string
		Rotation                RotationAction
		Exists, UpToDate, Ready bool
		Reason                  string
		Repairs                 []Repair
	}
	ready := out{Exists: true, UpToDate: true, Ready: true}
	cases := map[string]struct {
		o    func() Observation
		want out
		msg  string
	}{
		"NoFieldNeverCleans": {
			o:    base,
			want: ready,
		},
		"RequestedOnAReadyDatabase (Bound or Released: the claim does not matter)": {
			o:    func() Observation { return cleaning("c1") },
			want: out{Cleanup: "c1", Exists: true, Ready: true},
			msg:  `removing every other role's access (the access cleanup "c1")`,
		},
		"Completed: the metadata keeps the ID": {
			o: func() Observation {
				o := cleaning("c1")
				o.KV.Owner[MetaCleanupCompletedID] = "c1"
				return o
			},
			want: ready,
		},
		"CompletedWithStatusWiped: the metadata says so": {
			o: func() Observation {
				o := cleaning("c1")
				o.KV.Owner[MetaCleanupCompletedID] = "c1"
				o.Cleanup.StatusID = ""
				return o
			},
			want: ready,
		},
		"MetadataLostButStatusShowsIt: not run again": {
			o: func() Observation {
				o := cleaning("c1")
				o.Cleanup.StatusID = "c1"
				return o
			},
			want: ready,
		},
		"NewIDAfterACompletedOne": {
			o: func() Observation {
				o := cleaning("c2")
				o.KV.Owner[MetaCleanupCompletedID] = "c1"
				o.Cleanup.StatusID = "c1"
				return o
			},
			want: out{Cleanup: "c2", Exists: true, Ready: true},
		},
		"ForeignMetadataIsNotTrusted": {
			o: func() Observation {
				o := cleaning("c1")
				o.KV.Owner[MetaCleanupCompletedID] = "c1"
				o.KV.Owner[MetaUID] = "another"
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonConflict},
			msg:  "nothing was revoked",
		},
		"WithoutUpdate: InvalidSpec": {
			o: func() Observation {
				o := cleaning("c1")
				o.Cleanup.MayUpdate = false
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonInvalidSpec},
			msg:  "add Update to spec.managementPolicies",
		},
		"ReadOnlyImport: InvalidSpec": {
			o: func() Observation {
				o := cleaning("c1")
				o.Import, o.ImportUpdate = true, false
				o.KV.Owner = map[string]string{}
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonInvalidSpec},
			msg:  "a read-only import never changes privileges",
		},
		"ImportWithUpdate": {
			o: func() Observation {
				o := cleaning("c1")
				o.Import, o.ImportUpdate = true, true
				o.KV.Owner = map[string]string{}
				return o
			},
			want: out{Cleanup: "c1", Exists: true, Ready: true},
		},
		"Conflict": {
			o: func() Observation {
				o := cleaning("c1")
				o.R.OID = 99999
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonConflict},
			msg:  "waits until this is resolved; nothing was revoked",
		},
		"ImmutableField": {
			o: func() Observation {
				o := cleaning("c1")
				o.Database = "other"
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonImmutableField},
			msg:  "nothing was revoked",
		},
		"EndpointChanged": {
			o: func() Observation {
				o := cleaning("c1")
				o.WantData["host"] = "elsewhere"
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonEndpointChanged},
			msg:  "nothing was revoked",
		},
		"DatabaseVanished": {
			o: func() Observation {
				o := cleaning("c1")
				o.DB, o.Login, o.Installed = DBState{}, LoginAuthOK, nil
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonDatabaseVanished},
			msg:  "nothing was revoked",
		},
		"LoginUnavailable: waits": {
			o: func() Observation {
				o := cleaning("c1")
				o.Login = LoginUnavailable
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonDependencyUnavailable},
			msg:  "nothing was revoked",
		},
		"DriftFirst: waits until Ready": {
			o: func() Observation {
				o := cleaning("c1")
				o.DB.PublicConnect = true
				return o
			},
			want: out{Exists: true, Repairs: []Repair{RepairConnect}},
			msg:  "waits until the Database is Ready",
		},
		"AdminNotAMember: the repair first": {
			o: func() Observation {
				o := cleaning("c1")
				o.R.AdminMember = false
				return o
			},
			want: out{Exists: true, Repairs: []Repair{RepairAdminMember}},
			msg:  "waits until the Database is Ready",
		},
		"RotationFirst": {
			o: func() Observation {
				o := cleaning("c1")
				o.Rotation = RotationRequest{ID: "r1", MayUpdate: true}
				return o
			},
			want: out{Rotation: RotateStart, Exists: true, Ready: true},
			msg:  "runs after the credential rotation",
		},
		"Deleting: never": {
			o: func() Observation {
				o := cleaning("c1")
				o.Deleting = true
				return o
			},
			want: out{Exists: true, UpToDate: true, Ready: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := Decide(tc.o())
			got := out{Cleanup: v.Cleanup.ID, Rotation: v.Rotation.Action, Exists: v.Exists, UpToDate: v.UpToDate, Ready: v.Ready, Reason: v.Reason, Repairs: v.Repairs}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("-want +got:\n%s\nmessage: %s", diff, v.Message)
			}
			if !strings.Contains(v.Message, tc.msg) {
				t.Errorf("message %q lacks %q", v.Message, tc.msg)
			}
			if v.Cleanup.ID != "" && Steady(v) {
				t.Error("a verdict with a cleanup to run is Steady")
			}
		})
	}
}
