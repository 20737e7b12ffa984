package v1alpha1

// TenantLimits are what one tenant's login role may take of a shared
// server: a connection limit and role-level defaults of a short allow-list
// of session settings. A platform admin sets them as defaults on the
// ClusterProviderConfig (spec.tenantLimits) and may override them per
// Database (spec.forProvider.limits); a Tenant has no field for them.
//
// A field left out is not managed: the provider neither sets nor resets
// it, and a value set by hand stays. A connection limit is enforced by the
// server; a session setting is a default the tenant's role may change in
// its own session (SET) or for itself (ALTER ROLE ... SET), which the
// provider repairs at its next look. See docs/admins.md.
type TenantLimits struct {
	// ConnectionLimit is the login role's CONNECTION LIMIT: how many
	// sessions it may have at once; -1 for none. The provider's own login
	// check, when due, takes one of them for a moment. A non-superuser
	// tenant role cannot change it.
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=262143
	// +kubebuilder:validation:XValidation:rule="self != 0",message="connectionLimit 0 would refuse every login, the provider's own checks included: use -1 for no limit, or at least 1"
	// +optional
	ConnectionLimit *int32 `json:"connectionLimit,omitempty"`

	// StatementTimeout is the role's default statement_timeout: a
	// PostgreSQL duration (an integer with us, ms, s, min, h or d; no unit
	// is ms), "0" for none.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,9}(us|ms|s|min|h|d)?)$`
	// +optional
	StatementTimeout *string `json:"statementTimeout,omitempty"`

	// LockTimeout is the role's default lock_timeout (a duration as
	// statementTimeout's), "0" for none.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,9}(us|ms|s|min|h|d)?)$`
	// +optional
	LockTimeout *string `json:"lockTimeout,omitempty"`

	// IdleInTransactionSessionTimeout is the role's default
	// idle_in_transaction_session_timeout (a duration as
	// statementTimeout's), "0" for none: a session idle inside an open
	// transaction longer than this is ended.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,9}(us|ms|s|min|h|d)?)$`
	// +optional
	IdleInTransactionSessionTimeout *string `json:"idleInTransactionSessionTimeout,omitempty"`

	// IdleSessionTimeout is the role's default idle_session_timeout (a
	// duration as statementTimeout's), "0" for none: a session idle outside
	// a transaction longer than this is ended. Mind connection pools that
	// keep idle sessions open.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,9}(us|ms|s|min|h|d)?)$`
	// +optional
	IdleSessionTimeout *string `json:"idleSessionTimeout,omitempty"`

	// WorkMem is the role's default work_mem: a PostgreSQL size (an integer
	// with kB, MB, GB or TB; no unit is kB), at least 64kB.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]{0,9}(kB|MB|GB|TB)?$`
	// +optional
	WorkMem *string `json:"workMem,omitempty"`
}

// LimitsObservation is what the server shows of a Database's login role's
// limits.
type LimitsObservation struct {
	// ConnectionLimit is the role's CONNECTION LIMIT (-1: none), whether
	// the provider manages it or not.
	// +optional
	ConnectionLimit *int32 `json:"connectionLimit,omitempty"`

	// Settings are the role's defaults (ALTER ROLE ... SET) of the
	// allow-listed session settings, by PostgreSQL name, whether the
	// provider manages them or not.
	// +optional
	Settings map[string]string `json:"settings,omitempty"`

	// Managed lists what the provider keeps as the limits in effect say
	// (connection_limit and setting names); the rest is left as found.
	// +listType=set
	// +optional
	Managed []string `json:"managed,omitempty"`

	// OtherSettings names the role's other defaults (outside the
	// allow-list, or set for the role in its database only), set by hand:
	// reported, never changed. Values are not shown.
	// +listType=set
	// +optional
	OtherSettings []string `json:"otherSettings,omitempty"`
}

// ConnectionBudget is how a server's connections divide between the
// admin and the tenant roles of this config.
type ConnectionBudget struct {
	// MaxConnections is the server's max_connections.
	MaxConnections int32 `json:"maxConnections"`

	// Reserved are the slots of superuser_reserved_connections and
	// reserved_connections (PostgreSQL 16 and later).
	Reserved int32 `json:"reserved"`

	// AdminPool is the most connections the provider's admin pool opens.
	AdminPool int32 `json:"adminPool"`

	// Available is what max_connections leaves after Reserved and
	// AdminPool: what tenant roles may share.
	Available int32 `json:"available"`

	// TenantLimits is the sum of the connection limits of the login roles
	// the admin role is a member of (the roles it provisioned).
	TenantLimits int64 `json:"tenantLimits"`

	// Unlimited counts those roles without a connection limit.
	// +optional
	Unlimited int32 `json:"unlimited,omitempty"`

	// NamespaceAllowance is the most connection limits one namespace
	// without databases here may still add: spec.namespaces.maxTenants
	// databases, each with an owner role at the default
	// spec.tenantLimits.connectionLimit (each data role a Tenant asks for
	// adds as much again). A namespace holding databases here already may
	// add that much less. Absent unless both are set.
	// +optional
	NamespaceAllowance *int64 `json:"namespaceAllowance,omitempty"`
}
