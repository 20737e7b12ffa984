package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// IdentifierPattern is the rule every PostgreSQL name the provider accepts
// must match: database, login role, admin database and extension names.
const IdentifierPattern = `^[a-z][a-z0-9_]{0,62}$`

// DatabaseParameters are the desired state of a tenant database.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.database) || (has(self.database) && self.database == oldSelf.database)",message="spec.forProvider.database is immutable once set",fieldPath=".database",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.loginRole) || (has(self.loginRole) && self.loginRole == oldSelf.loginRole)",message="spec.forProvider.loginRole is immutable once set",fieldPath=".loginRole",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.credentialPath) || (has(self.credentialPath) && self.credentialPath == oldSelf.credentialPath)",message="spec.forProvider.credentialPath is immutable once set",fieldPath=".credentialPath",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.extensions) || (has(self.extensions) && oldSelf.extensions.all(e, e in self.extensions))",message="spec.forProvider.extensions is append-only: an extension cannot be removed (the provider never runs DROP EXTENSION)",fieldPath=".extensions",reason=FieldValueForbidden
type DatabaseParameters struct {
	// Database is the PostgreSQL database name. When unset it is the
	// Database's crossplane.io/external-name annotation, which defaults to
	// metadata.name. Immutable once set.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pg_') && !(self in ['postgres', 'template0', 'template1', 'public', 'none'])",message="spec.forProvider.database must not start with pg_ nor be postgres, template0, template1, public or none: these are PostgreSQL's own database and role names (the login role defaults to the database name)"
	// +optional
	Database *string `json:"database,omitempty"`

	// LoginRole is the owner LOGIN role of the database. Defaults to the
	// database name. Immutable once set.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pg_') && !(self in ['postgres', 'template0', 'template1', 'public', 'none'])",message="spec.forProvider.loginRole must not start with pg_ nor be postgres, template0, template1, public or none: these are PostgreSQL's own database and role names"
	// +optional
	LoginRole *string `json:"loginRole,omitempty"`

	// Extensions to create in the database. Append-only: removing one is
	// refused, the provider never drops an extension.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +listType=set
	// +optional
	Extensions []string `json:"extensions,omitempty"`

	// CredentialPath is the KV v2 path, relative to the provider's KV mount,
	// of the credential record. When the Database provisions, the path is
	// derived as <tenant-base-path>/<namespace>/<metadata.name> and must not
	// be set here; for an import (managementPolicies without Create) it names
	// the existing record. Immutable once set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '.' || s == '..')",message="spec.forProvider.credentialPath must not contain '.' or '..' segments"
	// +kubebuilder:validation:XValidation:rule="!(self.split('/')[0] in ['data', 'metadata'])",message="spec.forProvider.credentialPath is relative to the KV mount: leave out the data/ or metadata/ API prefix"
	// +optional
	CredentialPath *string `json:"credentialPath,omitempty"`
}

// DefaultManagementPolicies is the CRD default of a Database's
// spec.managementPolicies: everything but Delete.
var DefaultManagementPolicies = xpv2.ManagementPolicies{
	xpv2.ManagementActionObserve,
	xpv2.ManagementActionCreate,
	xpv2.ManagementActionUpdate,
	xpv2.ManagementActionLateInitialize,
}

// DatabasePhase is the last confirmed provisioning step of a Database.
// +kubebuilder:validation:Enum=Pending;Planned;CredentialCreated;RoleCreated;DatabaseCreated;Ready;Deleting
type DatabasePhase string

// Database phases, in provisioning order.
const (
	DatabasePhasePending           DatabasePhase = "Pending"
	DatabasePhasePlanned           DatabasePhase = "Planned"
	DatabasePhaseCredentialCreated DatabasePhase = "CredentialCreated"
	DatabasePhaseRoleCreated       DatabasePhase = "RoleCreated"
	DatabasePhaseDatabaseCreated   DatabasePhase = "DatabaseCreated"
	DatabasePhaseReady             DatabasePhase = "Ready"
	DatabasePhaseDeleting          DatabasePhase = "Deleting"
)

// CredentialObservation says where the tenant credential lives. It never
// holds the credential itself.
type CredentialObservation struct {
	// Path of the KV v2 record, relative to the KV mount.
	// +optional
	Path string `json:"path,omitempty"`

	// OpenBaoURL is <consumer-address>/v1/<mount>/data/<path>: where a
	// consumer with its own OpenBao identity reads the record.
	// +optional
	OpenBaoURL string `json:"openBaoURL,omitempty"`
}

// DatabaseObservation is the observed state of a tenant database.
type DatabaseObservation struct {
	// Phase is the last provisioning step confirmed against the server. It is
	// a report, never an input: every reconcile verifies the real state.
	// +optional
	Phase DatabasePhase `json:"phase,omitempty"`

	// DatabaseOID is the database's OID (diagnostic only).
	// +optional
	DatabaseOID int64 `json:"databaseOID,omitempty"`

	// Owner is the role that owns the database.
	// +optional
	Owner string `json:"owner,omitempty"`

	// Extensions installed in the database.
	// +listType=set
	// +optional
	Extensions []string `json:"extensions,omitempty"`

	// Credential locates the tenant credential in OpenBao.
	// +optional
	Credential CredentialObservation `json:"credential,omitempty"`

	// PostgreSQLVersion of the server holding the database.
	// +optional
	PostgreSQLVersion string `json:"postgresqlVersion,omitempty"`
}

// A DatabaseSpec defines the desired state of a Database.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerConfigRef) || (has(self.providerConfigRef) && self.providerConfigRef == oldSelf.providerConfigRef)",message="spec.providerConfigRef is immutable once set: a Database cannot move to another server",fieldPath=".providerConfigRef",reason=FieldValueForbidden
//
// The CRD's default for spec.managementPolicies is
// [Observe, Create, Update, LateInitialize], not Crossplane's ["*"]: deleting a
// Database never drops anything unless Delete (or "*") is listed explicitly,
// and a list without Create is a read-only import. controller-gen cannot
// override a default of an embedded field, so hack/crdpatch sets it during
// `make generate`; DefaultManagementPolicies is the same list in Go.
type DatabaseSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`

	ForProvider DatabaseParameters `json:"forProvider"`
}

// A DatabaseStatus represents the observed state of a Database.
type DatabaseStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	AtProvider DatabaseObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A Database is one PostgreSQL database on a registered server, with its own
// owner LOGIN role, the extensions it asked for, and a credential that exists
// only in OpenBao.
// +kubebuilder:validation:XValidation:rule="has(self.spec.forProvider.database) || self.metadata.name.matches('^[a-z][a-z0-9_]{0,62}$')",message="metadata.name is not a valid PostgreSQL identifier (^[a-z][a-z0-9_]{0,62}$): set spec.forProvider.database",fieldPath=".spec.forProvider.database"
// +kubebuilder:validation:XValidation:rule="has(self.spec.forProvider.database) || (!self.metadata.name.startsWith('pg_') && !(self.metadata.name in ['postgres', 'template0', 'template1', 'public', 'none']))",message="metadata.name is one of PostgreSQL's own database or role names (pg_*, postgres, template0, template1, public, none) and would be the database name: set spec.forProvider.database",fieldPath=".spec.forProvider.database"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="DATABASE",type="string",JSONPath=".metadata.annotations.crossplane\\.io/external-name"
// +kubebuilder:printcolumn:name="PHASE",type="string",JSONPath=".status.atProvider.phase"
// +kubebuilder:printcolumn:name="CONFIG",type="string",JSONPath=".spec.providerConfigRef.name"
// +kubebuilder:printcolumn:name="REASON",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason",priority=1
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,postgresql}
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseSpec   `json:"spec"`
	Status DatabaseStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DatabaseList contains a list of Databases.
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}
