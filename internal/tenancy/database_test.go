package tenancy

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

var me = Identity{Name: "shop", UID: "uid-1", ConfigName: "shared", ConfigUID: "cfg-1",
	Endpoint: map[string]string{"host": "db", "hostaddr": "192.0.2.1", "port": "5432", "sslmode": "verify-full"}}

func want() map[string]string {
	return map[string]string{"username": "shop", "database": "shop", "host": "db", "hostaddr": "192.0.2.1", "port": "5432", "sslmode": "verify-full"}
}

func withPassword(m map[string]string) map[string]string {
	m["password"] = "pw"
	return m
}

func ourKV(extra map[string]string) KVState {
	owner := OwnerMetadata(me)
	for k, v := range extra {
		owner[k] = v
	}
	return KVState{Present: true, Owner: owner, Data: withPassword(want()), Version: 1}
}

// base is a fully provisioned, healthy Database.
func base() Observation {
	id := me
	id.Endpoint = maps.Clone(me.Endpoint)
	return Observation{
		Identity: id, Database: "shop", Role: "shop", Path: "postgresql-databases/shop",
		Requested: []string{"pg_trgm"}, Installed: []string{"pg_trgm", "plpgsql"}, WantData: want(),
		KV:    ourKV(map[string]string{MetaDatabaseOID: "16384", MetaRoleOID: "16383"}),
		DB:    DBState{Exists: true, OID: 16384, Owner: "shop", AllowConn: true, RoleConnect: true},
		R:     RoleState{Exists: true, OID: 16383, AttributesOK: true, AdminMember: true, AdminCanAdmin: true},
		Login: LoginOK,
	}
}

func TestDecide(t *testing.T) {
	type out struct {
		Exists, UpToDate, Ready  bool
		Phase                    v1alpha1.DatabasePhase
		Reason                   string
		KVOurs, RoleOurs, DBOurs bool
		Repairs                  []Repair
	}
	cases := map[string]struct {
		o    func(*Observation)
		want out
		msg  string
	}{
		"NothingExists": {
			o: func(o *Observation) {
				o.KV, o.DB, o.R, o.Login, o.Installed = KVState{}, DBState{}, RoleState{}, LoginNotTried, nil
			},
			want: out{Phase: v1alpha1.DatabasePhasePlanned},
			msg:  "next: write the credential",
		},
		"OnlyOurOwnerMetadata (interrupted before the first version)": {
			o: func(o *Observation) {
				o.KV = KVState{Present: true, Owner: OwnerMetadata(me)}
				o.DB, o.R, o.Login, o.Installed = DBState{}, RoleState{}, LoginNotTried, nil
			},
			want: out{Phase: v1alpha1.DatabasePhasePlanned, KVOurs: true},
		},
		"CredentialWritten": {
			o: func(o *Observation) {
				o.KV = ourKV(nil)
				o.DB, o.R, o.Login, o.Installed = DBState{}, RoleState{}, LoginNotTried, nil
			},
			want: out{Phase: v1alpha1.DatabasePhaseCredentialCreated, KVOurs: true},
			msg:  "next: create the login role",
		},
		"RoleCreated (auth accepted, database missing)": {
			o:    func(o *Observation) { o.KV = ourKV(nil); o.DB, o.Login, o.Installed = DBState{}, LoginAuthOK, nil },
			want: out{Phase: v1alpha1.DatabasePhaseRoleCreated, KVOurs: true, RoleOurs: true},
			msg:  "next: create the database",
		},
		"DatabaseCreated, OID not yet recorded (interrupted)": {
			o:    func(o *Observation) { o.KV = ourKV(nil); o.DB.PublicConnect, o.DB.RoleConnect = true, false },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairOwnerMetadata, RepairConnect}},
		},
		"CreatedAcceptingNoConnections, OID recorded (interrupted before CONNECT)": {
			o: func(o *Observation) {
				o.DB.AllowConn, o.DB.PublicConnect, o.DB.RoleConnect = false, true, false
				o.Login, o.Installed = LoginNotAccepting, nil
			},
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairConnect, RepairExtensions}},
			msg:  "provisioning: the database accepts no connections yet; next: revoke CONNECT from PUBLIC",
		},
		"CreatedAcceptingNoConnections, OID not yet recorded: the 55000 login proves the role": {
			o: func(o *Observation) {
				o.KV = ourKV(nil)
				o.DB.AllowConn, o.DB.PublicConnect, o.DB.RoleConnect = false, true, false
				o.Login, o.Installed = LoginNotAccepting, nil
			},
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairOwnerMetadata, RepairConnect, RepairExtensions}},
			msg:  "accepts no connections yet",
		},
		"ConnectRestrictedButNotYetAllowed (interrupted before ALLOW_CONNECTIONS)": {
			o:    func(o *Observation) { o.DB.AllowConn, o.Login, o.Installed = false, LoginNotAccepting, nil },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairConnect, RepairExtensions}},
			msg:  "accepts no connections yet",
		},
		"AcceptingNoConnectionsWhileDeleting": {
			o: func(o *Observation) {
				o.Deleting = true
				o.DB.AllowConn, o.Login, o.Installed = false, LoginNotAccepting, nil
			},
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairConnect, RepairExtensions}},
		},
		"Ready": {
			o:    func(*Observation) {},
			want: out{Exists: true, UpToDate: true, Ready: true, Phase: v1alpha1.DatabasePhaseReady, KVOurs: true, RoleOurs: true, DBOurs: true},
			msg:  `database "shop" owned by "shop"`,
		},
		"ExtensionMissing": {
			o:    func(o *Observation) { o.Requested = []string{"pg_trgm", "citext"} },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairExtensions}},
		},
		"AllDrift": {
			o: func(o *Observation) {
				o.KV.Data["port"] = "1"
				delete(o.KV.Owner, MetaConfigUID)
				o.R.AdminMember, o.R.AttributesOK = false, false
				o.DB.Owner, o.DB.PublicConnect, o.DB.RoleConnect = "someone", true, false
				o.Requested = []string{"citext"}
			},
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true,
				Repairs: []Repair{RepairKVRecord, RepairOwnerMetadata, RepairAdminMember, RepairRole, RepairOwner, RepairConnect, RepairExtensions}},
		},
		"AdminLacksADMINOPTION: membership repair refused, nothing repaired": {
			o: func(o *Observation) {
				o.R.AdminMember, o.R.AdminCanAdmin = false, false
				o.DB.PublicConnect = true
			},
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, Reason: ReasonInsufficientPrivileges, KVOurs: true, RoleOurs: true, DBOurs: true},
			msg:  `GRANT "shop" TO <the admin role> WITH ADMIN OPTION`,
		},
		"AdminLacksADMINOPTION: attribute repair refused": {
			o:    func(o *Observation) { o.R.AttributesOK, o.R.AdminCanAdmin = false, false },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, Reason: ReasonInsufficientPrivileges, KVOurs: true, RoleOurs: true, DBOurs: true},
			msg:  "ADMIN OPTION",
		},
		"AdminLacksADMINOPTION but nothing needs it": {
			o:    func(o *Observation) { o.R.AdminCanAdmin = false; o.DB.PublicConnect = true },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairConnect}},
		},
		"RoleOursNoDatabaseNoMembershipNoADMINOPTION": {
			o: func(o *Observation) {
				o.DB = DBState{}
				o.KV = ourKV(map[string]string{MetaRoleOID: "16383"})
				o.R.AdminMember, o.R.AdminCanAdmin = false, false
				o.Login, o.Installed = LoginAuthOK, nil
			},
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhaseRoleCreated, Reason: ReasonInsufficientPrivileges, KVOurs: true, RoleOurs: true},
			msg:  "to create the database",
		},
		"RoleOursNoDatabaseNoMembership: the membership is granted on Create": {
			o: func(o *Observation) {
				o.DB = DBState{}
				o.KV = ourKV(map[string]string{MetaRoleOID: "16383"})
				o.R.AdminMember = false
				o.Login, o.Installed = LoginAuthOK, nil
			},
			want: out{Phase: v1alpha1.DatabasePhaseRoleCreated, KVOurs: true, RoleOurs: true},
		},
		"EndpointChanged: another port": {
			o:    func(o *Observation) { o.WantData["port"] = "6432" },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonEndpointChanged},
			msg:  `port "5432" (now "6432")`,
		},
		"EndpointChanged: another host, even while the record is ours": {
			o:    func(o *Observation) { o.WantData["host"], o.WantData["hostaddr"] = "evil", "198.51.100.7" },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonEndpointChanged},
			msg:  "only to the endpoint recorded with it",
		},
		"EndpointChanged: weaker sslmode": {
			o:    func(o *Observation) { o.WantData["sslmode"] = "require" },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonEndpointChanged},
			msg:  `sslmode "verify-full" (now the weaker "require")`,
		},
		"RecordFieldsAlteredButEndpointRecorded: a record repair": {
			// The endpoint the credential was made for is in the record's
			// metadata: an edited port field is drift of the record, not a
			// changed endpoint.
			o:    func(o *Observation) { o.KV.Data["port"] = "1" },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairKVRecord}},
		},
		"EndpointChanged per the record's metadata although its fields were edited to match": {
			o: func(o *Observation) {
				o.WantData["host"], o.KV.Data["host"] = "evil", "evil"
			},
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonEndpointChanged},
			msg:  `host "db" (now "evil")`,
		},
		"NoHostaddrRecordedByAbsence": {
			o: func(o *Observation) {
				o.Identity.Endpoint["hostaddr"], o.WantData["hostaddr"], o.KV.Data["hostaddr"] = "", "", ""
				delete(o.KV.Owner, MetaEndpointPrefix+"hostaddr")
			},
			want: out{Exists: true, UpToDate: true, Ready: true, Phase: v1alpha1.DatabasePhaseReady, KVOurs: true, RoleOurs: true, DBOurs: true},
		},
		"HostaddrAddedLaterIsAChangedEndpoint": {
			o:    func(o *Observation) { delete(o.KV.Owner, MetaEndpointPrefix+"hostaddr") },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonEndpointChanged},
			msg:  `hostaddr "" (now "192.0.2.1")`,
		},
		"StrongerSSLModeIsARecordRepair": {
			o: func(o *Observation) {
				o.KV.Data["sslmode"], o.KV.Owner[MetaEndpointPrefix+"sslmode"] = "verify-ca", "verify-ca"
			},
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairKVRecord, RepairOwnerMetadata}},
		},
		"ExtraKVKey is drift": {
			o:    func(o *Observation) { o.KV.Data["uri"] = "postgres://..." },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairKVRecord}},
		},
		"ElevatedRoleIsReportedNotRepaired": {
			o:    func(o *Observation) { o.R.AttributesOK, o.R.Elevated = false, true },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true},
			msg:  "only a superuser",
		},
		"ForeignKVRecord": {
			o: func(o *Observation) {
				o.KV = KVState{Present: true, Owner: map[string]string{MetaManagedBy: ManagedBy, MetaUID: "uid-old", MetaName: "shop"}, Data: withPassword(want())}
				o.DB, o.R, o.Login = DBState{}, RoleState{}, LoginNotTried
			},
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict},
			msg:  "belongs to Database shop (uid uid-old)",
		},
		"UnmanagedKVRecord": {
			o: func(o *Observation) {
				o.KV = KVState{Present: true, Data: map[string]string{"password": "x"}}
				o.DB, o.R, o.Login = DBState{}, RoleState{}, LoginNotTried
			},
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict},
			msg:  "something this provider did not create",
		},
		"ExistingRoleWithoutOurCredential": {
			o:    func(o *Observation) { o.KV, o.DB, o.Login = KVState{}, DBState{}, LoginNotTried },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict},
			msg:  `the role "shop" exists and this Database has no credential that proves it created it. Nothing is proven this Database's.`,
		},
		"ExistingRoleRefusesOurCredential": {
			o:    func(o *Observation) { o.KV = ourKV(nil); o.DB, o.Login = DBState{}, LoginRefused },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict, KVOurs: true},
			msg:  `Not proven this Database's: the role "shop" exists and this Database's credential does not log in as it. Proven this Database's: its credential record`,
		},
		"ExistingDatabaseOfSomeoneElse": {
			o: func(o *Observation) {
				o.KV, o.R, o.Login = KVState{}, RoleState{}, LoginNotTried
				o.DB = DBState{Exists: true, OID: 99, Owner: "legacy", AllowConn: true}
			},
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict},
			msg:  `the database "shop" exists, owned by "legacy"`,
		},
		"DatabaseOwnedByOurRoleButAnotherOID": {
			o:    func(o *Observation) { o.DB.OID = 20000 },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict, KVOurs: true, RoleOurs: true},
			msg:  `dropped and re-created by someone else?). Proven this Database's: its credential record postgresql-databases/shop, the role "shop" (OID 16383).`,
		},
		"RetainedThenRequestedAgain (new UID)": {
			o:    func(o *Observation) { o.Identity.UID = "uid-2" },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict},
			msg:  "import it",
		},
		"CannotVerifyNow": {
			o:    func(o *Observation) { o.KV = ourKV(nil); o.Login = LoginUnavailable },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhaseCredentialCreated, Reason: ReasonDependencyUnavailable, KVOurs: true},
			msg:  "nothing was changed",
		},
		"OursButLoginUnavailable": {
			o:    func(o *Observation) { o.Login = LoginUnavailable },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, Reason: ReasonDependencyUnavailable, KVOurs: true, RoleOurs: true, DBOurs: true},
		},
		"RoleOursByOIDRefusesTheRecordsPassword: the role gets the record's back": {
			o:    func(o *Observation) { o.Login = LoginRefused; o.Installed = nil; o.Requested = nil },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairPassword}},
			msg:  "set the login role's password back to the credential record's",
		},
		"RecordFieldsEditedAndPasswordRefused: both repaired, the record's password kept": {
			o: func(o *Observation) {
				o.Login, o.Installed, o.Requested = LoginRefused, nil, nil
				o.KV.Data["host"] = "elsewhere.example"
			},
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairKVRecord, RepairPassword}},
		},
		"PasswordRefusedWithoutAdminOption": {
			o: func(o *Observation) {
				o.Login, o.Installed, o.Requested = LoginRefused, nil, nil
				o.R.AdminCanAdmin = false
			},
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, Reason: ReasonInsufficientPrivileges, KVOurs: true, RoleOurs: true, DBOurs: true},
			msg:  "WITH ADMIN OPTION",
		},
		"RoleLimitFull: the password is proven, Ready, nothing to install": {
			o:    func(o *Observation) { o.Login, o.Installed = LoginLimitFull, nil },
			want: out{Exists: true, UpToDate: true, Ready: true, Phase: v1alpha1.DatabasePhaseReady, KVOurs: true, RoleOurs: true, DBOurs: true},
			msg:  "every session its connection limit allows is in use",
		},
		"MarkedTemplateByItsOwner": {
			o:    func(o *Observation) { o.DB.IsTemplate = true },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairDatabase}},
			msg:  "reset the database's template flag",
		},
		"DatabaseConnectionLimitSetByItsOwner": {
			o:    func(o *Observation) { o.DB.ConnLimited = true },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairDatabase}},
		},
		"RecordVersionDeleted (metadata only, ours)": {
			o:    func(o *Observation) { o.KV.Data = nil; o.Login = LoginNotTried; o.Installed = nil; o.Requested = nil },
			want: out{Exists: true, Phase: v1alpha1.DatabasePhaseDatabaseCreated, KVOurs: true, RoleOurs: true, DBOurs: true, Repairs: []Repair{RepairKVRecord}},
		},
		"NamesChanged: database (edited around validation, or restored)": {
			o:    func(o *Observation) { o.Database, o.WantData["database"] = "shop2", "shop2" },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonImmutableField},
			msg:  `spec.forProvider.database is "shop2" but this Database provisioned "shop"`,
		},
		"NamesChanged: login role": {
			o:    func(o *Observation) { o.Role, o.WantData["username"] = "shop_owner", "shop_owner" },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonImmutableField},
			msg:  `is "shop_owner" but this Database provisioned "shop"`,
		},
		"NamesChanged while deleting: nothing is ours to drop": {
			o:    func(o *Observation) { o.Deleting = true; o.Database, o.DB = "shop2", DBState{} },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonImmutableField},
			msg:  "nothing was written, created or dropped",
		},
		"NamesChanged: the record's database field edited": {
			o:    func(o *Observation) { o.KV.Data["database"] = "elsewhere" },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonImmutableField},
			msg:  "its fields in OpenBao",
		},
		"DatabaseVanished: provisioned (OID on record), now gone": {
			o:    func(o *Observation) { o.DB, o.Login, o.Installed = DBState{}, LoginAuthOK, nil },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonDatabaseVanished, KVOurs: true, RoleOurs: true},
			msg:  `the database "shop" that this Database created (OID 16384) no longer exists`,
		},
		"DatabaseVanished with its role": {
			o:    func(o *Observation) { o.DB, o.R, o.Login, o.Installed = DBState{}, RoleState{}, LoginNotTried, nil },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonDatabaseVanished, KVOurs: true},
			msg:  "Restore it from a backup",
		},
		"DatabaseVanished while deleting (dropped by an interrupted Delete): the rest goes": {
			o:    func(o *Observation) { o.Deleting = true; o.DB, o.Login, o.Installed = DBState{}, LoginAuthOK, nil },
			want: out{Phase: v1alpha1.DatabasePhaseRoleCreated, KVOurs: true, RoleOurs: true},
		},
		"RoleDroppedAndRecreatedBySomeoneElse": {
			o:    func(o *Observation) { o.R.OID = 99999 },
			want: out{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict, KVOurs: true, DBOurs: true},
			msg:  `the role "shop" exists with OID 99999`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			tc.o(&o)
			v := Decide(o)
			got := out{Exists: v.Exists, UpToDate: v.UpToDate, Ready: v.Ready, Phase: v.Phase, Reason: v.Reason, KVOurs: v.KVOurs, RoleOurs: v.RoleOurs, DBOurs: v.DBOurs, Repairs: v.Repairs}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decide(): -want +got:\n%s\nmessage: %s", diff, v.Message)
			}
			if tc.msg != "" && !strings.Contains(v.Message, tc.msg) {
				t.Errorf("message %q lacks %q", v.Message, tc.msg)
			}
			if v.Reason == ReasonConflict && (len(v.Repairs) > 0 || !v.Exists || !v.UpToDate) {
				t.Error("a Conflict must neither create nor repair")
			}
		})
	}
}

func TestDecideImport(t *testing.T) {
	cases := map[string]struct {
		o     func(*Observation)
		ready bool
		diffs []string
	}{
		"Matches": {o: func(*Observation) {}, ready: true},
		"Differences": {
			o: func(o *Observation) {
				o.DB.Owner, o.DB.PublicConnect = "legacy", true
				o.R.AttributesOK = false
				o.Requested = []string{"pg_trgm", "citext"}
			},
			diffs: []string{`owned by "legacy"`, "PUBLIC may connect", "does not have exactly", "extensions not installed: [citext]"},
		},
		"CredentialDoesNotLogIn": {o: func(o *Observation) { o.Login = LoginRefused }, diffs: []string{"does not log in"}},
		"NoCredential":           {o: func(o *Observation) { o.KV = KVState{} }, diffs: []string{"no credential at"}},
		"NoDatabase":             {o: func(o *Observation) { o.DB = DBState{} }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			o.Import = true
			// An imported record need not carry this provider's metadata.
			o.KV.Owner = nil
			tc.o(&o)
			v := Decide(o)
			if v.Ready != tc.ready || len(v.Repairs) != 0 || !v.UpToDate {
				t.Errorf("ready %v repairs %v upToDate %v: an import is read-only", v.Ready, v.Repairs, v.UpToDate)
			}
			for _, d := range tc.diffs {
				if !strings.Contains(strings.Join(v.Differences, "\n"), d) {
					t.Errorf("differences %q lack %q", v.Differences, d)
				}
			}
			if !tc.ready && v.Reason != ReasonImportDifferences {
				t.Errorf("reason %q, want ImportDifferences", v.Reason)
			}
		})
	}
}

func TestDecideImportOwnershipForDelete(t *testing.T) {
	o := base()
	o.Import = true
	o.KV.Owner = nil
	if v := Decide(o); !v.KVOurs || !v.RoleOurs || !v.DBOurs {
		t.Errorf("a proven import: kv %v role %v db %v", v.KVOurs, v.RoleOurs, v.DBOurs)
	}
	o.Login = LoginRefused
	if v := Decide(o); v.RoleOurs || v.DBOurs || v.KVOurs {
		t.Error("an import whose credential does not log in counts as droppable")
	}
	o.Login, o.DB.Owner = LoginOK, "someone"
	if v := Decide(o); !v.RoleOurs || v.DBOurs {
		t.Error("an imported database owned by another role counts as droppable")
	}
}

func TestDecideImportWithUpdate(t *testing.T) {
	o := base()
	o.Import, o.ImportUpdate = true, true
	o.KV.Owner = nil
	o.DB.Owner, o.DB.PublicConnect, o.DB.RoleConnect = "legacy", true, false
	o.Requested = []string{"pg_trgm", "citext"}
	v := Decide(o)
	want := []Repair{RepairOwner, RepairConnect, RepairExtensions}
	if diff := cmp.Diff(want, v.Repairs); diff != "" || v.UpToDate || v.Reason != "" {
		t.Errorf("repairs -want +got:\n%s upToDate %v reason %q", diff, v.UpToDate, v.Reason)
	}
	// Without a credential that logs in, nothing is repaired.
	o.Login = LoginRefused
	if v := Decide(o); len(v.Repairs) != 0 || !v.UpToDate || v.Reason != ReasonImportDifferences {
		t.Errorf("unproven import: repairs %v upToDate %v reason %q", v.Repairs, v.UpToDate, v.Reason)
	}
}

// TestDecideImportDatabaseAttributes: a template flag or a connection
// limit on an imported database is a difference like its owner or CONNECT:
// reported and left alone by a read-only import, repaired by one whose
// policies allow Update once its credential logs in.
func TestDecideImportDatabaseAttributes(t *testing.T) {
	type out struct {
		Ready, UpToDate bool
		Reason          string
		Repairs         []Repair
		Differences     []string
	}
	const (
		template = "the database is marked a template (datistemplate is true): any role with CREATEDB may copy it"
		limit    = "the database has a connection limit of its own (datconnlimit is not -1)"
	)
	cases := map[string]struct {
		o    func(*Observation)
		want out
		msg  string
	}{
		"read-only, template": {
			o:    func(o *Observation) { o.DB.IsTemplate = true },
			want: out{UpToDate: true, Reason: ReasonImportDifferences, Differences: []string{template}},
			msg:  "imported read-only; nothing was changed. Differences: " + template,
		},
		"read-only, connection limit": {
			o:    func(o *Observation) { o.DB.ConnLimited = true },
			want: out{UpToDate: true, Reason: ReasonImportDifferences, Differences: []string{limit}},
			msg:  "imported read-only; nothing was changed. Differences: " + limit,
		},
		"read-only, both": {
			o:    func(o *Observation) { o.DB.IsTemplate, o.DB.ConnLimited = true, true },
			want: out{UpToDate: true, Reason: ReasonImportDifferences, Differences: []string{template, limit}},
		},
		"Update, template": {
			o:    func(o *Observation) { o.ImportUpdate, o.DB.IsTemplate = true, true },
			want: out{Repairs: []Repair{RepairDatabase}, Differences: []string{template}},
			msg:  "imported with Update allowed: repairing " + string(RepairDatabase),
		},
		"Update, connection limit": {
			o:    func(o *Observation) { o.ImportUpdate, o.DB.ConnLimited = true, true },
			want: out{Repairs: []Repair{RepairDatabase}, Differences: []string{limit}},
		},
		"Update, both, with another owner": {
			o: func(o *Observation) {
				o.ImportUpdate, o.DB.IsTemplate, o.DB.ConnLimited, o.DB.Owner = true, true, true, "legacy"
			},
			want: out{Repairs: []Repair{RepairOwner, RepairDatabase}, Differences: []string{`the database is owned by "legacy", not "shop"`, template, limit}},
		},
		"Update, template, credential refused: reported, nothing repaired": {
			o: func(o *Observation) {
				o.ImportUpdate, o.DB.IsTemplate, o.Login, o.Installed = true, true, LoginRefused, nil
			},
			want: out{UpToDate: true, Reason: ReasonImportDifferences,
				Differences: []string{template, `the credential at postgresql-databases/shop does not log in as "shop"`}},
			msg: "imported with Update allowed; nothing was changed (an import is repaired only once its credential logs in as its role)",
		},
		"Update, connection limit full: reported, nothing repaired": {
			o: func(o *Observation) {
				o.ImportUpdate, o.DB.ConnLimited, o.Login, o.Installed = true, true, LoginLimitFull, nil
			},
			want: out{UpToDate: true, Reason: ReasonImportDifferences, Differences: []string{limit}},
			msg:  "every session the role's or the database's connection limit allows is in use",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			o.Import = true
			o.KV.Owner = nil
			tc.o(&o)
			v := Decide(o)
			got := out{Ready: v.Ready, UpToDate: v.UpToDate, Reason: v.Reason, Repairs: v.Repairs, Differences: v.Differences}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decide(): -want +got:\n%s\nmessage: %s", diff, v.Message)
			}
			if tc.msg != "" && !strings.Contains(v.Message, tc.msg) {
				t.Errorf("message %q lacks %q", v.Message, tc.msg)
			}
		})
	}
}

// TestDecideImportMessages: an import's Ready condition says read-only only
// when its policies lack Update.
func TestDecideImportMessages(t *testing.T) {
	type out struct {
		Ready   bool
		Reason  string
		Message string
	}
	const diffs = "Differences: PUBLIC may connect to the database"
	cases := map[string]struct {
		update bool
		o      func(*Observation)
		want   out
	}{
		"read-only, matches": {
			o:    func(*Observation) {},
			want: out{Ready: true, Message: `imported read-only: database "shop", role "shop" and the credential at postgresql-databases/shop match`},
		},
		"Update, matches": {
			update: true,
			o:      func(*Observation) {},
			want:   out{Ready: true, Message: `imported with Update allowed: database "shop", role "shop" and the credential at postgresql-databases/shop match; drift is repaired`},
		},
		"read-only, differs": {
			o:    func(o *Observation) { o.DB.PublicConnect = true },
			want: out{Reason: ReasonImportDifferences, Message: "imported read-only; nothing was changed. " + diffs},
		},
		"Update, differs: repairing": {
			update: true,
			o:      func(o *Observation) { o.DB.PublicConnect = true },
			want:   out{Message: "imported with Update allowed: repairing " + string(RepairConnect) + ". " + diffs},
		},
		"Update, differs, no credential": {
			update: true,
			o: func(o *Observation) {
				o.DB.PublicConnect, o.KV, o.Login, o.Installed = true, KVState{}, LoginNotTried, nil
			},
			want: out{Reason: ReasonImportDifferences, Message: "imported with Update allowed; nothing was changed (an import is repaired only once its credential logs in as its role). " +
				diffs + "; no credential at postgresql-databases/shop"},
		},
		"Update, differs, role elevated": {
			update: true,
			o:      func(o *Observation) { o.R.AttributesOK, o.R.Elevated = false, true },
			want: out{Reason: ReasonImportDifferences, Message: `imported with Update allowed; nothing was changed (the role "shop" has been given SUPERUSER, REPLICATION or BYPASSRLS, which only a superuser can take away). ` +
				`Differences: the role "shop" does not have exactly LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			o.Import, o.ImportUpdate = true, tc.update
			o.KV.Owner = nil
			tc.o(&o)
			v := Decide(o)
			if diff := cmp.Diff(tc.want, out{Ready: v.Ready, Reason: v.Reason, Message: v.Message}); diff != "" {
				t.Errorf("Decide(): -want +got:\n%s", diff)
			}
			if tc.update && strings.Contains(v.Message, "read-only") {
				t.Errorf("an import with Update allowed says read-only: %q", v.Message)
			}
		})
	}
}

func TestOwnerMetadataAndPath(t *testing.T) {
	if !KVOurs(KVState{Present: true, Owner: OwnerMetadata(me)}, me) {
		t.Error("our own metadata is not ours")
	}
	if KVOurs(KVState{Present: true, Owner: OwnerMetadata(Identity{})}, Identity{}) {
		t.Error("an empty UID proves ownership")
	}
	if got := CredentialPath("postgresql-databases", "db"); got != "postgresql-databases/db" {
		t.Errorf("CredentialPath() = %q", got)
	}
}

// TestImportOfAnotherDatabasesRecord: an import naming a record whose
// ownership metadata names another Database takes nothing from it: a
// Conflict, nothing ours (a deletion drops nothing), no login with it.
func TestImportOfAnotherDatabasesRecord(t *testing.T) {
	other := Identity{Name: "victim", UID: "uid-victim", ConfigName: "shared", ConfigUID: "cfg-1", Endpoint: me.Endpoint}
	cases := map[string]struct {
		owner   map[string]string
		foreign bool
	}{
		"AnotherDatabase":              {owner: OwnerMetadata(other), foreign: true},
		"SameUIDOtherName":             {owner: func() map[string]string { m := OwnerMetadata(me); m[MetaName] = "victim"; return m }(), foreign: true},
		"ManagedByUsWithoutUID (copy)": {owner: map[string]string{MetaManagedBy: ManagedBy, "binding-name": "db"}, foreign: true},
		"WrittenByHand":                {owner: nil},
		"SomeoneElsesMetadata":         {owner: map[string]string{MetaManagedBy: "someone", MetaUID: "x"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			o.Import, o.ImportUpdate = true, true
			o.KV.Owner = tc.owner
			o.DB.PublicConnect = true // a difference an import with Update would repair
			v := Decide(o)
			if !tc.foreign {
				if v.Reason == ReasonConflict || !v.KVOurs || !MayLogin(o) {
					t.Errorf("a record without our metadata naming another Database: reason %q, kvOurs %v, mayLogin %v", v.Reason, v.KVOurs, MayLogin(o))
				}
				return
			}
			if v.Reason != ReasonConflict || v.KVOurs || v.RoleOurs || v.DBOurs || len(v.Repairs) != 0 || !v.Exists || !v.UpToDate {
				t.Errorf("Decide() = %+v, want a Conflict that owns, repairs and creates nothing", v)
			}
			if !strings.Contains(v.Message, "nothing was read from it, changed or dropped") {
				t.Errorf("message %q", v.Message)
			}
			if MayLogin(o) {
				t.Error("MayLogin() with another Database's record")
			}
			// Even at a changed endpoint, the record is not this import's.
			o.WantData["port"] = "6432"
			if v := Decide(o); v.Reason != ReasonConflict {
				t.Errorf("at a changed endpoint: reason %q, want Conflict", v.Reason)
			}
		})
	}
}

func TestMayLogin(t *testing.T) {
	cases := map[string]struct {
		o    func(*Observation)
		want bool
	}{
		"OwnRecord":                   {o: func(*Observation) {}, want: true},
		"NoPassword":                  {o: func(o *Observation) { delete(o.KV.Data, "password") }},
		"EndpointChanged":             {o: func(o *Observation) { o.WantData["host"] = "elsewhere" }},
		"NamesChanged":                {o: func(o *Observation) { o.Role, o.WantData["username"] = "x", "x" }},
		"AnotherDatabasesRecord":      {o: func(o *Observation) { o.Identity.UID = "uid-2" }},
		"RecordByHand (provisioning)": {o: func(o *Observation) { o.KV.Owner = nil }},
		"RecordByHand (import)":       {o: func(o *Observation) { o.Import, o.KV.Owner = true, nil }, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base()
			tc.o(&o)
			if got := MayLogin(o); got != tc.want {
				t.Errorf("MayLogin() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBindingOf(t *testing.T) {
	old := &v1alpha1.ClaimReference{Namespace: "team", Name: "shop", UID: "t-0"}
	claim := &v1alpha1.ClaimReference{Namespace: "team", Name: "shop", UID: "t-1"}
	reserved := &v1alpha1.ClaimReference{Namespace: "team", Name: "shop"}
	cases := map[string]struct {
		claim    *v1alpha1.ClaimReference
		recorded v1alpha1.BindingStatus
		live     bool
		want     v1alpha1.BindingStatus
	}{
		"NoClaim":                       {want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingAvailable}},
		"NoClaimAfterRelease (cleared)": {recorded: v1alpha1.BindingStatus{Phase: v1alpha1.BindingReleased, Claim: "team/shop", ReleasedClaim: old}, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingAvailable, ReleasedClaim: old}},
		"Reserved":                      {claim: reserved, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingAvailable, Claim: "team/shop"}},
		"ReservedIgnoresLive":           {claim: reserved, live: true, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingAvailable, Claim: "team/shop"}},
		"Bound":                         {claim: claim, live: true, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingBound, Claim: "team/shop"}},
		"BoundKeepsAnEarlierRelease":    {claim: claim, live: true, recorded: v1alpha1.BindingStatus{ReleasedClaim: old}, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingBound, Claim: "team/shop", ReleasedClaim: old}},
		"Released":                      {claim: claim, recorded: v1alpha1.BindingStatus{Phase: v1alpha1.BindingBound, Claim: "team/shop"}, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingReleased, Claim: "team/shop", ReleasedClaim: claim}},
		"ReleasedNeverSeenBound":        {claim: claim, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingReleased, Claim: "team/shop", ReleasedClaim: claim}},
		// A binding of the same Tenant written again (its Composition
		// recreates the one the app deleted) never turns Released into
		// Bound: only an admin's claimRef edit does.
		"ReleasedStaysReleasedForItsTenant": {claim: claim, live: true, recorded: v1alpha1.BindingStatus{Phase: v1alpha1.BindingReleased, Claim: "team/shop", ReleasedClaim: claim}, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingReleased, Claim: "team/shop", ReleasedClaim: claim}},
		// The admin cleared the claim (Available) and set it again: the
		// Tenant's binding binds it.
		"RebindAfterTheAdminsEdit": {claim: claim, live: true, recorded: v1alpha1.BindingStatus{Phase: v1alpha1.BindingAvailable, ReleasedClaim: claim}, want: v1alpha1.BindingStatus{Phase: v1alpha1.BindingBound, Claim: "team/shop", ReleasedClaim: claim}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, BindingOf(tc.claim, tc.recorded, tc.live)); diff != "" {
				t.Errorf("BindingOf(): -want +got:\n%s", diff)
			}
		})
	}
}

func TestClaimants(t *testing.T) {
	now := metav1.Now()
	b := func(ns, uid string, deleting bool) v1alpha1.DatabaseBinding {
		x := v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}
		x.Spec.ForProvider.Tenant = v1alpha1.TenantReference{Name: "shop", UID: uid}
		if deleting {
			x.DeletionTimestamp = &now
		}
		return x
	}
	claim := &v1alpha1.ClaimReference{Namespace: "team", Name: "shop", UID: "t-1"}
	cases := map[string]struct {
		bindings []v1alpha1.DatabaseBinding
		claim    *v1alpha1.ClaimReference
		want     int
	}{
		"OfTheClaim":             {bindings: []v1alpha1.DatabaseBinding{b("team", "t-1", false)}, claim: claim, want: 1},
		"Deleting":               {bindings: []v1alpha1.DatabaseBinding{b("team", "t-1", true)}, claim: claim, want: 1},
		"NewTenantOfTheSameName": {bindings: []v1alpha1.DatabaseBinding{b("team", "t-2", false)}, claim: claim},
		"OtherNamespace":         {bindings: []v1alpha1.DatabaseBinding{b("other", "t-1", false)}, claim: claim},
		"None":                   {claim: claim},
		"ReservedHasNoClaimant":  {bindings: []v1alpha1.DatabaseBinding{b("team", "", false)}, claim: &v1alpha1.ClaimReference{Namespace: "team", Name: "shop"}},
		"NoClaim":                {bindings: []v1alpha1.DatabaseBinding{b("team", "t-1", false)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := len(Claimants(tc.bindings, tc.claim)); got != tc.want {
				t.Errorf("len(Claimants()) = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLiveBinding(t *testing.T) {
	c := func(s Standing, deleting bool) Claimant { return Claimant{Standing: s, Deleting: deleting} }
	cases := map[string]struct {
		claimants []Claimant
		released  bool
		want      Claimancy
	}{
		"None":           {want: ClaimNone},
		"TenantsBinding": {claimants: []Claimant{c(StandingTenants, false)}, want: ClaimLive},
		// A forged binding holds nothing, deleted or not, released or not.
		"ForgedHoldsNothing":         {claimants: []Claimant{c(StandingForged, false)}, want: ClaimNone},
		"ForgedBeingDeleted":         {claimants: []Claimant{c(StandingForged, true)}, want: ClaimNone},
		"RefsNotWrittenYet":          {claimants: []Claimant{c(StandingForged, false), c(StandingPending, false)}, want: ClaimPending},
		"OneTenantsBindingHolds":     {claimants: []Claimant{c(StandingPending, false), c(StandingForged, false), c(StandingTenants, false)}, want: ClaimLive},
		"PendingBeingDeletedHoldsNo": {claimants: []Claimant{c(StandingPending, true)}, want: ClaimNone},
		// The binder has a release to make: neither Bound nor Released is
		// shown, and a deletion waits, until it is made.
		"TenantsBeingDeleted":         {claimants: []Claimant{c(StandingTenants, true)}, want: ClaimPending},
		"TenantGone":                  {claimants: []Claimant{c(StandingGone, false)}, want: ClaimPending},
		"TenantsBeingDeletedReleased": {claimants: []Claimant{c(StandingTenants, true)}, released: true, want: ClaimNone},
		"TenantGoneReleased":          {claimants: []Claimant{c(StandingGone, false)}, released: true, want: ClaimNone},
		// Released is held by nobody, not even by a new binding of the
		// Tenant that released it (or one not listed yet): a deletion of
		// the Database does not wait for it.
		"TenantsNewBindingAfterRelease": {claimants: []Claimant{c(StandingTenants, false)}, released: true, want: ClaimNone},
		"PendingAfterRelease":           {claimants: []Claimant{c(StandingPending, false)}, released: true, want: ClaimNone},
		"DeletedAndNewAfterRelease":     {claimants: []Claimant{c(StandingTenants, true), c(StandingTenants, false)}, released: true, want: ClaimNone},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := LiveBinding(tc.claimants, tc.released); got != tc.want {
				t.Errorf("LiveBinding() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecideDeletion(t *testing.T) {
	claim := &v1alpha1.ClaimReference{Namespace: "team", Name: "shop", UID: "t-1"}
	cases := map[string]struct {
		reclaim  v1alpha1.ReclaimPolicy
		policies bool
		claim    *v1alpha1.ClaimReference
		live     bool
		want     DeletionVerdict
		msg      string
	}{
		"RetainDropsNothing":        {reclaim: v1alpha1.ReclaimRetain, policies: true, want: DeletionVerdict{}},
		"DeleteDrops":               {reclaim: v1alpha1.ReclaimDelete, policies: true, want: DeletionVerdict{Drop: true}},
		"DeleteWithoutDeletePolicy": {reclaim: v1alpha1.ReclaimDelete, want: DeletionVerdict{}},
		"ReleasedClaimDeleteDrops":  {reclaim: v1alpha1.ReclaimDelete, policies: true, claim: claim, want: DeletionVerdict{Drop: true}},
		"ReservedClaimDoesNotWait":  {reclaim: v1alpha1.ReclaimDelete, policies: true, claim: &v1alpha1.ClaimReference{Namespace: "team", Name: "shop"}, live: true, want: DeletionVerdict{Drop: true}},
		"BoundWaitsEvenWithDelete":  {reclaim: v1alpha1.ReclaimDelete, policies: true, claim: claim, live: true, want: DeletionVerdict{Wait: true, Reason: ReasonBoundToTenant}, msg: "bound to the Tenant its spec.claimRef names"},
		"BoundWaitsWithRetain":      {reclaim: v1alpha1.ReclaimRetain, policies: true, claim: claim, live: true, want: DeletionVerdict{Wait: true, Reason: ReasonBoundToTenant}, msg: "nothing was dropped"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideDeletion(tc.reclaim, tc.policies, tc.claim, tc.live)
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message %q lacks %q", got.Message, tc.msg)
			}
			got.Message = ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecideDeletion(): -want +got:\n%s", diff)
			}
		})
	}
}
