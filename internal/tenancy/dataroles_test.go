package tenancy

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// now is the observations' time.
var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// dataRole is a ready read-write data role "app" of me: its record ours
// with the role's OID and its login member 1's, the role as created (not
// logging in), member 1 logging in with the record's password and
// inheriting the role's privileges, nothing missing.
func dataRole() DataRoleObservation {
	return DataRoleObservation{
		Name: "app", Role: "shop_app", Path: "tenants/shop/roles/app",
		Wanted: true, Access: v1alpha1.DataReadWrite,
		KV: KVState{Present: true, Version: 2,
			Owner: func() map[string]string {
				m := DataRoleMetadata(me, "app", v1alpha1.DataReadWrite)
				m[MetaRoleOID] = "4242"
				m[MetaMemberOID(1)] = "5001"
				m[MetaPasswordSetAt] = now.Add(-time.Hour).Format(time.RFC3339)
				return m
			}(),
			Data: map[string]string{"username": "shop_app_1", "password": "pw"}},
		R:       RoleState{Exists: true, OID: 4242, GroupOK: true, AdminMember: true, AdminCanAdmin: true},
		Members: [2]MemberState{{Exists: true, OID: 5001, CanLogin: true, AttributesOK: true, Inherits: true, AdminMember: true}},
		Login:   LoginOK,
		Checked: true,
		Now:     now,
		Policy:  CredentialPolicy{Grace: DefaultGracePeriod},
	}
}

// legacy makes o a data role as an earlier release made it: its role logs
// in, and there are no members.
func legacy(o *DataRoleObservation) {
	o.KV.Data["username"] = "shop_app"
	delete(o.KV.Owner, MetaMemberOID(1))
	o.R.AttributesOK, o.R.CanLogin = true, true
	o.Members = [2]MemberState{}
}

func TestDecideDataRole(t *testing.T) {
	type out struct {
		Actions  []DataRoleAction
		Ready    bool
		Conflict bool
	}
	create := []DataRoleAction{DataRoleWriteRecord, DataRoleCreate, DataRoleRecordOID, DataRoleMoveToMembers, DataRoleGrant}
	cases := map[string]struct {
		mut  func(*DataRoleObservation)
		want out
		msg  string
	}{
		"Ready": {
			mut:  func(*DataRoleObservation) {},
			want: out{Ready: true},
		},
		"New: the record is written before the role": {
			mut: func(o *DataRoleObservation) {
				o.KV, o.R, o.Login, o.Checked = KVState{}, RoleState{}, LoginNotTried, false
			},
			want: out{Actions: create},
			msg:  "being created",
		},
		"InterruptedAfterTheRecord: the role is created with it": {
			mut: func(o *DataRoleObservation) {
				delete(o.KV.Owner, MetaRoleOID)
				o.R, o.Login, o.Checked = RoleState{}, LoginNotTried, false
			},
			want: out{Actions: []DataRoleAction{DataRoleCreate, DataRoleRecordOID, DataRoleGrant}},
		},
		"InterruptedAfterTheRole: proven by its password, the OID recorded": {
			mut: func(o *DataRoleObservation) {
				legacy(o)
				delete(o.KV.Owner, MetaRoleOID)
				o.Checked, o.Missing = true, []string{"table public.t: SELECT"}
			},
			want: out{Actions: []DataRoleAction{DataRoleRecordOID, DataRoleMoveToMembers, DataRoleGrant}},
		},
		"InterruptedAfterTheRoleUnderMembers: the role itself does not log in, so it is not provable": {
			mut:  func(o *DataRoleObservation) { delete(o.KV.Owner, MetaRoleOID) },
			want: out{Conflict: true},
		},
		"InterruptedAfterTheRole, the login not possible now: wait": {
			mut: func(o *DataRoleObservation) {
				legacy(o)
				delete(o.KV.Owner, MetaRoleOID)
				o.Login = LoginUnavailable
			},
			want: out{},
			msg:  "cannot tell yet",
		},
		"RoleExistsWithoutRecord: a role someone made is never taken": {
			mut:  func(o *DataRoleObservation) { o.KV, o.Login = KVState{}, LoginNotTried },
			want: out{Conflict: true},
			msg:  `the role "shop_app" exists and this Database has no record of creating it`,
		},
		"RoleReplaced: another OID than the one recorded": {
			mut:  func(o *DataRoleObservation) { o.R.OID = 9999 },
			want: out{Conflict: true},
			msg:  "but this Database created OID 4242",
		},
		"RoleWithoutOIDAndRefused: not provably ours": {
			mut: func(o *DataRoleObservation) {
				delete(o.KV.Owner, MetaRoleOID)
				o.Login = LoginRefused
			},
			want: out{Conflict: true},
			msg:  "does not log in as it",
		},
		"RecordOfAnotherDatabase": {
			mut: func(o *DataRoleObservation) {
				o.KV.Owner = DataRoleMetadata(Identity{Name: "victim", UID: "uid-victim"}, "app", v1alpha1.DataReadWrite)
			},
			want: out{Conflict: true},
			msg:  "belongs to",
		},
		"RecordOfAnotherEntry: written for another data role": {
			mut:  func(o *DataRoleObservation) { o.KV.Owner[MetaDataRole] = "report" },
			want: out{Conflict: true},
		},
		"RecordWrittenByHand": {
			mut:  func(o *DataRoleObservation) { o.KV.Owner = map[string]string{} },
			want: out{Conflict: true},
		},
		"RoleDroppedByHand: created again with the recorded password": {
			mut:  func(o *DataRoleObservation) { o.R, o.Login = RoleState{}, LoginNotTried },
			want: out{Actions: []DataRoleAction{DataRoleCreate, DataRoleRecordOID, DataRoleGrant}},
			msg:  "is gone; it is created again with the recorded password",
		},
		"PasswordChanged: the record wins": {
			mut:  func(o *DataRoleObservation) { o.Login = LoginRefused },
			want: out{Actions: []DataRoleAction{DataRoleRepairPassword}},
			msg:  "password was refused",
		},
		"AttributesChanged": {
			mut:  func(o *DataRoleObservation) { o.R.GroupOK = false },
			want: out{Actions: []DataRoleAction{DataRoleRepairAttributes}},
		},
		"AdminMembershipRevoked": {
			mut:  func(o *DataRoleObservation) { o.R.AdminMember = false },
			want: out{Actions: []DataRoleAction{DataRoleRepairAttributes}},
		},
		"LimitsChanged: on the member in use": {
			mut:  func(o *DataRoleObservation) { o.Members[0].LimitsDrifted = true },
			want: out{Actions: []DataRoleAction{DataRoleRepairMember}},
		},
		"Legacy: AttributesChanged": {
			mut:  func(o *DataRoleObservation) { legacy(o); o.R.AttributesOK = false },
			want: out{Actions: []DataRoleAction{DataRoleRepairAttributes, DataRoleMoveToMembers}},
		},
		"Legacy: LimitsChanged": {
			mut:  func(o *DataRoleObservation) { legacy(o); o.LimitsDrifted = true },
			want: out{Actions: []DataRoleAction{DataRoleRepairAttributes, DataRoleMoveToMembers}},
		},
		"Legacy: moves to its members, Ready meanwhile": {
			mut:  legacy,
			want: out{Actions: []DataRoleAction{DataRoleMoveToMembers}, Ready: true},
		},
		"Legacy: a refused password is repaired before it moves": {
			mut:  func(o *DataRoleObservation) { legacy(o); o.Login = LoginRefused },
			want: out{Actions: []DataRoleAction{DataRoleRepairPassword}},
		},
		"Legacy: a member 1 someone else made stops the move": {
			mut: func(o *DataRoleObservation) {
				legacy(o)
				o.Members[0] = MemberState{Exists: true, OID: 777, CanLogin: true, Login: LoginRefused}
			},
			want: out{Conflict: true},
			msg:  `the role "shop_app_1" exists and this Database has no record of creating it`,
		},
		"Legacy: a move interrupted before member 1's OID was recorded goes on": {
			mut: func(o *DataRoleObservation) {
				legacy(o)
				o.Members[0] = MemberState{Exists: true, OID: 5001, CanLogin: true, AttributesOK: true, Inherits: true, AdminMember: true, Login: LoginOK}
			},
			want: out{Actions: []DataRoleAction{DataRoleMoveToMembers}, Ready: true},
		},
		"MemberGone: created again with the record's password": {
			mut:  func(o *DataRoleObservation) { o.Members[0], o.Login = MemberState{}, LoginRefused },
			want: out{Actions: []DataRoleAction{DataRoleCreateMember, DataRoleRecordMemberOID, DataRoleRepairPassword}},
			msg:  `its login member "shop_app_1" is gone`,
		},
		"MemberReplaced: another OID than the one recorded": {
			mut:  func(o *DataRoleObservation) { o.Members[0].OID = 9999 },
			want: out{Conflict: true},
			msg:  "but this Database created OID 5001",
		},
		"MemberOIDNotRecorded: proven by its login, recorded": {
			mut:  func(o *DataRoleObservation) { delete(o.KV.Owner, MetaMemberOID(1)) },
			want: out{Actions: []DataRoleAction{DataRoleRecordMemberOID}},
		},
		"MemberNotInheriting: its membership is given back": {
			mut:  func(o *DataRoleObservation) { o.Members[0].Inherits = false },
			want: out{Actions: []DataRoleAction{DataRoleRepairMember}},
		},
		"MemberNoLogin: given back": {
			mut:  func(o *DataRoleObservation) { o.Members[0].CanLogin, o.Login = false, LoginRefused },
			want: out{Actions: []DataRoleAction{DataRoleRepairMember, DataRoleRepairPassword}},
		},
		"InGrace: Ready, nothing to do, woken at its end": {
			mut: func(o *DataRoleObservation) {
				maps.Copy(o.KV.Owner, PreviousLogin("shop_app_2", now.Add(5*time.Minute)))
				o.Members[1] = MemberState{Exists: true, OID: 5002, CanLogin: true, AttributesOK: true, Inherits: true, AdminMember: true}
				o.KV.Owner[MetaMemberOID(2)] = "5002"
			},
			want: out{Ready: true},
		},
		"GraceOver: the previous login is ended, Ready meanwhile": {
			mut: func(o *DataRoleObservation) {
				maps.Copy(o.KV.Owner, PreviousLogin("shop_app_2", now.Add(-time.Second)))
			},
			want: out{Actions: []DataRoleAction{DataRoleRetirePrevious}, Ready: true},
		},
		"RotationDuringGrace: waits for its end": {
			mut: func(o *DataRoleObservation) {
				maps.Copy(o.KV.Owner, PreviousLogin("shop_app_2", now.Add(5*time.Minute)))
				o.Rotation = DataRoleRotation{ID: "r1"}
			},
			want: out{Ready: true},
		},
		"RotationAfterGrace: the previous login ends first, then the rotation": {
			mut: func(o *DataRoleObservation) {
				maps.Copy(o.KV.Owner, PreviousLogin("shop_app_2", now.Add(-time.Second)))
				o.Rotation = DataRoleRotation{ID: "r1"}
			},
			want: out{Actions: []DataRoleAction{DataRoleRetirePrevious, DataRoleRotate}},
		},
		"OtherMemberLogsIn without a grace on record: given one": {
			mut: func(o *DataRoleObservation) {
				o.Members[1] = MemberState{Exists: true, OID: 5002, CanLogin: true, AttributesOK: true, Inherits: true, AdminMember: true}
				o.KV.Owner[MetaMemberOID(2)] = "5002"
			},
			want: out{Actions: []DataRoleAction{DataRoleStartGrace}, Ready: true},
		},
		"RoleItselfLogsIn under members (a move interrupted): given a grace": {
			mut:  func(o *DataRoleObservation) { o.R.CanLogin = true },
			want: out{Actions: []DataRoleAction{DataRoleStartGrace}, Ready: true},
		},
		"OtherMemberNotOurs: left alone": {
			mut:  func(o *DataRoleObservation) { o.Members[1] = MemberState{Exists: true, OID: 6000, CanLogin: true} },
			want: out{Ready: true},
		},
		"RotationTargetNotOurs: nothing is written": {
			mut: func(o *DataRoleObservation) {
				o.Members[1] = MemberState{Exists: true, OID: 6000, CanLogin: true}
				o.Rotation = DataRoleRotation{ID: "r1"}
			},
			want: out{Conflict: true},
			msg:  `the role "shop_app_2" exists and this Database has no record of creating it`,
		},
		"AgeDue: rotated": {
			mut:  func(o *DataRoleObservation) { o.Policy.MaxAge = 30 * time.Minute },
			want: out{Actions: []DataRoleAction{DataRoleRotate}},
		},
		"AgeNotDue: Ready": {
			mut:  func(o *DataRoleObservation) { o.Policy.MaxAge = 2 * time.Hour },
			want: out{Ready: true},
		},
		"AgeDueAndRotatedForIt: nothing more": {
			mut: func(o *DataRoleObservation) {
				o.Policy.MaxAge = 30 * time.Minute
				at := now.Add(-time.Minute)
				maps.Copy(o.KV.Owner, DataRoleRotationCompletion([3]string{"", "", o.KV.Owner[MetaPasswordSetAt]}, at, "", time.Time{}))
			},
			want: out{Ready: true},
		},
		"AgeUnknownPasswordTime: the record's version's time": {
			mut: func(o *DataRoleObservation) {
				delete(o.KV.Owner, MetaPasswordSetAt)
				o.KV.Created = now.Add(-3 * time.Hour)
				o.Policy.MaxAge = 2 * time.Hour
			},
			want: out{Actions: []DataRoleAction{DataRoleRotate}},
		},
		"GrantRevoked: granted again": {
			mut:  func(o *DataRoleObservation) { o.Missing = []string{"table public.items: INSERT"} },
			want: out{Actions: []DataRoleAction{DataRoleGrant}},
			msg:  "it lacks table public.items: INSERT",
		},
		"NotCheckedYet: granted, not Ready": {
			mut:  func(o *DataRoleObservation) { o.Checked = false },
			want: out{Actions: []DataRoleAction{DataRoleGrant}},
			msg:  "not checked yet",
		},
		"LoginUnavailable: not Ready, nothing changed": {
			mut:  func(o *DataRoleObservation) { o.Login = LoginUnavailable },
			want: out{},
			msg:  "not proven yet",
		},
		"Removed: sessions ended and role dropped before the record goes": {
			mut:  func(o *DataRoleObservation) { o.Wanted = false },
			want: out{Actions: []DataRoleAction{DataRoleDrop, DataRoleDeleteRecord}},
			msg:  "being removed",
		},
		"RemovedRoleAlreadyGone": {
			mut:  func(o *DataRoleObservation) { o.Wanted, o.R, o.Login = false, RoleState{}, LoginNotTried },
			want: out{Actions: []DataRoleAction{DataRoleDeleteRecord}},
		},
		"RemovedRoleReplaced: the other role is left alone": {
			mut:  func(o *DataRoleObservation) { o.Wanted, o.R.OID = false, 9999 },
			want: out{Actions: []DataRoleAction{DataRoleDeleteRecord}},
			msg:  "is not this Database's and is left alone",
		},
		"RemovedInterruptedCreateUnprovable: wait": {
			mut: func(o *DataRoleObservation) {
				o.Wanted = false
				delete(o.KV.Owner, MetaRoleOID)
				o.Login = LoginUnavailable
			},
			want: out{},
			msg:  "cannot tell yet",
		},
		"RotationRequested: rotated, not Ready meanwhile": {
			mut:  func(o *DataRoleObservation) { o.Rotation = DataRoleRotation{ID: "r1"} },
			want: out{Actions: []DataRoleAction{DataRoleRotate}},
			msg:  "rotating its password",
		},
		"DatabaseRotation: every role rotates": {
			mut:  func(o *DataRoleObservation) { o.Rotation = DataRoleRotation{DatabaseID: "all-1"} },
			want: out{Actions: []DataRoleAction{DataRoleRotate}},
		},
		"RotationCompleted: nothing more": {
			mut: func(o *DataRoleObservation) {
				o.Rotation = DataRoleRotation{ID: "r1", DatabaseID: "all-1"}
				maps.Copy(o.KV.Owner, DataRoleRotationCompletion([3]string{"r1", "all-1", ""}, now.Add(-time.Hour), "", time.Time{}))
			},
			want: out{Ready: true},
		},
		"NewDatabaseRotationAfterTheRolesOwn": {
			mut: func(o *DataRoleObservation) {
				o.Rotation = DataRoleRotation{ID: "r1", DatabaseID: "all-2"}
				maps.Copy(o.KV.Owner, DataRoleRotationCompletion([3]string{"r1", "all-1", ""}, now.Add(-time.Hour), "", time.Time{}))
			},
			want: out{Actions: []DataRoleAction{DataRoleRotate}},
		},
		// Created while the spec asks for a rotation: its first password
		// counts as it.
		"CreatedWithARotation": {
			mut: func(o *DataRoleObservation) {
				o.Rotation = DataRoleRotation{ID: "r1"}
				maps.Copy(o.KV.Owner, DataRoleRotationCreated(o.Rotation, now.Add(-time.Hour)))
			},
			want: out{Ready: true},
		},
		// The new password is version 2 and the intent names it: finished
		// with it, even when the spec changed meanwhile, and the refused
		// login is not "repaired" with it either way.
		"RotationPending: finished with the new version": {
			mut: func(o *DataRoleObservation) {
				o.Rotation = DataRoleRotation{ID: "r9"}
				maps.Copy(o.KV.Owner, DataRoleRotationIntent([3]string{"r1", "", ""}, 2, "shop_app_2"))
				o.KV.Version, o.Login = 2, LoginRefused
			},
			want: out{Actions: []DataRoleAction{DataRoleRotateFinish}},
			msg:  "finishing the rotation",
		},
		// The intent was recorded but the write never happened (version
		// 1): started again, as one rotation.
		"RotationIntentWithoutItsVersion: started again": {
			mut: func(o *DataRoleObservation) {
				o.Rotation = DataRoleRotation{ID: "r1"}
				maps.Copy(o.KV.Owner, DataRoleRotationIntent([3]string{"r1", "", ""}, 3, "shop_app_1"))
			},
			want: out{Actions: []DataRoleAction{DataRoleRotate}},
		},
		"RotationWaitsForARoleThatIsNotOurs": {
			mut: func(o *DataRoleObservation) {
				o.Rotation = DataRoleRotation{ID: "r1"}
				o.R.OID = 999
			},
			want: out{Conflict: true},
		},
		"RemovedRecordNotOurs: nothing": {
			mut: func(o *DataRoleObservation) {
				o.Wanted = false
				o.KV.Owner = map[string]string{}
			},
			want: out{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := dataRole()
			o.KV.Owner = maps.Clone(o.KV.Owner)
			tc.mut(&o)
			v := DecideDataRole(o, me)
			got := out{Actions: v.Actions, Ready: v.Ready, Conflict: v.Conflict != ""}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s\n(message %q, conflict %q)", diff, v.Message, v.Conflict)
			}
			if tc.msg != "" && !strings.Contains(v.Message+v.Conflict, tc.msg) {
				t.Errorf("message %q, conflict %q: want %q", v.Message, v.Conflict, tc.msg)
			}
			if v.Conflict != "" && len(v.Actions) > 0 {
				t.Errorf("a conflict with actions %v", v.Actions)
			}
			// Only what leaves the credential in use as it is may be done
			// while Ready.
			for _, a := range v.Actions {
				if v.Ready && !slices.Contains([]DataRoleAction{DataRoleMoveToMembers, DataRoleRetirePrevious, DataRoleStartGrace}, a) {
					t.Errorf("Ready with the action %q", a)
				}
			}
			if v.Ready && v.Message != "" {
				t.Errorf("Ready with the message %q", v.Message)
			}
		})
	}
}

func TestDataRoleNames(t *testing.T) {
	if got := DataRoleName("shop", "app"); got != "shop_app" {
		t.Errorf("DataRoleName = %q", got)
	}
	if got := DataRolePath("tenants/shop", "app"); got != "tenants/shop/roles/app" {
		t.Errorf("DataRolePath = %q", got)
	}
	m := DataRoleMetadata(me, "report", v1alpha1.DataReadOnly)
	if m[MetaDataRole] != "report" || m[MetaDataAccess] != "readOnly" || m[MetaUID] != me.UID {
		t.Errorf("DataRoleMetadata = %v", m)
	}
}

func TestRecordedDataRoles(t *testing.T) {
	for _, tc := range []struct {
		names []string
		value string
	}{
		{nil, "-"},
		{[]string{"report", "app", "app"}, "app,report"},
	} {
		v := DataRolesValue(tc.names)
		if v != tc.value {
			t.Errorf("DataRolesValue(%q) = %q, want %q", tc.names, v, tc.value)
		}
		back := RecordedDataRoles(map[string]string{MetaDataRoles: v})
		if want := strings.Split(tc.value, ","); tc.value != "-" && !cmp.Equal(want, back) || tc.value == "-" && len(back) != 0 {
			t.Errorf("RecordedDataRoles(%q) = %q", v, back)
		}
	}
	if got := RecordedDataRoles(map[string]string{}); got != nil {
		t.Errorf("without the key: %q", got)
	}
}

func TestWithDataRoles(t *testing.T) {
	ready := Verdict{Exists: true, UpToDate: true, Ready: true, Phase: v1alpha1.DatabasePhaseReady}
	cases := map[string]struct {
		roles             []DataRoleVerdict
		ready, upToDate   bool
		reason, inMessage string
	}{
		"None": {ready: true, upToDate: true},
		"AllReady": {
			roles: []DataRoleVerdict{{Wanted: true, Ready: true}, {Wanted: true, Ready: true}},
			ready: true, upToDate: true,
		},
		"OneBeingCreated": {
			roles:     []DataRoleVerdict{{Wanted: true, Ready: true}, {Wanted: true, Actions: []DataRoleAction{DataRoleCreate}, Message: "creating report"}},
			inMessage: "creating report",
		},
		"OneWaitingWithoutAction": {
			roles:    []DataRoleVerdict{{Wanted: true, Message: "cannot tell yet"}},
			upToDate: true, inMessage: "cannot tell yet",
		},
		"ConflictOnOneOtherProceeds": {
			roles:  []DataRoleVerdict{{Wanted: true, Conflict: "role exists"}, {Wanted: true, Actions: []DataRoleAction{DataRoleGrant}, Message: "granting"}},
			reason: ReasonConflict, inMessage: "role exists; granting",
		},
		"RemovedBeingDropped": {
			roles:     []DataRoleVerdict{{Actions: []DataRoleAction{DataRoleDrop, DataRoleDeleteRecord}, Message: "removing"}},
			inMessage: "removing",
		},
		"RemovedNotOurs: ignored": {
			roles: []DataRoleVerdict{{}},
			ready: true, upToDate: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := WithDataRoles(ready, tc.roles)
			if v.Ready != tc.ready || v.UpToDate != tc.upToDate || v.Reason != tc.reason || !strings.Contains(v.Message, tc.inMessage) {
				t.Errorf("got ready %v upToDate %v reason %q message %q", v.Ready, v.UpToDate, v.Reason, v.Message)
			}
		})
	}
}
