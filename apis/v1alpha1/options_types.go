package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Database options (encoding and locale) and database sizes.

// LocaleProvider is PostgreSQL's locale provider of a database.
// +kubebuilder:validation:Enum=libc;icu;builtin
type LocaleProvider string

// Locale providers. ICU needs PostgreSQL 15 or later, builtin 17 or later.
const (
	LocaleProviderLibc    LocaleProvider = "libc"
	LocaleProviderICU     LocaleProvider = "icu"
	LocaleProviderBuiltin LocaleProvider = "builtin"
)

// DatabaseOptions are the encoding and locale a database is created with.
// Each field left out takes the ClusterProviderConfig's default
// (spec.databaseOptions.defaults), then template0's setting. They are
// fixed when the database is created: PostgreSQL cannot change them
// afterwards.
type DatabaseOptions struct {
	// Encoding is the character set, as PostgreSQL names it (UTF8,
	// LATIN1, SQL_ASCII, ...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]+$`
	// +optional
	Encoding string `json:"encoding,omitempty"`

	// LocaleProvider is libc, icu (PostgreSQL 15 and later) or builtin
	// (PostgreSQL 17 and later).
	// +optional
	LocaleProvider LocaleProvider `json:"localeProvider,omitempty"`

	// Locale is the operating system's locale for LC_COLLATE and LC_CTYPE
	// (C, POSIX, C.UTF-8, en_US.UTF-8, ...): it must be one the server
	// knows (pg_collation).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.@=-]*$`
	// +optional
	Locale string `json:"locale,omitempty"`

	// ICULocale is the ICU locale (und, de-DE, en-US-u-kn-true, ...) of
	// localeProvider icu: it must be one of the server's ICU collations.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.@=-]*$`
	// +optional
	ICULocale string `json:"icuLocale,omitempty"`

	// BuiltinLocale is the builtin provider's locale (C, C.UTF-8, and
	// PG_UNICODE_FAST on PostgreSQL 18) of localeProvider builtin.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.@=-]*$`
	// +optional
	BuiltinLocale string `json:"builtinLocale,omitempty"`
}

// DatabaseOptionsPolicy is what a server's databases are created with by
// default and what a Database may ask instead.
type DatabaseOptionsPolicy struct {
	// Defaults apply to every new database on this server, for each
	// option its Database leaves out. Without them, template0's settings
	// apply. Changing them changes no existing database.
	// +optional
	Defaults *DatabaseOptions `json:"defaults,omitempty"`

	// Allowed lists, per option, the values a Database (and so a Tenant)
	// may ask besides the default. A request outside it is refused before
	// anything is created, with the reason DatabaseOptionsNotAllowed on
	// the Database.
	// +optional
	Allowed *AllowedDatabaseOptions `json:"allowed,omitempty"`
}

// AllowedDatabaseOptions are the values a Database may ask for each
// option, besides the config's default. An empty list allows the default
// only.
type AllowedDatabaseOptions struct {
	// Encodings a Database may ask.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_]+$`
	// +listType=set
	// +optional
	Encodings []string `json:"encodings,omitempty"`

	// LocaleProviders a Database may ask.
	// +kubebuilder:validation:MaxItems=3
	// +listType=set
	// +optional
	LocaleProviders []LocaleProvider `json:"localeProviders,omitempty"`

	// Locales (libc) a Database may ask.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.@=-]*$`
	// +listType=set
	// +optional
	Locales []string `json:"locales,omitempty"`

	// ICULocales a Database may ask.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.@=-]*$`
	// +listType=set
	// +optional
	ICULocales []string `json:"icuLocales,omitempty"`

	// BuiltinLocales a Database may ask.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.@=-]*$`
	// +listType=set
	// +optional
	BuiltinLocales []string `json:"builtinLocales,omitempty"`
}

// DatabaseOptionsObservation is the encoding and locale the database has,
// as pg_database holds them.
type DatabaseOptionsObservation struct {
	// Encoding of the database.
	// +optional
	Encoding string `json:"encoding,omitempty"`

	// LocaleProvider of the database (libc before PostgreSQL 15).
	// +optional
	LocaleProvider LocaleProvider `json:"localeProvider,omitempty"`

	// Collate and Ctype are LC_COLLATE and LC_CTYPE.
	// +optional
	Collate string `json:"collate,omitempty"`
	// +optional
	Ctype string `json:"ctype,omitempty"`

	// ICULocale of an icu database.
	// +optional
	ICULocale string `json:"icuLocale,omitempty"`

	// BuiltinLocale of a builtin database.
	// +optional
	BuiltinLocale string `json:"builtinLocale,omitempty"`

	// Differences between spec.forProvider.options and the database, one
	// line each; the OptionsDiffer condition says the same. Nothing is
	// changed to match: PostgreSQL cannot change them.
	// +optional
	Differences []string `json:"differences,omitempty"`
}

// DatabaseSize is a database's size on disk, as pg_database_size measured
// it at the config's last size refresh.
type DatabaseSize struct {
	// Bytes on disk.
	Bytes int64 `json:"bytes"`

	// Human is Bytes for people (kB, MB, GB, TB; powers of 1024).
	// +optional
	Human string `json:"human,omitempty"`

	// MeasuredAt is when the size was measured.
	// +optional
	MeasuredAt *metav1.Time `json:"measuredAt,omitempty"`
}

// ConfigSizes sums up the sizes of the databases of a config's Databases.
type ConfigSizes struct {
	// Databases measured.
	Databases int `json:"databases"`

	// TotalBytes is their sum.
	TotalBytes int64 `json:"totalBytes"`

	// Total is TotalBytes for people.
	// +optional
	Total string `json:"total,omitempty"`

	// Largest databases, largest first (at most 5).
	// +optional
	Largest []NamedDatabaseSize `json:"largest,omitempty"`

	// MeasuredAt is when they were measured.
	// +optional
	MeasuredAt *metav1.Time `json:"measuredAt,omitempty"`

	// Stale counts the databases whose size is the last one known, from
	// an earlier refresh: their measurement failed or waits for its
	// backoff.
	// +optional
	Stale int `json:"stale,omitempty"`

	// NotMeasured counts the databases whose size could not be measured.
	// +optional
	NotMeasured int `json:"notMeasured,omitempty"`

	// NotMeasuredDatabases names them and says why, the longest failing
	// first (at most 5).
	// +optional
	NotMeasuredDatabases []SizeNotMeasured `json:"notMeasuredDatabases,omitempty"`

	// Problem is why the last refresh stopped before measuring every
	// database (the server could not be reached); it is retried after a
	// backoff.
	// +optional
	Problem string `json:"problem,omitempty"`
}

// SizeNotMeasured is a database whose size could not be measured.
type SizeNotMeasured struct {
	// Name of the Database object.
	Name string `json:"name"`

	// Database is the PostgreSQL database.
	Database string `json:"database"`

	// Reason the measurement failed.
	Reason string `json:"reason"`

	// Since is when it first failed.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`

	// NextAttempt is when it is measured again, at the earliest.
	// +optional
	NextAttempt *metav1.Time `json:"nextAttempt,omitempty"`
}

// NamedDatabaseSize is the size of one Database's database.
type NamedDatabaseSize struct {
	// Name of the Database object.
	Name string `json:"name"`

	// Database is the PostgreSQL database.
	Database string `json:"database"`

	// Bytes on disk.
	Bytes int64 `json:"bytes"`

	// Human is Bytes for people.
	// +optional
	Human string `json:"human,omitempty"`
}
