package tenancy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestValidateLimits(t *testing.T) {
	cases := map[string]struct {
		l    *v1alpha1.TenantLimits
		want string // "" = valid
	}{
		"None":             {},
		"Empty":            {l: &v1alpha1.TenantLimits{}},
		"All":              {l: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](10), StatementTimeout: ptr.To("30s"), LockTimeout: ptr.To("5000"), IdleInTransactionSessionTimeout: ptr.To("10min"), IdleSessionTimeout: ptr.To("0"), WorkMem: ptr.To("4MB")}},
		"NoConnLimit":      {l: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](-1)}},
		"ConnLimitZero":    {l: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](0)}, want: "spec.tenantLimits.connectionLimit 0 must be -1"},
		"ConnLimitBelow":   {l: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](-2)}, want: "connectionLimit -2"},
		"ConnLimitAbove":   {l: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](262144)}, want: "connectionLimit 262144"},
		"DurationUnit":     {l: &v1alpha1.TenantLimits{StatementTimeout: ptr.To("30 s")}, want: `spec.tenantLimits.statementTimeout "30 s" must be a duration`},
		"DurationInjected": {l: &v1alpha1.TenantLimits{LockTimeout: ptr.To("1s'; DROP ROLE x; --")}, want: "lockTimeout"},
		"DurationTooLong":  {l: &v1alpha1.TenantLimits{IdleSessionTimeout: ptr.To("30d")}, want: "longer than PostgreSQL's largest timeout"},
		"DurationLongest":  {l: &v1alpha1.TenantLimits{IdleSessionTimeout: ptr.To("24d")}},
		"WorkMemTooSmall":  {l: &v1alpha1.TenantLimits{WorkMem: ptr.To("63kB")}, want: "between 64kB"},
		"WorkMemTooBig":    {l: &v1alpha1.TenantLimits{WorkMem: ptr.To("2048GB")}, want: "between 64kB"},
		"WorkMemUnit":      {l: &v1alpha1.TenantLimits{WorkMem: ptr.To("4mb")}, want: "must be a size"},
		"WorkMemZero":      {l: &v1alpha1.TenantLimits{WorkMem: ptr.To("0")}, want: "must be a size"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateLimits("spec.tenantLimits", tc.l)
			if tc.want == "" {
				if err != nil {
					t.Errorf("ValidateLimits() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ValidateLimits() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLimitsOf(t *testing.T) {
	cfg := &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](10), StatementTimeout: ptr.To("30s"), WorkMem: ptr.To("4MB")}
	cases := map[string]struct {
		config, database *v1alpha1.TenantLimits
		want             EffectiveLimits
	}{
		"Nothing":      {},
		"ConfigOnly":   {config: cfg, want: EffectiveLimits{ConnectionLimit: ptr.To[int32](10), Settings: map[string]string{SettingStatementTimeout: "30s", SettingWorkMem: "4MB"}}},
		"DatabaseOnly": {database: &v1alpha1.TenantLimits{LockTimeout: ptr.To("1s")}, want: EffectiveLimits{Settings: map[string]string{SettingLockTimeout: "1s"}}},
		"Override": {config: cfg, database: &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](-1), StatementTimeout: ptr.To("0"), IdleSessionTimeout: ptr.To("1h")},
			want: EffectiveLimits{ConnectionLimit: ptr.To[int32](-1), Settings: map[string]string{SettingStatementTimeout: "0", SettingWorkMem: "4MB", SettingIdleSessionTimeout: "1h"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LimitsOf(tc.config, tc.database)); diff != "" {
				t.Errorf("LimitsOf() -want +got:\n%s", diff)
			}
		})
	}
}

func TestDecideLimits(t *testing.T) {
	want := EffectiveLimits{ConnectionLimit: ptr.To[int32](5), Settings: map[string]string{SettingStatementTimeout: "30s", SettingWorkMem: "4MB"}}
	cases := map[string]struct {
		want EffectiveLimits
		have RoleLimitsState
		out  LimitsVerdict
	}{
		"UnmanagedLeavesAHandSetLimitAlone": {
			have: RoleLimitsState{ConnLimit: 3, RoleSettings: []string{"statement_timeout=1min", "search_path=app"}},
			out: LimitsVerdict{Status: &v1alpha1.LimitsObservation{ConnectionLimit: ptr.To[int32](3),
				Settings: map[string]string{SettingStatementTimeout: "1min"}, OtherSettings: []string{"search_path"}}},
		},
		"Applied": {
			want: want,
			have: RoleLimitsState{ConnLimit: 5, RoleSettings: []string{"work_mem=4MB", "statement_timeout=30s"}},
			out: LimitsVerdict{Status: &v1alpha1.LimitsObservation{ConnectionLimit: ptr.To[int32](5),
				Settings: map[string]string{SettingStatementTimeout: "30s", SettingWorkMem: "4MB"},
				Managed:  []string{ManagedConnectionLimit, SettingStatementTimeout, SettingWorkMem}}},
		},
		"Drifted": {
			want: want,
			have: RoleLimitsState{ConnLimit: -1, RoleSettings: []string{"statement_timeout=0", "lock_timeout=2s"}, DatabaseSettings: []string{"work_mem=1GB", "timezone=UTC"}},
			out: LimitsVerdict{
				ConnectionLimit: ptr.To[int32](5),
				Set:             map[string]string{SettingStatementTimeout: "30s", SettingWorkMem: "4MB"},
				ResetInDatabase: []string{SettingWorkMem},
				Drift: []string{"connection limit none (want 5)", `statement_timeout "0" (want "30s")`, `work_mem unset (want "4MB")`,
					"work_mem is also set for the role in its own database, where it takes precedence"},
				Status: &v1alpha1.LimitsObservation{ConnectionLimit: ptr.To[int32](-1),
					Settings:      map[string]string{SettingStatementTimeout: "0", SettingLockTimeout: "2s"},
					Managed:       []string{ManagedConnectionLimit, SettingStatementTimeout, SettingWorkMem},
					OtherSettings: []string{"timezone (in its database)"}},
			},
		},
		"LimitLifted": {
			want: EffectiveLimits{ConnectionLimit: ptr.To[int32](-1)},
			have: RoleLimitsState{ConnLimit: 5},
			out: LimitsVerdict{ConnectionLimit: ptr.To[int32](-1), Drift: []string{"connection limit 5 (want none)"},
				Status: &v1alpha1.LimitsObservation{ConnectionLimit: ptr.To[int32](5), Managed: []string{ManagedConnectionLimit}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideLimits(tc.want, tc.have)
			if diff := cmp.Diff(tc.out, got); diff != "" {
				t.Errorf("DecideLimits() -want +got:\n%s", diff)
			}
			if got.Drifted() != (len(tc.out.Drift) > 0) {
				t.Errorf("Drifted() = %t with drift %v", got.Drifted(), got.Drift)
			}
		})
	}
}

// A managed limit that drifted is repaired by the provisioning Database
// (with ADMIN OPTION on the role), and reported, never repaired, by a
// read-only import. An unmanaged one is neither.
func TestDecideRepairsOnlyManagedLimits(t *testing.T) {
	base := func() Observation {
		o := base()
		o.R.Limits = RoleLimitsState{ConnLimit: 3}
		return o
	}
	managed := base()
	managed.Limits = EffectiveLimits{ConnectionLimit: ptr.To[int32](5)}
	v := Decide(managed)
	if diff := cmp.Diff([]Repair{RepairLimits}, v.Repairs); diff != "" || v.UpToDate || !strings.Contains(v.Message, "connection limit 3 (want 5)") {
		t.Errorf("managed drift: repairs -want +got %s; upToDate %t; message %q", diff, v.UpToDate, v.Message)
	}
	if v := Decide(base()); len(v.Repairs) != 0 || !v.Ready {
		t.Errorf("unmanaged limit: repairs %v, ready %t: a hand-set limit must be left alone", v.Repairs, v.Ready)
	}
	noAdmin := managed
	noAdmin.R.AdminCanAdmin = false
	if v := Decide(noAdmin); v.Reason != ReasonInsufficientPrivileges || len(v.Repairs) != 0 {
		t.Errorf("without ADMIN OPTION: reason %q repairs %v", v.Reason, v.Repairs)
	}
	imp := managed
	imp.Import = true
	imp.KV.Owner = nil
	if v := Decide(imp); len(v.Repairs) != 0 || v.Reason != ReasonImportDifferences || !strings.Contains(v.Message, "limits differ: connection limit 3 (want 5)") {
		t.Errorf("read-only import: repairs %v reason %q message %q", v.Repairs, v.Reason, v.Message)
	}
}

func TestDecideConnectionBudget(t *testing.T) {
	cases := map[string]struct {
		in          ConnectionBudgetInput
		fits        bool
		reason, msg string
		available   int32
	}{
		"Fits": {in: ConnectionBudgetInput{MaxConnections: 100, SuperuserReserved: 3, Reserved: 2, AdminPool: 4, TenantSum: 91, Roles: 9},
			fits: true, reason: ReasonWithinBudget, available: 91, msg: "add up to 91, within the 91 left"},
		"Overcommitted": {in: ConnectionBudgetInput{MaxConnections: 100, SuperuserReserved: 3, Reserved: 2, AdminPool: 4, TenantSum: 92, Roles: 9},
			reason: ReasonOvercommitted, available: 91, msg: "add up to 92, more than the 91 left"},
		"Unlimited": {in: ConnectionBudgetInput{MaxConnections: 20, SuperuserReserved: 3, AdminPool: 4, TenantSum: 5, Unlimited: 1, Roles: 2},
			reason: ReasonUnlimited, available: 13, msg: "1 of the 2 login roles the admin provisioned have no connection limit"},
		"NothingLeft": {in: ConnectionBudgetInput{MaxConnections: 5, SuperuserReserved: 3, AdminPool: 4, TenantSum: 1, Roles: 1},
			reason: ReasonOvercommitted, available: 0},
		"NoRoles": {in: ConnectionBudgetInput{MaxConnections: 100, SuperuserReserved: 3, AdminPool: 4},
			fits: true, reason: ReasonWithinBudget, available: 93},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := DecideConnectionBudget(tc.in)
			if v.Fits != tc.fits || v.Reason != tc.reason || !strings.Contains(v.Message, tc.msg) || v.Status.Available != tc.available {
				t.Errorf("DecideConnectionBudget() = %+v (available %d), want fits %t reason %s available %d message containing %q", v, v.Status.Available, tc.fits, tc.reason, tc.available, tc.msg)
			}
		})
	}
}

// With a per-namespace limit and a default connection limit, the budget
// counts what one namespace may still add, and says when that alone would
// overcommit the server.
func TestConnectionBudgetCountsWhatANamespaceMayAdd(t *testing.T) {
	i32 := func(n int32) *int32 { return &n }
	base := ConnectionBudgetInput{MaxConnections: 100, SuperuserReserved: 3, AdminPool: 7, TenantSum: 40, Roles: 8}
	cases := map[string]struct {
		maxTenants, limit *int32
		allowance         *int64
		msg, hide         string
	}{
		"FitsTwice": {maxTenants: i32(5), limit: i32(5), allowance: ptr64(25),
			msg: "one namespace may still add up to 5 databases (spec.namespaces.maxTenants), 25 connections at the default limit of 5 (each data role adds as much again): the 50 not yet promised take 2 such namespaces"},
		"OneNamespaceOvercommits": {maxTenants: i32(20), limit: i32(5), allowance: ptr64(100),
			msg: "100 connections at the default limit of 5 (each data role adds as much again), more than the 50 not yet promised: one namespace using its whole allowance would overcommit the server"},
		"NoLimitTheDefaultCounts": {maxTenants: i32(5), allowance: ptr64(110),
			msg: "spec.tenantLimits.connectionLimit is not set, so each login role the provider makes gets the default limit of a quarter of those, 22"},
		"NoLimitWantedNoAllowance": {maxTenants: i32(5), limit: i32(-1), hide: "may still add"},
		"NoMaxTenantsNoAllowance":  {limit: i32(5), hide: "may still add"},
		"ZeroTenants":              {maxTenants: i32(0), limit: i32(5), allowance: ptr64(0), msg: "up to 0 databases", hide: "overcommit"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := base
			in.MaxTenants, in.ConnectionLimit = tc.maxTenants, tc.limit
			v := DecideConnectionBudget(in)
			if diff := cmp.Diff(tc.allowance, v.Status.NamespaceAllowance); diff != "" {
				t.Errorf("namespaceAllowance: -want +got:\n%s", diff)
			}
			if !strings.Contains(v.Message, tc.msg) || (tc.hide != "" && strings.Contains(v.Message, tc.hide)) {
				t.Errorf("message %q: want %q, not %q", v.Message, tc.msg, tc.hide)
			}
			if !v.Fits || v.Reason != ReasonWithinBudget {
				t.Errorf("fits %t reason %s: what may come never changes what is", v.Fits, v.Reason)
			}
		})
	}
}

func ptr64(n int64) *int64 { return &n }

func TestValidateSettingRefusesNamesOffTheAllowList(t *testing.T) {
	for _, name := range []string{"search_path", "session_preload_libraries", "temp_file_limit", "statement_timeout; RESET ALL", ""} {
		if err := ValidateSetting(name, "1s"); err == nil || !strings.Contains(err.Error(), "not one of the session settings") {
			t.Errorf("ValidateSetting(%q) = %v, want a refusal", name, err)
		}
	}
	for _, name := range LimitSettings {
		v := "1s"
		if name == SettingWorkMem {
			v = "1MB"
		}
		if err := ValidateSetting(name, v); err != nil {
			t.Errorf("ValidateSetting(%q, %q) = %v", name, v, err)
		}
	}
}

func TestDefaultConnectionLimit(t *testing.T) {
	for available, want := range map[int32]int32{0: 1, 3: 1, 4: 1, 87: 21, 100: 25, 1000: 250} {
		if got := DefaultConnectionLimit(available); got != want {
			t.Errorf("DefaultConnectionLimit(%d) = %d, want %d", available, got, want)
		}
	}
}

func TestWithDefaultConnectionLimit(t *testing.T) {
	def := ptr.To[int32](21)
	cases := map[string]struct {
		l    EffectiveLimits
		def  *int32
		want *int32
	}{
		"none set: the default":          {def: def, want: ptr.To[int32](21)},
		"set by the config or Database":  {l: EffectiveLimits{ConnectionLimit: ptr.To[int32](5)}, def: def, want: ptr.To[int32](5)},
		"none wanted (-1) stays none":    {l: EffectiveLimits{ConnectionLimit: ptr.To[int32](-1)}, def: def, want: ptr.To[int32](-1)},
		"the server not read: unmanaged": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.l.WithDefaultConnectionLimit(tc.def)
			if diff := cmp.Diff(tc.want, got.ConnectionLimit); diff != "" {
				t.Errorf("connection limit (-want +got):\n%s", diff)
			}
		})
	}
	// The default is a copy: changing it later changes no verdict.
	l := EffectiveLimits{}.WithDefaultConnectionLimit(def)
	*def = 99
	if *l.ConnectionLimit != 21 {
		t.Errorf("the default was not copied: %d", *l.ConnectionLimit)
	}
}

// The limits a data role's login was proven under are compared as text
// from one poll to the next: equal limits read twice must print the same.
func TestEffectiveLimitsStringIsByValue(t *testing.T) {
	cfg := &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](20), StatementTimeout: ptr.To("30s"), WorkMem: ptr.To("4MB")}
	a := LimitsOf(cfg, nil).WithDefaultConnectionLimit(ptr.To[int32](48))
	b := LimitsOf(cfg, nil).WithDefaultConnectionLimit(ptr.To[int32](48))
	if fmt.Sprintf("%v", a) != fmt.Sprintf("%v", b) {
		t.Errorf("the same limits print %v and %v", a, b)
	}
	if got, want := a.String(), `connection_limit=20 statement_timeout="30s" work_mem="4MB"`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	if got := (EffectiveLimits{}).String(); got != "connection_limit=unmanaged" {
		t.Errorf("no limits print %s", got)
	}
	if LimitsOf(nil, nil).WithDefaultConnectionLimit(ptr.To[int32](5)).String() == LimitsOf(nil, nil).WithDefaultConnectionLimit(ptr.To[int32](6)).String() {
		t.Error("different connection limits print the same")
	}
}
