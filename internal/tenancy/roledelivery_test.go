package tenancy

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func roleSource(name string) BindingKV {
	d := sourceData()
	d["username"] = "orders_" + name
	return BindingKV{Present: true, Data: d, Version: 2,
		Owner: map[string]string{MetaManagedBy: ManagedBy, MetaName: "orders", MetaUID: "d-1", MetaDataRole: name, MetaDataAccess: "readWrite"}}
}

func roleCopy(s BindingSpec, name string) BindingKV {
	o := DeliveryOwner(s, "orders", "d-1", 2)
	o[MetaDataRole] = name
	d := sourceData()
	d["username"] = "orders_" + name
	return BindingKV{Present: true, Data: d, Owner: o, Version: 1}
}

// roleObs is a wanted readWrite role "app" of a Database that lists it and
// shows it Ready, with its record read and no copy yet.
func roleObs(s BindingSpec, mut ...func(*RoleDeliveryObservation)) RoleDeliveryObservation {
	o := RoleDeliveryObservation{
		Name: "app", Wanted: true, Access: v1alpha1.DataReadWrite,
		OnDatabase: true, DatabaseAccess: v1alpha1.DataReadWrite, DatabaseReady: true,
		Delivery: DeliveryObservation{Spec: s, DatabaseName: "orders", DatabaseUID: "d-1",
			SourcePath: DataRolePath("postgresql-databases/orders", "app"), Source: roleSource("app"),
			CopyPath: DataRoleDeliveryPath("postgresql-tenants/shop/shop", "app")},
	}
	for _, m := range mut {
		m(&o)
	}
	return o
}

func TestDecideRoleDelivery(t *testing.T) {
	s := dynamicSpec()
	unwanted := func(o *RoleDeliveryObservation) { o.Wanted, o.Access = false, "" }
	copied := func(o *RoleDeliveryObservation) { o.Delivery.Copy = roleCopy(s, "app") }
	cases := map[string]struct {
		o      RoleDeliveryObservation
		static bool
		want   RoleDeliveryAction
		reason string
		msg    string
	}{
		"NewCopyIsWritten":  {o: roleObs(s), want: RoleWrite, reason: ReasonDelivering},
		"CopyInSync":        {o: roleObs(s, copied), want: RoleInSync},
		"NewVersionCopied":  {o: roleObs(s, copied, func(o *RoleDeliveryObservation) { o.Delivery.Source.Version = 3 }), want: RoleWrite, reason: ReasonDelivering},
		"DynamicAddsToDB":   {o: roleObs(s, func(o *RoleDeliveryObservation) { o.OnDatabase, o.DatabaseAccess = false, "" }), want: RoleAdd, reason: ReasonDataRoleNotReady},
		"StaticNeverAdds":   {o: roleObs(s, func(o *RoleDeliveryObservation) { o.OnDatabase, o.DatabaseAccess = false, "" }), static: true, want: RoleRefuse, reason: ReasonDataRoleUnavailable, msg: "platform team"},
		"NotReadyYetWaits":  {o: roleObs(s, func(o *RoleDeliveryObservation) { o.DatabaseReady = false }), want: RoleWait, reason: ReasonDataRoleNotReady},
		"OtherAccessStatic": {o: roleObs(s, func(o *RoleDeliveryObservation) { o.DatabaseAccess = v1alpha1.DataReadOnly }), static: true, want: RoleRefuse, reason: ReasonDataRoleUnavailable, msg: "has access readOnly"},
		// Removed and re-added with another access before the removal
		// finished: never changed in place.
		"OtherAccessDynamic": {o: roleObs(s, func(o *RoleDeliveryObservation) { o.DatabaseAccess = v1alpha1.DataReadOnly }), want: RoleRefuse, reason: ReasonDataRoleUnavailable, msg: "remove it from the Tenant"},
		// The Database's status says Ready, but the record at the role's
		// path was written for another entry (or is the owner's): not
		// handed out.
		"RecordOfAnotherRoleRefused": {o: roleObs(s, func(o *RoleDeliveryObservation) { o.Delivery.Source = roleSource("report") }), want: RoleRefuse, reason: ReasonCredentialProjectionFailed, msg: "not written for data role app"},
		"OwnersRecordRefused": {o: roleObs(s, func(o *RoleDeliveryObservation) {
			o.Delivery.Source.Owner = map[string]string{MetaManagedBy: ManagedBy, MetaName: "orders", MetaUID: "d-1"}
		}), want: RoleRefuse, reason: ReasonCredentialProjectionFailed},
		"RecordOfAnotherDatabaseRefused": {o: roleObs(s, func(o *RoleDeliveryObservation) { o.Delivery.Source.Owner[MetaUID] = "d-2" }), want: RoleRefuse, reason: ReasonCredentialProjectionFailed},
		"CopyPathTakenRefused": {o: roleObs(s, func(o *RoleDeliveryObservation) {
			o.Delivery.Copy = BindingKV{Present: true, Owner: map[string]string{"someone": "else"}, Data: map[string]string{"x": "y"}, Version: 1}
		}), want: RoleRefuse, reason: ReasonConflict},
		"NoRecordYet": {o: roleObs(s, func(o *RoleDeliveryObservation) { o.Delivery.Source = BindingKV{} }), want: RoleRefuse, reason: ReasonCredentialProjectionFailed},
		// Removal: the Secret first, then the copy, then the role.
		"RemovedWithReadersWaits": {o: roleObs(s, unwanted, copied, func(o *RoleDeliveryObservation) { o.Readers = []string{"shop-app"} }), want: RoleWait, reason: ReasonWaitingForExternalSecret, msg: "ExternalSecret shop-app"},
		"RemovedCopyDeleted":      {o: roleObs(s, unwanted, copied), want: RoleDeleteCopy},
		"RemovedThenDropped":      {o: roleObs(s, unwanted), want: RoleRemove},
		"StaticKeepsAdminsRole":   {o: roleObs(s, unwanted), static: true, want: RoleNone},
		"CopyOfAnotherKept": {o: roleObs(s, unwanted, func(o *RoleDeliveryObservation) {
			o.OnDatabase = false
			o.Delivery.Copy = BindingKV{Present: true, Owner: map[string]string{"someone": "else"}, Version: 1}
		}), want: RoleNone},
		"GoneEverywhere": {o: roleObs(s, unwanted, func(o *RoleDeliveryObservation) { o.OnDatabase = false }), want: RoleNone},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := DecideRoleDelivery(tc.o, tc.static)
			if v.Action != tc.want || v.Reason != tc.reason || !strings.Contains(v.Message, tc.msg) || v.Name != "app" {
				t.Errorf("got %s %q %q; want %s %q containing %q", v.Action, v.Reason, v.Message, tc.want, tc.reason, tc.msg)
			}
			if v.Action == RoleWrite {
				if v.Delivery.Owner[MetaDataRole] != "app" || !CopyOwnedBy(v.Delivery.Owner, s) {
					t.Errorf("copy owner %v: want this binding's, naming data role app", v.Delivery.Owner)
				}
				if v.Delivery.Data["username"] != "orders_app" || len(v.Delivery.Data) != len(CredentialKeys) {
					t.Errorf("copy data keys %v: want the seven keys of the role's record", keysOf(maps.Keys(v.Delivery.Data)))
				}
			}
		})
	}
}

func keysOf(seq func(func(string) bool)) []string {
	var out []string
	seq(func(s string) bool { out = append(out, s); return true })
	return out
}

// Only the wanted roles decide the binding's readiness: the first one (by
// name) not in sync says why.
func TestRoleDeliveriesSummary(t *testing.T) {
	vs := []RoleDeliveryVerdict{
		{Name: "report", Action: RoleWait, Reason: ReasonDataRoleNotReady, Message: "report waits"},
		{Name: "app", Action: RoleInSync},
		{Name: "old", Action: RoleWait, Reason: ReasonWaitingForExternalSecret, Message: "old waits"},
	}
	if ok, reason, msg := RoleDeliveriesSummary(vs, []string{"app", "report"}); ok || reason != ReasonDataRoleNotReady || msg != "report waits" {
		t.Errorf("got %v %q %q; want the report role's wait", ok, reason, msg)
	}
	if ok, _, _ := RoleDeliveriesSummary(vs, []string{"app"}); !ok {
		t.Error("a role no longer wanted must not keep the binding from Ready")
	}
}

// The binder adds and removes only what its verdicts say, and keeps every
// other entry (an admin's limits included) as it is.
func TestDatabaseDataRoles(t *testing.T) {
	lim := &v1alpha1.TenantLimits{}
	cur := []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite, Limits: lim}, {Name: "old", Access: v1alpha1.DataReadOnly}}
	wanted := []v1alpha1.BindingDataRole{{Name: "app", Access: v1alpha1.DataReadWrite}, {Name: "report", Access: v1alpha1.DataReadOnly}}
	vs := []RoleDeliveryVerdict{{Name: "app", Action: RoleInSync}, {Name: "old", Action: RoleRemove}, {Name: "report", Action: RoleAdd}}
	got, changed := DatabaseDataRoles(cur, wanted, vs)
	want := []v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite, Limits: &v1alpha1.TenantLimits{}}, {Name: "report", Access: v1alpha1.DataReadOnly}}
	if diff := cmp.Diff(want, got); diff != "" || !changed {
		t.Errorf("-want +got:\n%s (changed %v)", diff, changed)
	}
	if _, changed := DatabaseDataRoles(cur, wanted, []RoleDeliveryVerdict{{Name: "app", Action: RoleInSync}, {Name: "old", Action: RoleWait}}); changed {
		t.Error("nothing to add or remove must not change the Database")
	}
}

// A dynamic binding's roles are the new Database's from the start.
func TestNewDynamicDatabaseCarriesDataRoles(t *testing.T) {
	s := dynamicSpec()
	s.DataRoles = []v1alpha1.BindingDataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}
	db := NewDynamicDatabase(s, "")
	if diff := cmp.Diff([]v1alpha1.DataRole{{Name: "app", Access: v1alpha1.DataReadWrite}}, db.Spec.ForProvider.DataRoles); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}

func TestDatabaseExtensions(t *testing.T) {
	cases := map[string]struct {
		cur, wanted []string
		want        []string
		changed     bool
	}{
		"nothing asked":                {cur: []string{"pg_trgm"}, want: []string{"pg_trgm"}},
		"all there":                    {cur: []string{"pg_trgm", "citext"}, wanted: []string{"citext", "pg_trgm"}, want: []string{"pg_trgm", "citext"}},
		"one added later":              {cur: []string{"pg_trgm"}, wanted: []string{"pg_trgm", "citext"}, want: []string{"pg_trgm", "citext"}, changed: true},
		"the first one":                {wanted: []string{"citext"}, want: []string{"citext"}, changed: true},
		"one only the Database has":    {cur: []string{"hstore"}, wanted: []string{"citext"}, want: []string{"hstore", "citext"}, changed: true},
		"never removed, kept in order": {cur: []string{"b", "a"}, wanted: []string{"a"}, want: []string{"b", "a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, changed := DatabaseExtensions(tc.cur, tc.wanted)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" || changed != tc.changed {
				t.Errorf("DatabaseExtensions(%v, %v) = %v, %v; want %v, %v (-want +got):\n%s", tc.cur, tc.wanted, got, changed, tc.want, tc.changed, diff)
			}
		})
	}
}

func TestStaticExtensionsProblem(t *testing.T) {
	static := BindingSpec{DatabaseRef: "legacy", Extensions: []string{"citext", "pg_trgm"}}
	dynamic := BindingSpec{Database: "app", Extensions: []string{"citext"}}
	cases := map[string]struct {
		s         BindingSpec
		installed []string
		reason    string
		mentions  string
	}{
		"static, all installed":        {s: static, installed: []string{"plpgsql", "pg_trgm", "citext"}},
		"static, one missing":          {s: static, installed: []string{"plpgsql", "pg_trgm"}, reason: ReasonExtensionsMissing, mentions: "lacks the extensions citext"},
		"static, none asked":           {s: BindingSpec{DatabaseRef: "legacy"}},
		"dynamic: added, not reported": {s: dynamic},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason, msg := StaticExtensionsProblem(tc.s, "legacy", tc.installed)
			if reason != tc.reason || !strings.Contains(msg, tc.mentions) {
				t.Errorf("StaticExtensionsProblem = %q, %q; want %q mentioning %q", reason, msg, tc.reason, tc.mentions)
			}
		})
	}
}
