package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// SSLMode is libpq's sslmode, limited to the modes this provider supports.
// The provider never downgrades: the mode named here is the mode used.
// +kubebuilder:validation:Enum=disable;require;verify-ca;verify-full
type SSLMode string

// The supported SSL modes, with libpq's meanings.
const (
	// SSLModeDisable sends everything in clear. Only for loopback test servers.
	SSLModeDisable SSLMode = "disable"
	// SSLModeRequire encrypts but does not verify the server certificate.
	SSLModeRequire SSLMode = "require"
	// SSLModeVerifyCA encrypts and verifies the chain against the CA bundle.
	SSLModeVerifyCA SSLMode = "verify-ca"
	// SSLModeVerifyFull also verifies that the certificate names the server.
	SSLModeVerifyFull SSLMode = "verify-full"
)

// Endpoint locates one PostgreSQL server.
type Endpoint struct {
	// Host is the server's DNS name. With sslMode verify-full the server
	// certificate must carry it as a DNS SAN.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$`
	Host string `json:"host"`

	// Hostaddr is one IPv4 or IPv6 literal the provider connects to, so that
	// no DNS lookup decides which server receives the admin credential; with
	// sslMode verify-full the server certificate must then carry it as an IP
	// SAN as well. Optional: without it the provider resolves host, and
	// verify-full verifies the host name only. Managed services (Amazon RDS,
	// Cloud SQL, Azure) issue certificates with DNS names only, so leave it
	// out for them. Tenants' credentials carry it (empty when unset, which
	// libpq ignores).
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="hostaddr must be an IPv4 or IPv6 literal, not a DNS name"
	// +optional
	Hostaddr string `json:"hostaddr,omitempty"`

	// Port is the server's TCP port.
	// +kubebuilder:default=5432
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Database is the admin database the provider connects to.
	// +kubebuilder:default=postgres
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Database string `json:"database,omitempty"`

	// SSLMode is libpq's sslmode: disable, require (encrypt without
	// verification), verify-ca or verify-full. Never silently downgraded.
	// +kubebuilder:default=verify-full
	// +optional
	SSLMode SSLMode `json:"sslMode,omitempty"`
}

// CredentialsSource names where the admin credential comes from.
// +kubebuilder:validation:Enum=Secret
type CredentialsSource string

// CredentialsSourceSecret reads the admin credential from a Kubernetes Secret.
const CredentialsSourceSecret CredentialsSource = "Secret"

// SecretReference names a Secret. A ClusterProviderConfig must name the
// namespace, and it must be the provider's own namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the Secret.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// Credentials of the admin role the provider logs in as. The provider only
// reads the Secret; it never writes it.
type Credentials struct {
	// Source of the admin credential. Only Secret is supported.
	// +kubebuilder:default=Secret
	// +optional
	Source CredentialsSource `json:"source,omitempty"`

	// SecretRef names the Secret holding the admin username and password.
	SecretRef SecretReference `json:"secretRef"`

	// UsernameKey is the Secret key holding the admin role name.
	// +kubebuilder:default=username
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	UsernameKey string `json:"usernameKey,omitempty"`

	// PasswordKey is the Secret key holding the admin password.
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
}

// A ProviderConfigSpec registers one existing PostgreSQL server and the admin
// credential the provider uses on it.
type ProviderConfigSpec struct {
	// Endpoint of the PostgreSQL server.
	Endpoint Endpoint `json:"endpoint"`

	// Credentials of the admin role.
	Credentials Credentials `json:"credentials"`

	// DefaultReclaimPolicy is copied into every Database provisioned
	// dynamically on this server (as a StorageClass's reclaimPolicy is into
	// its PersistentVolumes): Retain keeps the database, role and credential
	// when the Tenant goes; Delete drops them.
	// +kubebuilder:default=Retain
	// +optional
	DefaultReclaimPolicy ReclaimPolicy `json:"defaultReclaimPolicy,omitempty"`

	// TenantLimits are the defaults of every tenant login role on this
	// server (a Database's spec.forProvider.limits overrides them field by
	// field). Applied when the role is created and repaired when drifted.
	// +optional
	TenantLimits *TenantLimits `json:"tenantLimits,omitempty"`

	// CredentialPolicy is the default of every Database on this server
	// (a Database's spec.forProvider.credentialPolicy overrides it field by
	// field): the longest its data roles' passwords live, and how long
	// the previous login keeps working after a rotation.
	// +optional
	CredentialPolicy *CredentialPolicy `json:"credentialPolicy,omitempty"`

	// DatabaseOptions are the encoding and locale new databases on this
	// server get by default, and what a Database may ask instead.
	// +optional
	DatabaseOptions *DatabaseOptionsPolicy `json:"databaseOptions,omitempty"`

	// Namespaces says which namespaces' Tenants may take databases on this
	// server, and how many each. Absent: every namespace, any number.
	// +optional
	Namespaces *NamespacePolicy `json:"namespaces,omitempty"`

	// UnhardenedTemplate1 is what the health check does with a server whose
	// template1 lets every role create objects in it (PostgreSQL 14, and
	// servers upgraded from it, as a managed service leaves them, where the
	// admin role cannot change it): Refuse (the default) keeps the config
	// not Ready (UnsafeTemplates); Warn makes it Ready with a warning in
	// its Ready message. The provider copies its databases from template0
	// only, so what a tenant plants in template1 reaches only databases
	// others create from template1. A template0 that accepts connections
	// is refused either way.
	// +kubebuilder:default=Refuse
	// +optional
	UnhardenedTemplate1 Template1Policy `json:"unhardenedTemplate1,omitempty"`
}

// NamespacePolicy is which namespaces may take databases on a server, and
// how many each. It is checked only when a Tenant takes a database: a new
// one created for it, or an existing Database no admin reserved for it
// (spec.claimRef unset). A Database an admin reserved for a Tenant is the
// admin's decision and passes. Changing the policy never touches a
// Database already bound: it keeps its Tenant, credential and data roles.
type NamespacePolicy struct {
	// Selector selects the namespaces whose Tenants may take databases on
	// this server, by the namespace's labels (as a NetworkPolicy's
	// namespaceSelector does). Absent or empty: every namespace. A Tenant
	// elsewhere is refused (NamespaceNotAllowed) and nothing is created.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// MaxTenants is how many Databases on this server one namespace may
	// hold: bound to its Tenants, being created for them, or reserved for
	// them by an admin (released ones do not count). A Tenant that would
	// exceed it is refused (NamespaceLimitReached) and nothing is created;
	// it is taken at a later poll once the namespace holds fewer. Absent:
	// no limit; 0: the namespace may take none.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxTenants *int32 `json:"maxTenants,omitempty"`

	// Default makes this server the default of the namespaces it serves: a
	// Tenant there that names neither a server (spec.instanceRef) nor a
	// Database (spec.databaseRef) gets its new database here, and its
	// status.instance shows this config's name. Where two or more default
	// servers serve one namespace, a Tenant there is refused
	// (DefaultServerAmbiguous), never placed on either; where none does,
	// it is refused too (NoDefaultServer). A Tenant keeps the server it
	// landed on when the default changes later.
	// +optional
	Default bool `json:"default,omitempty"`
}

// Template1Policy is what a config does with a template1 every role may
// create objects in.
// +kubebuilder:validation:Enum=Refuse;Warn
type Template1Policy string

// Template1 policies.
const (
	Template1Refuse Template1Policy = "Refuse"
	Template1Warn   Template1Policy = "Warn"
)

// ConfigPhase is the lifecycle phase of a (Cluster)ProviderConfig.
// +kubebuilder:validation:Enum=Pending;Validating;Ready;Deleting
type ConfigPhase string

// Config phases.
const (
	ConfigPhasePending    ConfigPhase = "Pending"
	ConfigPhaseValidating ConfigPhase = "Validating"
	ConfigPhaseReady      ConfigPhase = "Ready"
	ConfigPhaseDeleting   ConfigPhase = "Deleting"
)

// A ProviderConfigStatus is the observed health of a registered server.
type ProviderConfigStatus struct {
	xpv2.ProviderConfigStatus `json:",inline"`

	// Phase is Pending, Validating, Ready or Deleting.
	// +optional
	Phase ConfigPhase `json:"phase,omitempty"`

	// PostgreSQLVersion is the server_version the server reported.
	// +optional
	PostgreSQLVersion string `json:"postgresqlVersion,omitempty"`

	// ServerIdentity is the server's system identifier
	// (pg_control_system().system_identifier), which tells this server from
	// another one behind the same address. Empty when the admin role may not
	// execute pg_control_system (some managed services revoke it).
	// +optional
	ServerIdentity string `json:"serverIdentity,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Connections is how the server's connections divide between the
	// admin and the tenant roles' connection limits; the ConnectionBudget
	// condition says whether they fit.
	// +optional
	Connections *ConnectionBudget `json:"connections,omitempty"`

	// Sizes of the databases of this config's Databases, from the last
	// size refresh (one query every few minutes).
	// +optional
	Sizes *ConfigSizes `json:"sizes,omitempty"`
}

// +kubebuilder:object:root=true

// A ClusterProviderConfig registers one existing PostgreSQL server for the
// whole cluster (the Instance). Its admin Secret lives in the provider's
// namespace.
// +kubebuilder:printcolumn:name="HOST",type="string",JSONPath=".spec.endpoint.host"
// +kubebuilder:printcolumn:name="HOSTADDR",type="string",JSONPath=".spec.endpoint.hostaddr",priority=1
// +kubebuilder:printcolumn:name="SSLMODE",type="string",JSONPath=".spec.endpoint.sslMode",priority=1
// +kubebuilder:printcolumn:name="DEFAULT",type="boolean",JSONPath=".spec.namespaces.default"
// +kubebuilder:printcolumn:name="PHASE",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="VERSION",type="string",JSONPath=".status.postgresqlVersion"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="REASON",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason",priority=1
// +kubebuilder:printcolumn:name="USERS",type="integer",JSONPath=".status.users"
// +kubebuilder:printcolumn:name="SIZE",type="string",JSONPath=".status.sizes.total",priority=1
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories={crossplane,provider,postgresql},shortName=pgserver
type ClusterProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="has(self.credentials.secretRef.__namespace__)",message="spec.credentials.secretRef.namespace is required for a ClusterProviderConfig: name the provider's own namespace",fieldPath=".credentials.secretRef.namespace"
	Spec   ProviderConfigSpec   `json:"spec"`
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterProviderConfigList contains a list of ClusterProviderConfigs.
type ClusterProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProviderConfig `json:"items"`
}

// +kubebuilder:object:root=true

// A ProviderConfigUsage records that a DatabaseBinding uses a
// ClusterProviderConfig (the instance it provisions on). It lives in the
// binding's namespace; the config cannot be deleted while usages of it
// exist.
// +kubebuilder:printcolumn:name="CONFIG-KIND",type="string",JSONPath=".providerConfigRef.kind"
// +kubebuilder:printcolumn:name="CONFIG-NAME",type="string",JSONPath=".providerConfigRef.name"
// +kubebuilder:printcolumn:name="RESOURCE-KIND",type="string",JSONPath=".resourceRef.kind"
// +kubebuilder:printcolumn:name="RESOURCE-NAME",type="string",JSONPath=".resourceRef.name"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Namespaced,categories={crossplane,provider,postgresql}
type ProviderConfigUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	xpv2.TypedProviderConfigUsage `json:",inline"`
}

// +kubebuilder:object:root=true

// ProviderConfigUsageList contains a list of ProviderConfigUsages.
type ProviderConfigUsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfigUsage `json:"items"`
}

// +kubebuilder:object:root=true

// A ClusterProviderConfigUsage records that a (cluster-scoped) Database uses
// a ClusterProviderConfig; the config cannot be deleted while usages of it
// exist, Released Databases included.
// +kubebuilder:printcolumn:name="CONFIG-NAME",type="string",JSONPath=".providerConfigRef.name"
// +kubebuilder:printcolumn:name="RESOURCE-KIND",type="string",JSONPath=".resourceRef.kind"
// +kubebuilder:printcolumn:name="RESOURCE-NAME",type="string",JSONPath=".resourceRef.name"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:resource:scope=Cluster,categories={crossplane,provider,postgresql}
type ClusterProviderConfigUsage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	xpv2.ProviderConfigUsage `json:",inline"`
}

// +kubebuilder:object:root=true

// ClusterProviderConfigUsageList contains a list of ClusterProviderConfigUsages.
type ClusterProviderConfigUsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProviderConfigUsage `json:"items"`
}
