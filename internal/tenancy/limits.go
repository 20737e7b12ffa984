package tenancy

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// The session settings a platform admin may give tenant roles as
// role-level defaults (v1alpha1.TenantLimits), by PostgreSQL name, in the
// order they are applied and reported.
const (
	SettingStatementTimeout      = "statement_timeout"
	SettingLockTimeout           = "lock_timeout"
	SettingIdleInTransactionTime = "idle_in_transaction_session_timeout"
	SettingIdleSessionTimeout    = "idle_session_timeout"
	SettingWorkMem               = "work_mem"
)

// LimitSettings is the allow-list of session settings, in order.
var LimitSettings = []string{SettingStatementTimeout, SettingLockTimeout, SettingIdleInTransactionTime, SettingIdleSessionTimeout, SettingWorkMem}

// ManagedConnectionLimit is how status.atProvider.limits.managed names
// the connection limit.
const ManagedConnectionLimit = "connection_limit"

// maxInt is PostgreSQL's largest integer setting (INT_MAX).
const maxInt = 2147483647

var (
	durationRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,9})(us|ms|s|min|h|d)?$`)
	sizeRE     = regexp.MustCompile(`^([1-9][0-9]{0,9})(kB|MB|GB|TB)?$`)
)

// Milliseconds per duration unit (no unit is ms); us is rounded as
// PostgreSQL rounds it.
var durationMS = map[string]float64{"us": 0.001, "": 1, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}

// Kilobytes per size unit (no unit is kB).
var sizeKB = map[string]float64{"": 1, "kB": 1, "MB": 1024, "GB": 1024 * 1024, "TB": 1024 * 1024 * 1024}

// settingsOf returns the settings l names, by PostgreSQL name.
func settingsOf(l *v1alpha1.TenantLimits) map[string]*string {
	if l == nil {
		return nil
	}
	return map[string]*string{
		SettingStatementTimeout:      l.StatementTimeout,
		SettingLockTimeout:           l.LockTimeout,
		SettingIdleInTransactionTime: l.IdleInTransactionSessionTimeout,
		SettingIdleSessionTimeout:    l.IdleSessionTimeout,
		SettingWorkMem:               l.WorkMem,
	}
}

// fieldOf is a setting's field name in the API.
var fieldOf = map[string]string{
	SettingStatementTimeout:      "statementTimeout",
	SettingLockTimeout:           "lockTimeout",
	SettingIdleInTransactionTime: "idleInTransactionSessionTimeout",
	SettingIdleSessionTimeout:    "idleSessionTimeout",
	SettingWorkMem:               "workMem",
}

// ValidateLimits re-checks what the CRD schema enforces on limits, and
// the ranges it cannot say, so that an object written around the schema
// is refused before anything reaches the server. field is where l lives
// (spec.tenantLimits, spec.forProvider.limits).
func ValidateLimits(field string, l *v1alpha1.TenantLimits) error {
	if l == nil {
		return nil
	}
	if c := l.ConnectionLimit; c != nil && (*c == 0 || *c < -1 || *c > 262143) {
		return fmt.Errorf("%s.connectionLimit %d must be -1 (no limit) or between 1 and 262143: 0 would refuse every login, the provider's own checks included", field, *c)
	}
	for _, name := range LimitSettings {
		if v := settingsOf(l)[name]; v != nil {
			if err := ValidateSetting(name, *v); err != nil {
				return fmt.Errorf("%s.%s %w", field, fieldOf[name], err)
			}
		}
	}
	return nil
}

// ValidateSetting checks one allow-listed session setting's value: the
// only names and values the provider ever writes into ALTER ROLE ... SET.
func ValidateSetting(name, v string) error {
	switch {
	case name == SettingWorkMem:
		m := sizeRE.FindStringSubmatch(v)
		if m == nil {
			return fmt.Errorf("%q must be a size: an integer with kB, MB, GB or TB (no unit is kB)", v)
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		if kb := n * sizeKB[m[2]]; kb < 64 || kb > maxInt {
			return fmt.Errorf("%q must be between 64kB and %dkB", v, maxInt)
		}
	case slices.Contains(LimitSettings, name):
		m := durationRE.FindStringSubmatch(v)
		if m == nil {
			return fmt.Errorf("%q must be a duration: an integer with us, ms, s, min, h or d (no unit is ms), or 0 for none", v)
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		if ms := n * durationMS[m[2]]; ms > maxInt {
			return fmt.Errorf("%q is longer than PostgreSQL's largest timeout, %dms (about 24 days)", v, maxInt)
		}
	default:
		return fmt.Errorf("%q is not one of the session settings a tenant role's limits may set (%s)", name, strings.Join(LimitSettings, ", "))
	}
	return nil
}

// EffectiveLimits are the limits the provider keeps on one login role:
// the config's defaults overridden field by field by the Database's.
// A nil connection limit and an absent setting are not managed.
type EffectiveLimits struct {
	ConnectionLimit *int32
	// Settings by PostgreSQL name.
	Settings map[string]string
}

// String is the limits by value, settings in their order: what a login
// was proven under, compared from one poll to the next (a pointer's
// address would differ at every poll).
func (l EffectiveLimits) String() string {
	var b strings.Builder
	b.WriteString("connection_limit=")
	if l.ConnectionLimit == nil {
		b.WriteString("unmanaged")
	} else {
		b.WriteString(strconv.Itoa(int(*l.ConnectionLimit)))
	}
	for _, name := range LimitSettings {
		if v, ok := l.Settings[name]; ok {
			fmt.Fprintf(&b, " %s=%q", name, v)
		}
	}
	return b.String()
}

// Managed reports whether any limit is managed.
func (l EffectiveLimits) Managed() bool { return l.ConnectionLimit != nil || len(l.Settings) > 0 }

// LimitsOf merges the config's defaults and the Database's overrides.
func LimitsOf(config, database *v1alpha1.TenantLimits) EffectiveLimits {
	var out EffectiveLimits
	for _, l := range []*v1alpha1.TenantLimits{config, database} {
		if l == nil {
			continue
		}
		if l.ConnectionLimit != nil {
			c := *l.ConnectionLimit
			out.ConnectionLimit = &c
		}
		for name, v := range settingsOf(l) {
			if v == nil {
				continue
			}
			if out.Settings == nil {
				out.Settings = map[string]string{}
			}
			out.Settings[name] = *v
		}
	}
	return out
}

// DefaultConnectionLimit is the connection limit of each login role the
// provider makes on a server whose config sets no
// spec.tenantLimits.connectionLimit: a quarter of the connections
// max_connections leaves for tenant roles (available: after the reserved
// slots and the provider's admin pool), and at least 1. No one tenant role
// can take the whole server, while an app's usual pool (10 to 20
// connections) fits on a server of 100. A config that wants none sets
// connectionLimit -1.
func DefaultConnectionLimit(available int32) int32 { return max(available/4, 1) }

// WithDefaultConnectionLimit is l with the connection limit def when
// neither the config nor the Database set one; def nil (the server's
// connections not read yet) leaves l as it is.
func (l EffectiveLimits) WithDefaultConnectionLimit(def *int32) EffectiveLimits {
	if l.ConnectionLimit != nil || def == nil {
		return l
	}
	c := *def
	l.ConnectionLimit = &c
	return l
}

// RoleLimitsState is what the catalog shows of a login role's limits.
type RoleLimitsState struct {
	// ConnLimit is rolconnlimit (-1: none).
	ConnLimit int32
	// RoleSettings are the role's own defaults for every database
	// (pg_db_role_setting.setconfig with setdatabase 0), as "name=value".
	RoleSettings []string
	// DatabaseSettings are the role's defaults in its own database only,
	// which take precedence over RoleSettings.
	DatabaseSettings []string
}

// LimitsVerdict is what to repair and report of a role's limits.
type LimitsVerdict struct {
	// ConnectionLimit to set, nil when it is as it should be or unmanaged.
	ConnectionLimit *int32
	// Set are the role defaults to set, by name.
	Set map[string]string
	// ResetInDatabase are managed settings the role has in its own
	// database (where they take precedence) to reset.
	ResetInDatabase []string
	// Drift says what differs, for messages; empty when nothing does.
	Drift []string
	// Status is status.atProvider.limits.
	Status *v1alpha1.LimitsObservation
}

// Drifted reports whether anything must be repaired.
func (v LimitsVerdict) Drifted() bool {
	return v.ConnectionLimit != nil || len(v.Set) > 0 || len(v.ResetInDatabase) > 0
}

// parseSettings splits setconfig entries into a map; entries without '='
// are kept by name with an empty value.
func parseSettings(entries []string) map[string]string {
	out := map[string]string{}
	for _, e := range entries {
		name, value, _ := strings.Cut(e, "=")
		out[name] = value
	}
	return out
}

// DecideLimits compares the limits in effect with the role's: only what is
// managed is repaired; anything else the role has (a connection limit or
// setting the config does not name, defaults outside the allow-list) is
// shown and left alone.
func DecideLimits(want EffectiveLimits, have RoleLimitsState) LimitsVerdict {
	var v LimitsVerdict
	role, inDB := parseSettings(have.RoleSettings), parseSettings(have.DatabaseSettings)
	st := &v1alpha1.LimitsObservation{}
	c := have.ConnLimit
	st.ConnectionLimit = &c
	if w := want.ConnectionLimit; w != nil {
		st.Managed = append(st.Managed, ManagedConnectionLimit)
		if *w != have.ConnLimit {
			x := *w
			v.ConnectionLimit = &x
			v.Drift = append(v.Drift, fmt.Sprintf("connection limit %s (want %s)", connLimitString(have.ConnLimit), connLimitString(*w)))
		}
	}
	for _, name := range LimitSettings {
		got, has := role[name]
		if has {
			if st.Settings == nil {
				st.Settings = map[string]string{}
			}
			st.Settings[name] = got
		}
		w, managed := want.Settings[name]
		if !managed {
			if _, ok := inDB[name]; ok {
				st.OtherSettings = append(st.OtherSettings, name+" (in its database)")
			}
			continue
		}
		st.Managed = append(st.Managed, name)
		if !has || got != w {
			if v.Set == nil {
				v.Set = map[string]string{}
			}
			v.Set[name] = w
			have := "unset"
			if has {
				have = strconv.Quote(got)
			}
			v.Drift = append(v.Drift, fmt.Sprintf("%s %s (want %q)", name, have, w))
		}
		if _, ok := inDB[name]; ok {
			v.ResetInDatabase = append(v.ResetInDatabase, name)
			v.Drift = append(v.Drift, fmt.Sprintf("%s is also set for the role in its own database, where it takes precedence", name))
		}
	}
	for name := range role {
		if !slices.Contains(LimitSettings, name) {
			st.OtherSettings = append(st.OtherSettings, name)
		}
	}
	for name := range inDB {
		if !slices.Contains(LimitSettings, name) {
			st.OtherSettings = append(st.OtherSettings, name+" (in its database)")
		}
	}
	sort.Strings(st.OtherSettings)
	v.Status = st
	return v
}

func connLimitString(n int32) string {
	if n < 0 {
		return "none"
	}
	return strconv.Itoa(int(n))
}

// ConditionConnectionBudget is the type of a config's condition that says
// whether its tenant roles' connection limits fit the server.
const ConditionConnectionBudget = "ConnectionBudget"

// Reasons of the ConnectionBudget condition.
const (
	ReasonWithinBudget  = "WithinBudget"
	ReasonOvercommitted = "Overcommitted"
	ReasonUnlimited     = "UnlimitedRoles"
)

// ConnectionBudgetInput is what the server says of its connections and of
// the connection limits of the login roles the admin provisioned.
type ConnectionBudgetInput struct {
	MaxConnections, SuperuserReserved, Reserved int32
	// AdminPool is the most connections the admin pool opens.
	AdminPool int32
	// TenantSum is the sum of the limits of the roles that have one;
	// Unlimited counts those without; Roles counts them all.
	TenantSum        int64
	Unlimited, Roles int32
	// MaxTenants is the config's spec.namespaces.maxTenants and
	// ConnectionLimit its spec.tenantLimits.connectionLimit (nil: unset,
	// and then DefaultConnectionLimit applies).
	MaxTenants, ConnectionLimit *int32
}

// BudgetVerdict is the config's ConnectionBudget condition and status.
type BudgetVerdict struct {
	Fits            bool
	Reason, Message string
	Status          *v1alpha1.ConnectionBudget
}

// DecideConnectionBudget says whether the tenant roles' connection limits
// fit what max_connections leaves after the reserved slots and the admin
// pool. Roles without a limit do not fit any budget: each can take every
// connection left.
func DecideConnectionBudget(in ConnectionBudgetInput) BudgetVerdict {
	reserved := in.SuperuserReserved + in.Reserved
	avail := max(in.MaxConnections-reserved-in.AdminPool, 0)
	v := BudgetVerdict{Status: &v1alpha1.ConnectionBudget{
		MaxConnections: in.MaxConnections, Reserved: reserved, AdminPool: in.AdminPool,
		Available: avail, TenantLimits: in.TenantSum, Unlimited: in.Unlimited,
	}}
	head := fmt.Sprintf("max_connections %d leaves %d for tenant roles after %d reserved (superuser_reserved_connections, reserved_connections) and the provider's admin pool of %d", in.MaxConnections, avail, reserved, in.AdminPool)
	if in.ConnectionLimit == nil {
		def := DefaultConnectionLimit(avail)
		in.ConnectionLimit = &def
		head += fmt.Sprintf("; spec.tenantLimits.connectionLimit is not set, so each login role the provider makes gets the default limit of a quarter of those, %d (an import's own login role keeps its own)", def)
	}
	switch {
	case in.TenantSum > int64(avail):
		v.Reason = ReasonOvercommitted
		v.Message = fmt.Sprintf("the connection limits of the %d login roles the admin provisioned add up to %d, more than the %d left (and %d have none): when they all use their limit, new sessions are refused with \"too many clients\". Lower the limits or raise max_connections", in.Roles, in.TenantSum, avail, in.Unlimited)
	case in.Unlimited > 0:
		v.Reason = ReasonUnlimited
		v.Message = fmt.Sprintf("%d of the %d login roles the admin provisioned have no connection limit: any one of them can take all %d; the others' limits add up to %d. Set spec.tenantLimits.connectionLimit (or a Database's spec.forProvider.limits.connectionLimit)", in.Unlimited, in.Roles, avail, in.TenantSum)
	default:
		v.Fits, v.Reason = true, ReasonWithinBudget
		v.Message = fmt.Sprintf("the connection limits of the %d login roles the admin provisioned add up to %d, within the %d left", in.Roles, in.TenantSum, avail)
	}
	v.Message = head + "; " + v.Message
	if in.MaxTenants != nil && in.ConnectionLimit != nil && *in.ConnectionLimit >= 0 {
		per := int64(*in.ConnectionLimit)
		allowance := int64(*in.MaxTenants) * per
		v.Status.NamespaceAllowance = &allowance
		left := int64(avail) - in.TenantSum
		v.Message += fmt.Sprintf("; one namespace may still add up to %d databases (spec.namespaces.maxTenants), %d connections at the default limit of %d (each data role adds as much again)", *in.MaxTenants, allowance, per)
		switch {
		case allowance == 0:
		case left < allowance:
			v.Message += fmt.Sprintf(", more than the %d not yet promised: one namespace using its whole allowance would overcommit the server", max(left, 0))
		default:
			v.Message += fmt.Sprintf(": the %d not yet promised take %d such namespaces", left, left/allowance)
		}
	}
	return v
}
