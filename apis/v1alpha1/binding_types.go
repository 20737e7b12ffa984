package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// TenantReference names the Tenant a DatabaseBinding binds for. The Tenant
// lives in the DatabaseBinding's namespace.
type TenantReference struct {
	// Name of the Tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// UID of the Tenant: a new Tenant of the same name is another claim and
	// inherits nothing.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=36
	UID string `json:"uid"`
}

// DatabaseBindingParameters are what a Tenant asks for: an existing
// Database (databaseRef, static binding) or a new one on an instance
// (dynamic provisioning, providerConfigRef names the instance).
//
// +kubebuilder:validation:XValidation:rule="self.tenant == oldSelf.tenant",message="spec.forProvider.tenant is immutable",fieldPath=".tenant",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="has(self.databaseRef) == has(oldSelf.databaseRef) && (!has(self.databaseRef) || self.databaseRef == oldSelf.databaseRef)",message="spec.forProvider.databaseRef is immutable",fieldPath=".databaseRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.databaseRef) || (!has(self.database) && !has(self.loginRole))",message="a static binding (databaseRef) takes the Database's names: leave database and loginRole unset",fieldPath=".databaseRef"
// +kubebuilder:validation:XValidation:rule="has(self.databaseRef) || has(self.database)",message="a dynamic binding needs spec.forProvider.database",fieldPath=".database"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.database) || (has(self.database) && self.database == oldSelf.database)",message="spec.forProvider.database is immutable",fieldPath=".database",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.loginRole) || (has(self.loginRole) && self.loginRole == oldSelf.loginRole)",message="spec.forProvider.loginRole is immutable",fieldPath=".loginRole",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.extensions) || (has(self.extensions) && oldSelf.extensions.all(e, e in self.extensions))",message="spec.forProvider.extensions is append-only: an extension cannot be removed (the provider never runs DROP EXTENSION)",fieldPath=".extensions",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.databaseRef) || !has(self.options)",message="a static binding (databaseRef) takes the Database's encoding and locale: leave options unset",fieldPath=".options"
// +kubebuilder:validation:XValidation:rule="has(self.options) == has(oldSelf.options) && (!has(self.options) || self.options == oldSelf.options)",message="spec.forProvider.options is immutable",fieldPath=".options",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.dataRoles) || !has(self.database) || self.dataRoles.all(r, size(has(self.loginRole) ? self.loginRole : self.database) + 1 + size(r.name) + 2 <= 63)",message="a data role's login roles, <loginRole>_<name>_1 and _2, must fit PostgreSQL's 63 characters: shorten the role's name",fieldPath=".dataRoles"
type DatabaseBindingParameters struct {
	// Tenant is the requesting Tenant (in this namespace).
	Tenant TenantReference `json:"tenant"`

	// DatabaseRef is the name of an existing (cluster-scoped) Database to
	// bind: it must be Available, or reserved for this Tenant by its
	// claimRef. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	DatabaseRef *string `json:"databaseRef,omitempty"`

	// Database is the database name of a dynamically provisioned Database.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pg_') && !(self in ['postgres', 'template0', 'template1', 'public', 'none'])",message="spec.forProvider.database must not start with pg_ nor be postgres, template0, template1, public or none: these are PostgreSQL's own database and role names"
	// +optional
	Database *string `json:"database,omitempty"`

	// LoginRole of a dynamically provisioned Database (default: the
	// database name).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pg_') && !(self in ['postgres', 'template0', 'template1', 'public', 'none'])",message="spec.forProvider.loginRole must not start with pg_ nor be postgres, template0, template1, public or none: these are PostgreSQL's own database and role names"
	// +optional
	LoginRole *string `json:"loginRole,omitempty"`

	// Extensions the Tenant asks for (append-only). For a dynamic binding
	// they are the new Database's; for a static one they are appended to
	// the bound Database's only by an admin, and a missing one is reported.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +listType=set
	// +optional
	Extensions []string `json:"extensions,omitempty"`

	// Options are the encoding and locale of a dynamically provisioned
	// Database, within what its ClusterProviderConfig allows
	// (spec.databaseOptions.allowed): copied into the new Database's
	// spec.forProvider.options, which refuses a request outside it.
	// Immutable.
	// +optional
	Options *DatabaseOptions `json:"options,omitempty"`

	// DataRoles the Tenant asks for beside the owner: for a dynamic
	// binding they are kept on the new Database (added when listed,
	// removed once nothing of this namespace reads their credential); for
	// a static one they must be among the bound Database's, which only an
	// admin writes, and a missing one is reported. Each listed role's
	// credential is delivered beside the owner's, at
	// <delivery path>/roles/<name>.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	DataRoles []BindingDataRole `json:"dataRoles,omitempty"`
}

// BindingDataRole is a data role a Tenant asks for.
// +kubebuilder:validation:XValidation:rule="self.access == oldSelf.access",message="a data role's access is fixed: remove the role and add one under another name",fieldPath=".access",reason=FieldValueForbidden
type BindingDataRole struct {
	// Name tells the role apart: its login role is <loginRole>_<name>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9]{0,14}$`
	Name string `json:"name"`

	// Access is what the role may do: readWrite or readOnly.
	Access DataAccess `json:"access"`
}

// BindingDataRoleObservation is one data role's delivery.
type BindingDataRoleObservation struct {
	// Name is the entry's name in spec.forProvider.dataRoles.
	Name string `json:"name"`

	// Role is its login role.
	// +optional
	Role string `json:"role,omitempty"`

	// Credential locates its delivery copy, once delivered.
	// +optional
	Credential CredentialObservation `json:"credential,omitempty"`

	// Ready: the delivery copy holds the role's current credential.
	Ready bool `json:"ready"`

	// Message says what is not ready, when it is not.
	// +optional
	Message string `json:"message,omitempty"`
}

// DatabaseBindingPhase is where a binding stands.
// +kubebuilder:validation:Enum=Pending;Binding;Bound;Provisioning;Ready;Released
type DatabaseBindingPhase string

// DatabaseBinding phases.
const (
	BindingPhasePending      DatabaseBindingPhase = "Pending"
	BindingPhaseBinding      DatabaseBindingPhase = "Binding"
	BindingPhaseBound        DatabaseBindingPhase = "Bound"
	BindingPhaseProvisioning DatabaseBindingPhase = "Provisioning"
	BindingPhaseReady        DatabaseBindingPhase = "Ready"
	BindingPhaseReleased     DatabaseBindingPhase = "Released"
)

// DatabaseBindingObservation is the observed state of a binding.
type DatabaseBindingObservation struct {
	// Phase is Pending, Binding, Bound, Provisioning, Ready or Released.
	// +optional
	Phase DatabaseBindingPhase `json:"phase,omitempty"`

	// DatabaseName is the bound (cluster-scoped) Database, recorded only
	// once the Database's claimRef names this binding's Tenant.
	// +optional
	DatabaseName string `json:"databaseName,omitempty"`

	// DatabaseUID is the bound Database's UID.
	// +optional
	DatabaseUID string `json:"databaseUID,omitempty"`

	// Instance is the bound Database's ClusterProviderConfig.
	// +optional
	Instance string `json:"instance,omitempty"`

	// Database is the PostgreSQL database name.
	// +optional
	Database string `json:"database,omitempty"`

	// LoginRole is the database's owner login role.
	// +optional
	LoginRole string `json:"loginRole,omitempty"`

	// Credential locates the delivery copy of the credential that this
	// namespace's External Secrets identity reads.
	// +optional
	Credential CredentialObservation `json:"credential,omitempty"`

	// DataRoles are the deliveries of spec.forProvider.dataRoles, and of
	// those removed whose delivery copy is not yet gone.
	// +listType=map
	// +listMapKey=name
	// +optional
	DataRoles []BindingDataRoleObservation `json:"dataRoles,omitempty"`
}

// A DatabaseBindingSpec defines the desired state of a DatabaseBinding.
//
// +kubebuilder:validation:XValidation:rule="has(self.forProvider.databaseRef) || !has(self.providerConfigRef) || self.providerConfigRef.kind == 'ClusterProviderConfig'",message="a dynamic binding names its instance in spec.providerConfigRef (kind ClusterProviderConfig), or none to take its namespace's default server",fieldPath=".providerConfigRef"
// +kubebuilder:validation:XValidation:rule="!has(self.managementPolicies) || self.managementPolicies == ['*']",message="spec.managementPolicies of a DatabaseBinding is always [\"*\"], as the Tenant's Composition leaves it: without Delete (or Observe) its release would be skipped and the namespace's copy of the credential would stay in OpenBao",fieldPath=".managementPolicies",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.writeConnectionSecretToRef)",message="spec.writeConnectionSecretToRef is not supported: the provider never writes a credential to a Kubernetes Secret; the credential is in OpenBao, and the Tenant's ExternalSecret projects it into the namespace",fieldPath=".writeConnectionSecretToRef",reason=FieldValueForbidden
//
// spec.managementPolicies and spec.writeConnectionSecretToRef are embedded
// from Crossplane: the first is fixed to what the Composition composes (the
// default, ["*"]), so the release always runs; the second is refused, as
// crossplane-runtime would write a Kubernetes Secret for it.
type DatabaseBindingSpec struct {
	xpv2.ManagedResourceSpec `json:",inline"`

	ForProvider DatabaseBindingParameters `json:"forProvider"`
}

// A DatabaseBindingStatus is the observed state of a DatabaseBinding.
type DatabaseBindingStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	AtProvider DatabaseBindingObservation `json:"atProvider,omitempty"`
}

// +kubebuilder:object:root=true

// A DatabaseBinding is a Tenant's half of its binding to a cluster-scoped
// Database: it provisions one dynamically or binds an existing one, hands
// the credential to the namespace, and releases the Database when it is
// deleted. Only the Tenant's Composition writes it.
// +kubebuilder:printcolumn:name="DATABASE-OBJECT",type="string",JSONPath=".status.atProvider.databaseName"
// +kubebuilder:printcolumn:name="DATABASE",type="string",JSONPath=".status.atProvider.database"
// +kubebuilder:printcolumn:name="PHASE",type="string",JSONPath=".status.atProvider.phase"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="REASON",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,managed,postgresql}
type DatabaseBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseBindingSpec   `json:"spec"`
	Status DatabaseBindingStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DatabaseBindingList contains a list of DatabaseBindings.
type DatabaseBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DatabaseBinding `json:"items"`
}
