package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// rotating is base() with a rotation requested in the spec.
func rotating(id string) Observation {
	o := base()
	o.Rotation = RotationRequest{ID: id, MayUpdate: true}
	return o
}

// withRotation records rotation metadata on the observation's record.
func withRotation(o *Observation, m map[string]string) {
	for k, v := range m {
		o.KV.Owner[k] = v
	}
}

// interrupted is the state after the new version of rotation "r1" was
// written (version 2) and before the role got its password: the current
// password does not log in yet.
func interrupted(o *Observation) {
	withRotation(o, RotationIntent("r1", 2))
	o.KV.Version = 2
	o.KV.Data["password"] = "new"
	o.Login, o.Installed = LoginRefused, nil
}

func TestDecideRotation(t *testing.T) {
	type out struct {
		Action                  RotationAction
		ID                      string
		Version                 int
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
		"NoFieldNeverRotates": {
			o:    base,
			want: ready,
		},
		"RequestedOnAReadyDatabase": {
			o:    func() Observation { return rotating("r1") },
			want: out{Action: RotateStart, ID: "r1", Version: 2, Exists: true, Ready: true},
			msg:  `rotating the credential (the credential rotation "r1")`,
		},
		"CreatedWithTheField: its first password counts as the rotation": {
			o: func() Observation {
				o := rotating("r1")
				withRotation(&o, RotationCreated("r1", "2026-01-01T00:00:00Z"))
				return o
			},
			want: ready,
		},
		"Completed": {
			o: func() Observation {
				o := rotating("r1")
				withRotation(&o, RotationIntent("r1", 2))
				withRotation(&o, RotationCompletion("r1", "2026-01-01T00:00:00Z"))
				o.KV.Version = 2
				o.Rotation.StatusID = "r1"
				return o
			},
			want: ready,
		},
		"CompletedWithStatusWiped: the metadata says so": {
			o: func() Observation {
				o := rotating("r1")
				withRotation(&o, RotationIntent("r1", 2))
				withRotation(&o, RotationCompletion("r1", "2026-01-01T00:00:00Z"))
				o.KV.Version = 2
				return o
			},
			want: ready,
		},
		"CompletedInStatusOnly (metadata lost): not rotated again": {
			o: func() Observation {
				o := rotating("r1")
				o.Rotation.StatusID = "r1"
				return o
			},
			want: ready,
		},
		"ChangedIDAfterACompletedRotation": {
			o: func() Observation {
				o := rotating("r2")
				withRotation(&o, RotationIntent("r1", 2))
				withRotation(&o, RotationCompletion("r1", "2026-01-01T00:00:00Z"))
				o.KV.Version = 2
				o.Rotation.StatusID = "r1"
				return o
			},
			want: out{Action: RotateStart, ID: "r2", Version: 3, Exists: true, Ready: true},
		},
		"InterruptedAfterTheIntentBeforeTheWrite: write it now": {
			o: func() Observation {
				o := rotating("r1")
				withRotation(&o, RotationIntent("r1", 2))
				return o
			},
			want: out{Action: RotateStart, ID: "r1", Version: 2, Exists: true, Ready: true},
		},
		"InterruptedAfterTheKVWrite: finish with the newest password, never restore the old one": {
			o: func() Observation {
				o := rotating("r1")
				interrupted(&o)
				return o
			},
			want: out{Action: RotateFinish, ID: "r1", Version: 2, Exists: true},
			msg:  "its new password is version 2",
		},
		"InterruptedAfterTheKVWriteWithStatusWiped": {
			o: func() Observation {
				o := rotating("r1")
				interrupted(&o)
				o.Rotation.StatusID = ""
				return o
			},
			want: out{Action: RotateFinish, ID: "r1", Version: 2, Exists: true},
		},
		"InterruptedBeforeTheCompletion (the new password logs in)": {
			o: func() Observation {
				o := rotating("r1")
				interrupted(&o)
				o.Login, o.Installed = LoginOK, []string{"pg_trgm", "plpgsql"}
				return o
			},
			want: out{Action: RotateFinish, ID: "r1", Version: 2, Exists: true},
		},
		"InterruptedAndTheFieldRemoved: still finished": {
			o: func() Observation {
				o := rotating("")
				interrupted(&o)
				return o
			},
			want: out{Action: RotateFinish, ID: "r1", Version: 2, Exists: true},
		},
		"InterruptedAndTheIDChanged: the started one is finished first": {
			o: func() Observation {
				o := rotating("r2")
				interrupted(&o)
				return o
			},
			want: out{Action: RotateFinish, ID: "r1", Version: 2, Exists: true},
		},
		"InterruptedButTheRotatedVersionLostItsPassword: the repair decides": {
			o: func() Observation {
				o := rotating("r1")
				interrupted(&o)
				o.KV.Data = nil
				o.Login = LoginNotTried
				return o
			},
			want: out{Exists: true, Repairs: []Repair{RepairKVRecord, RepairExtensions}},
		},
		"AVersionWrittenAfterTheRotatedOne: a new rotation, never that password": {
			o: func() Observation {
				o := rotating("r1")
				withRotation(&o, RotationIntent("r1", 2))
				o.KV.Version = 3
				return o
			},
			want: out{Action: RotateStart, ID: "r1", Version: 4, Exists: true, Ready: true},
		},
		"ReadOnlyImport: reports that rotation needs Update": {
			o: func() Observation {
				o := rotating("r1")
				o.Import, o.ImportUpdate = true, false
				o.KV.Owner = nil
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonInvalidSpec},
			msg:  "add Update to spec.managementPolicies",
		},
		"ProvisioningWithoutUpdate: reports that rotation needs Update": {
			o: func() Observation {
				o := rotating("r1")
				o.Rotation.MayUpdate = false
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonInvalidSpec},
			msg:  "lack Update",
		},
		"ImportWithUpdate": {
			o: func() Observation {
				o := rotating("r1")
				o.Import, o.ImportUpdate = true, true
				o.KV.Owner = nil
				return o
			},
			want: out{Action: RotateStart, ID: "r1", Version: 2, Exists: true, Ready: true},
		},
		"ImportWithUpdateInterruptedAfterTheKVWrite": {
			o: func() Observation {
				o := rotating("r1")
				o.Import, o.ImportUpdate = true, true
				o.KV.Owner = map[string]string{}
				interrupted(&o)
				return o
			},
			want: out{Action: RotateFinish, ID: "r1", Version: 2, Exists: true},
		},
		"ImportInterruptedButTheRoleIsGone: waits": {
			o: func() Observation {
				o := rotating("r1")
				o.Import, o.ImportUpdate = true, true
				o.KV.Owner = map[string]string{}
				interrupted(&o)
				o.R, o.Login = RoleState{AdminCanAdmin: true}, LoginNotTried
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonImportDifferences},
			msg:  "waits for the role and the database",
		},
		"Conflict": {
			o: func() Observation {
				o := rotating("r1")
				o.R.OID = 99999
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonConflict},
			msg:  "waits until this is resolved; nothing was rotated",
		},
		"ConflictWhileInterrupted": {
			o: func() Observation {
				o := rotating("r1")
				interrupted(&o)
				o.R.OID = 99999
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonConflict},
			msg:  "nothing was rotated",
		},
		"ImmutableField": {
			o: func() Observation {
				o := rotating("r1")
				o.Database = "other"
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonImmutableField},
			msg:  "nothing was rotated",
		},
		"EndpointChanged": {
			o: func() Observation {
				o := rotating("r1")
				o.WantData["host"] = "elsewhere"
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonEndpointChanged},
			msg:  "nothing was rotated",
		},
		"DatabaseVanished": {
			o: func() Observation {
				o := rotating("r1")
				o.DB, o.Login, o.Installed = DBState{}, LoginAuthOK, nil
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonDatabaseVanished},
			msg:  "nothing was rotated",
		},
		"LoginUnavailableWhileInterrupted: wait": {
			o: func() Observation {
				o := rotating("r1")
				interrupted(&o)
				o.Login = LoginUnavailable
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonDependencyUnavailable},
			msg:  "nothing was rotated",
		},
		"DriftFirst: waits until Ready": {
			o: func() Observation {
				o := rotating("r1")
				o.DB.PublicConnect = true
				return o
			},
			want: out{Exists: true, Repairs: []Repair{RepairConnect}},
			msg:  "waits until the Database is Ready",
		},
		"NoAdminOption: nothing written": {
			o: func() Observation {
				o := rotating("r1")
				o.R.AdminCanAdmin = false
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonInsufficientPrivileges},
			msg:  "WITH ADMIN OPTION",
		},
		"Deleting": {
			o: func() Observation {
				o := rotating("r1")
				interrupted(&o)
				o.Deleting = true
				return o
			},
			want: out{Exists: true, Repairs: []Repair{RepairPassword, RepairExtensions}},
		},
		"HolderChangedThePassword: the rotation starts without the old password": {
			o: func() Observation {
				o := rotating("r1")
				o.Login, o.Installed = LoginRefused, nil
				return o
			},
			want: out{Action: RotateStart, ID: "r1", Version: 2, Exists: true, Repairs: []Repair{RepairPassword, RepairExtensions}},
			msg:  "rotating the credential",
		},
		"HolderFilledItsConnectionLimit: Ready, the rotation starts": {
			o: func() Observation {
				o := rotating("r1")
				o.Login, o.Installed = LoginLimitFull, nil
				return o
			},
			want: out{Action: RotateStart, ID: "r1", Version: 2, Exists: true, Ready: true},
			msg:  "rotating the credential",
		},
		"HolderChangedThePasswordOfAnImport: waits (its credential is its only proof)": {
			o: func() Observation {
				o := rotating("r1")
				o.Import, o.ImportUpdate = true, true
				o.KV.Owner = nil
				o.Login, o.Installed = LoginRefused, nil
				return o
			},
			want: out{Exists: true, UpToDate: true, Reason: ReasonImportDifferences},
			msg:  "waits until the Database is Ready",
		},
		"OwnershipNotOnRecord: waits until Ready": {
			o: func() Observation {
				o := rotating("r1")
				delete(o.KV.Owner, MetaRoleOID)
				o.Login, o.Installed = LoginLimitFull, nil
				o.DB.PublicConnect = true
				return o
			},
			want: out{Exists: true, Repairs: []Repair{RepairOwnerMetadata, RepairConnect}},
			msg:  "waits until the Database is Ready",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := Decide(tc.o())
			got := out{Action: v.Rotation.Action, ID: v.Rotation.ID, Version: v.Rotation.Version,
				Exists: v.Exists, UpToDate: v.UpToDate, Ready: v.Ready, Reason: v.Reason, Repairs: v.Repairs}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("-want +got:\n%s\nmessage: %s", diff, v.Message)
			}
			if !strings.Contains(v.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", v.Message, tc.msg)
			}
		})
	}
}

func TestRotationOf(t *testing.T) {
	cases := map[string]struct {
		owner map[string]string
		want  RotationRecord
	}{
		"None":        {nil, RotationRecord{}},
		"Created":     {RotationCreated("a", "t"), RotationRecord{Started: "a", Version: 1, Completed: "a"}},
		"BadVersion":  {map[string]string{MetaRotationID: "a", MetaRotationVersion: "x"}, RotationRecord{Started: "a"}},
		"ZeroVersion": {map[string]string{MetaRotationID: "a", MetaRotationVersion: "0"}, RotationRecord{Started: "a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RotationOf(tc.owner)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}
