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
// +kubebuilder:validation:XValidation:rule="self.database == oldSelf.database",message="spec.forProvider.database is immutable",fieldPath=".database",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.loginRole) || (has(self.loginRole) && self.loginRole == oldSelf.loginRole)",message="spec.forProvider.loginRole is immutable once set",fieldPath=".loginRole",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.credentialPath) || (has(self.credentialPath) && self.credentialPath == oldSelf.credentialPath)",message="spec.forProvider.credentialPath is immutable once set",fieldPath=".credentialPath",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="has(self.options) == has(oldSelf.options) && (!has(self.options) || self.options == oldSelf.options)",message="spec.forProvider.options is immutable: the encoding and locale are fixed when the Database is created",fieldPath=".options",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.extensions) || (has(self.extensions) && oldSelf.extensions.all(e, e in self.extensions))",message="spec.forProvider.extensions is append-only: an extension cannot be removed (the provider never runs DROP EXTENSION)",fieldPath=".extensions",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.dataRoles) || self.dataRoles.all(r, size(has(self.loginRole) ? self.loginRole : self.database) + 1 + size(r.name) + 2 <= 63)",message="a data role's login roles, <loginRole>_<name>_1 and _2, must fit PostgreSQL's 63 characters: shorten the role's name",fieldPath=".dataRoles"
type DatabaseParameters struct {
	// Database is the PostgreSQL database name. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('pg_') && !(self in ['postgres', 'template0', 'template1', 'public', 'none'])",message="spec.forProvider.database must not start with pg_ nor be postgres, template0, template1, public or none: these are PostgreSQL's own database and role names (the login role defaults to the database name)"
	Database string `json:"database"`

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
	// derived from the Database's own name as
	// <database-base-path>/<metadata.name> and must not be set here; for an
	// import (managementPolicies without Create) it names the existing
	// record, which must not belong to another Database. Immutable once set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '.' || s == '..')",message="spec.forProvider.credentialPath must not contain '.' or '..' segments"
	// +kubebuilder:validation:XValidation:rule="!(self.split('/')[0] in ['data', 'metadata'])",message="spec.forProvider.credentialPath is relative to the KV mount: leave out the data/ or metadata/ API prefix"
	// +optional
	CredentialPath *string `json:"credentialPath,omitempty"`

	// Limits override, field by field, the ClusterProviderConfig's
	// spec.tenantLimits for this Database's login role. Written by a
	// platform admin; a Tenant cannot set them.
	// +optional
	Limits *TenantLimits `json:"limits,omitempty"`

	// CredentialPolicy overrides, field by field, the
	// ClusterProviderConfig's spec.credentialPolicy for this Database's
	// data roles. Written by a platform admin; a Tenant cannot set it.
	// +optional
	CredentialPolicy *CredentialPolicy `json:"credentialPolicy,omitempty"`

	// DataRoles are login roles beside the owner that use the owner's data
	// and own nothing: the identity a running app uses (readWrite) and
	// one for reporting and backup tools (readOnly). Each gets its own
	// credential record (<the Database's record>/roles/<name>; for an
	// import, under the path a provisioning Database's record would have)
	// and the login role <loginRole>_<name>. Removing one drops its role.
	// An import gets them only with Update in its management policies. None
	// by default: the owner only.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	DataRoles []DataRole `json:"dataRoles,omitempty"`

	// Options are the encoding and locale the database is created with,
	// within what the ClusterProviderConfig allows
	// (spec.databaseOptions). Immutable. For an import, they are what the
	// existing database is expected to have: a difference is reported
	// (status.atProvider.options, condition OptionsDiffer), never changed.
	// +optional
	Options *DatabaseOptions `json:"options,omitempty"`
}

// DataAccess is what a data role may do with the owner's data.
// +kubebuilder:validation:Enum=readWrite;readOnly
type DataAccess string

// Data accesses.
const (
	// DataReadWrite reads and writes rows of the owner's tables, uses its
	// sequences and calls its routines: no DDL, no TRUNCATE, no CREATE.
	DataReadWrite DataAccess = "readWrite"
	// DataReadOnly reads rows of the owner's tables and its sequences'
	// values.
	DataReadOnly DataAccess = "readOnly"
)

// DataRole is a login role beside a database's owner.
// +kubebuilder:validation:XValidation:rule="self.access == oldSelf.access",message="a data role's access is fixed: remove the role and add one under another name",fieldPath=".access",reason=FieldValueForbidden
type DataRole struct {
	// Name tells the role apart: its login role is <loginRole>_<name>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9]{0,14}$`
	Name string `json:"name"`

	// Access is what the role may do: readWrite or readOnly.
	Access DataAccess `json:"access"`

	// Limits override, field by field, the ClusterProviderConfig's
	// spec.tenantLimits for this role. Written by a platform admin.
	// +optional
	Limits *TenantLimits `json:"limits,omitempty"`

	// CredentialRotation requests a rotation of this role's password when
	// its ID changes, as spec.credentialRotation does for the owner's
	// (which rotates every data role too). A role created with the field
	// does not rotate.
	// +optional
	CredentialRotation *CredentialRotation `json:"credentialRotation,omitempty"`
}

// CredentialRotation asks the provider to replace a Database's password.
type CredentialRotation struct {
	// ID names the rotation; any value. Setting it on a Database that has
	// none, or changing it, requests one rotation: a new random password is
	// written as a new version of the credential record (the other fields
	// unchanged), set on the login role as a SCRAM-SHA-256 verifier, and
	// proven by a login; status.atProvider.credentialRotation.id then shows
	// this ID. Removing the field, or keeping the ID, rotates nothing. A
	// rotation whose new password is already in OpenBao is always finished,
	// with that password, even after an interruption or a change of ID.
	// Needs Create or Update in spec.managementPolicies, and a Database
	// that is otherwise Ready: a Database in Conflict, ImmutableField,
	// EndpointChanged or DatabaseVanished reports and rotates nothing. A
	// Database created with the field does not rotate: its first password
	// counts as the rotation of that ID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ID string `json:"id"`

	// TerminateSessions: after the role's password is set, end every
	// session of the login role (they logged in with the old password),
	// except the provider's own. The admin role needs the privileges of the
	// login role (membership with INHERIT, which the provider holds on
	// every role it provisions) or of pg_signal_backend. A rotation resumed
	// after an interruption ends them again, including sessions opened with
	// the new password in between. Default false: existing sessions stay
	// until they disconnect; only new logins need the new password.
	// +kubebuilder:default=false
	// +optional
	TerminateSessions bool `json:"terminateSessions,omitempty"`
}

// AccessCleanup asks the provider to remove every access to a Database's
// database other than its login role's and the provider's admin role's.
type AccessCleanup struct {
	// ID names the cleanup; any value. Setting it, or changing it,
	// requests one cleanup: the provider, in its own sessions, revokes the
	// database's privileges from other roles (CASCADE), revokes other
	// roles' memberships in the login role, removes the login role's
	// default privileges for other roles and other roles' privileges on
	// objects inside the database, and ends other roles' sessions on the
	// database. What it cannot remove (objects owned by other roles, a
	// membership only a superuser may revoke, a superuser's session) is
	// reported in status.atProvider.accessCleanup.remaining with the
	// reason. status.atProvider.accessCleanup.id then shows this ID, and
	// the credential record's metadata keeps it. Removing the field, or
	// keeping the ID, removes nothing. Needs Update in
	// spec.managementPolicies and a Database that is otherwise Ready
	// (Bound or Released): in Conflict, ImmutableField, EndpointChanged or
	// DatabaseVanished it reports and removes nothing.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ID string `json:"id"`
}

// AccessCleanupObservation is the last completed access cleanup.
type AccessCleanupObservation struct {
	// ID of the last completed cleanup.
	// +optional
	ID string `json:"id,omitempty"`

	// CompletedAt is when it completed.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// Removed counts what the cleanup removed. Absent when status was
	// rebuilt from the credential record's metadata.
	// +optional
	Removed *AccessCleanupCounts `json:"removed,omitempty"`

	// Remaining lists what the cleanup could not remove, each with the
	// reason and what an admin can do (at most 20 entries).
	// +optional
	Remaining []string `json:"remaining,omitempty"`
}

// AccessCleanupCounts counts what an access cleanup removed.
type AccessCleanupCounts struct {
	// DatabaseGrants: roles whose privileges on the database were revoked.
	// +optional
	DatabaseGrants int `json:"databaseGrants,omitempty"`
	// Memberships: grants of the login role to other roles revoked.
	// +optional
	Memberships int `json:"memberships,omitempty"`
	// DefaultPrivileges: default privileges for other roles removed.
	// +optional
	DefaultPrivileges int `json:"defaultPrivileges,omitempty"`
	// ObjectGrants: other roles' privileges on objects inside the database
	// revoked.
	// +optional
	ObjectGrants int `json:"objectGrants,omitempty"`
	// Sessions: other roles' sessions on the database ended.
	// +optional
	Sessions int `json:"sessions,omitempty"`
}

// CredentialRotationObservation is the last completed rotation.
type CredentialRotationObservation struct {
	// ID of the last completed rotation.
	// +optional
	ID string `json:"id,omitempty"`

	// CompletedAt is when its new password was proven by a login.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// DefaultManagementPolicies is the CRD default of a Database's
// spec.managementPolicies. It includes Delete so that the provider is called
// when a Database is deleted; whether anything is dropped is decided by
// spec.reclaimPolicy alone (Retain by default).
var DefaultManagementPolicies = xpv2.ManagementPolicies{
	xpv2.ManagementActionObserve,
	xpv2.ManagementActionCreate,
	xpv2.ManagementActionUpdate,
	xpv2.ManagementActionLateInitialize,
	xpv2.ManagementActionDelete,
}

// ReclaimPolicy says what happens to a Database's database, role and
// credential when the Database is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

// Reclaim policies.
const (
	// ReclaimRetain keeps everything: the database, the role and the
	// credential record stay; a released Database stays as a record.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete drops what the Database provably owns when it is
	// deleted, and deletes the Database when its claim is released.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// ClaimReference names the Tenant a Database is bound (or reserved) to.
type ClaimReference struct {
	// Namespace of the Tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// Name of the Tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// UID of the Tenant. Written by the binder; left empty by an admin who
	// reserves the Database for a Tenant of this namespace and name that
	// does not exist yet.
	// +kubebuilder:validation:MaxLength=36
	// +optional
	UID string `json:"uid,omitempty"`
}

// BindingPhase is where a Database stands with its claim.
// +kubebuilder:validation:Enum=Available;Bound;Released
type BindingPhase string

// Binding phases, after Kubernetes' PersistentVolume phases.
const (
	// BindingAvailable: no claim (or a claim reserved by an admin that no
	// Tenant has taken yet).
	BindingAvailable BindingPhase = "Available"
	// BindingBound: the claim's Tenant uses the Database.
	BindingBound BindingPhase = "Bound"
	// BindingReleased: the claim's Tenant is gone. Not open for binding
	// until an admin clears or presets spec.claimRef.
	BindingReleased BindingPhase = "Released"
)

// BindingStatus is the Database's side of its binding.
type BindingStatus struct {
	// Phase is Available, Bound or Released.
	// +optional
	Phase BindingPhase `json:"phase,omitempty"`

	// Claim is the claim as <namespace>/<name>, for display.
	// +optional
	Claim string `json:"claim,omitempty"`

	// ReleasedClaim is the claim that was released (kept for diagnosis
	// after an admin clears spec.claimRef).
	// +optional
	ReleasedClaim *ClaimReference `json:"releasedClaim,omitempty"`
}

// DatabasePhase is the last confirmed provisioning step of a Database.
// +kubebuilder:validation:Enum=Pending;Planned;CredentialCreated;RoleCreated;DatabaseCreated;Ready;Deleting
type DatabasePhase string

// Database phases, in provisioning order.
const (
	DatabasePhasePending           DatabasePhase = "Pending"
	DatabasePhasePlanned           DatabasePhase = "Planned"
	DatabasePhaseCredentialCreated DatabasePhase = "CredentialCreated" //nolint:gosec // a phase name, not a credential
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

	// Version, on a DatabaseBinding, is the version of the Database's
	// credential record whose password the delivery copy holds. The
	// Tenant's ExternalSecret carries it as an annotation, so that a
	// rotation reaches the app's Secret at once rather than at the next
	// refresh.
	// +optional
	Version int64 `json:"version,omitempty"`
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

	// CredentialRotation is the last completed rotation of the credential
	// (spec.credentialRotation). Rebuilt from the credential record's
	// metadata when status is lost.
	// +optional
	CredentialRotation *CredentialRotationObservation `json:"credentialRotation,omitempty"`

	// AccessCleanup is the last completed access cleanup
	// (spec.accessCleanup). Its ID and time are rebuilt from the
	// credential record's metadata when status is lost.
	// +optional
	AccessCleanup *AccessCleanupObservation `json:"accessCleanup,omitempty"`

	// OtherAccess lists the roles other than the owner (and the provider's
	// admin role, and PUBLIC, whose CONNECT is revoked) that can reach the
	// database: grantees of privileges on it, and members of the login
	// role. Reported, never revoked: it may be intended. Absent when there
	// are none; the OtherAccess condition says the same.
	// +optional
	OtherAccess *OtherAccessObservation `json:"otherAccess,omitempty"`

	// Limits are the login role's connection limit and session defaults as
	// the server shows them.
	// +optional
	Limits *LimitsObservation `json:"limits,omitempty"`

	// Options are the encoding and locale the database has, read from
	// pg_database once per database (they cannot change).
	// +optional
	Options *DatabaseOptionsObservation `json:"options,omitempty"`

	// DataRoles are the data roles (spec.forProvider.dataRoles) as the
	// server and OpenBao show them.
	// +listType=map
	// +listMapKey=name
	// +optional
	DataRoles []DataRoleObservation `json:"dataRoles,omitempty"`

	// Size of the database, from the config's last size refresh; written
	// only when it changed by more than a tenth (or crossed 1 MiB).
	// +optional
	Size *DatabaseSize `json:"size,omitempty"`
}

// DataRoleObservation is one data role as observed.
type DataRoleObservation struct {
	// Name is the entry's name in spec.forProvider.dataRoles.
	Name string `json:"name"`

	// Role is its login role.
	// +optional
	Role string `json:"role,omitempty"`

	// Access it was granted.
	// +optional
	Access DataAccess `json:"access,omitempty"`

	// CredentialPath is its credential record's KV v2 path, relative to
	// the provider's KV mount.
	// +optional
	CredentialPath string `json:"credentialPath,omitempty"`

	// Ready: the role exists, its record's password logs in and it holds
	// every privilege its access grants, and no CREATE.
	Ready bool `json:"ready"`

	// Missing are the privileges the last check found missing (put back
	// at the next update), at most ten.
	// +optional
	Missing []string `json:"missing,omitempty"`

	// Message says what is not ready, when it is not.
	// +optional
	Message string `json:"message,omitempty"`

	// CredentialRotation is the role's last completed rotation: the IDs of
	// its own request (id) and of the Database's (databaseID) it answered.
	// +optional
	CredentialRotation *DataRoleRotationObservation `json:"credentialRotation,omitempty"`

	// LoginRole is the login member the credential record (and the
	// Secret's username) names now: <role>_1 or <role>_2, which take turns
	// at each rotation. Role itself holds the privileges and cannot log in.
	// +optional
	LoginRole string `json:"loginRole,omitempty"`

	// PasswordSetAt is when the current password was set: its age.
	// +optional
	PasswordSetAt *metav1.Time `json:"passwordSetAt,omitempty"`

	// NextRotationAt is when the credential policy's maxAge rotates the
	// password next; unset without a maxAge.
	// +optional
	NextRotationAt *metav1.Time `json:"nextRotationAt,omitempty"`

	// PreviousLogin is the login that logged in before the last rotation
	// and still does until PreviousLoginEndsAt, its grace.
	// +optional
	PreviousLogin string `json:"previousLogin,omitempty"`

	// PreviousLoginEndsAt is when PreviousLogin's password is replaced by
	// one nobody knows.
	// +optional
	PreviousLoginEndsAt *metav1.Time `json:"previousLoginEndsAt,omitempty"`
}

// DataRoleRotationObservation is a data role's last completed rotation.
type DataRoleRotationObservation struct {
	// ID of the role's spec.forProvider.dataRoles[].credentialRotation
	// it answered.
	// +optional
	ID string `json:"id,omitempty"`

	// DatabaseID of the Database's spec.credentialRotation it answered.
	// +optional
	DatabaseID string `json:"databaseID,omitempty"`

	// CompletedAt is when its new password was proven by a login.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// OtherAccessObservation is the access roles other than the owner have to
// a Database's database.
type OtherAccessObservation struct {
	// Grantees of privileges on the database (CONNECT, TEMPORARY, CREATE).
	// +optional
	Grantees []DatabaseGrantee `json:"grantees,omitempty"`

	// Members of the login role: they act with its privileges.
	// +optional
	Members []RoleMember `json:"members,omitempty"`

	// Omitted counts the grantees and members not listed (at most 20 of
	// each are).
	// +optional
	Omitted int `json:"omitted,omitempty"`
}

// DatabaseGrantee is a role holding privileges on the database.
type DatabaseGrantee struct {
	// Role is the grantee.
	Role string `json:"role"`

	// Privileges it holds, each "WITH GRANT OPTION" when it may grant it
	// onwards.
	// +optional
	Privileges []string `json:"privileges,omitempty"`
}

// RoleMember is a member of the login role.
type RoleMember struct {
	// Role is the member.
	Role string `json:"role"`

	// AdminOption: the member may grant the login role onwards.
	// +optional
	AdminOption bool `json:"adminOption,omitempty"`

	// InheritOption: the member uses the login role's privileges without
	// SET ROLE (PostgreSQL 16 and later; absent before, where the member's
	// own INHERIT attribute decides).
	// +optional
	InheritOption *bool `json:"inheritOption,omitempty"`

	// SetOption: the member may SET ROLE to the login role (PostgreSQL 16
	// and later; absent before, where every member may).
	// +optional
	SetOption *bool `json:"setOption,omitempty"`
}

// A DatabaseSpec defines the desired state of a Database.
//
// +kubebuilder:validation:XValidation:rule="has(self.providerConfigRef) && size(self.providerConfigRef.name) > 0",message="spec.providerConfigRef.name must name the ClusterProviderConfig (the server) of this Database",fieldPath=".providerConfigRef"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerConfigRef) || (has(self.providerConfigRef) && self.providerConfigRef.name == oldSelf.providerConfigRef.name)",message="spec.providerConfigRef is immutable once set: a Database cannot move to another server",fieldPath=".providerConfigRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.reclaimPolicy) || self.reclaimPolicy != 'Delete' || !has(self.managementPolicies) || self.managementPolicies.exists(p, p == 'Delete' || p == '*')",message="spec.reclaimPolicy Delete needs Delete (or \"*\") in spec.managementPolicies: without it the provider is never called to drop anything",fieldPath=".reclaimPolicy"
// +kubebuilder:validation:XValidation:rule="!has(self.deletionPolicy) || self.deletionPolicy != 'Orphan'",message="spec.deletionPolicy Orphan is not supported: it would skip the provider's deletion logic; use spec.reclaimPolicy instead (Retain keeps the database, its role and its credential)",fieldPath=".deletionPolicy"
// +kubebuilder:validation:XValidation:rule="!has(self.writeConnectionSecretToRef)",message="spec.writeConnectionSecretToRef is not supported: the provider never writes a credential to a Kubernetes Secret; the credential is in OpenBao (status.atProvider.credential.path), and a Tenant's namespace gets it through External Secrets",fieldPath=".writeConnectionSecretToRef",reason=FieldValueForbidden
//
// spec.deletionPolicy, embedded from Crossplane, is not a deletion switch
// here: deletion is decided by spec.reclaimPolicy alone, and Orphan, which
// would make Crossplane skip the provider's deletion logic, is refused.
// spec.writeConnectionSecretToRef, embedded from Crossplane too, is refused:
// crossplane-runtime would write a Kubernetes Secret for it.
//
// The CRD's default for spec.managementPolicies is DefaultManagementPolicies,
// set by hack/crdpatch during `make generate` (controller-gen cannot
// override a default of an embedded field).
type DatabaseSpec struct {
	xpv2.ClusterManagedResourceSpec `json:",inline"`

	ForProvider DatabaseParameters `json:"forProvider"`

	// ReclaimPolicy is what deleting the Database (or, for a dynamically
	// provisioned one, releasing its claim) does: Retain keeps the database,
	// its role and its credential; Delete drops what the Database provably
	// owns. The only deletion switch; it cannot be changed once deletion
	// has started.
	// +kubebuilder:default=Retain
	// +optional
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// ClaimRef is the Tenant this Database is bound to, written by the
	// binder; or, preset by an admin, the only Tenant that may bind it. A
	// released Database keeps its claimRef (with the old Tenant's UID) and
	// is not bindable until an admin clears or replaces it. Presetting it
	// for another Tenant removes the uid with the change (a merge patch
	// keeps what it does not name: "uid":null): a claim naming a new
	// Tenant with the old one's UID is refused.
	// +kubebuilder:validation:XValidation:rule="(self.__namespace__ == oldSelf.__namespace__ && self.name == oldSelf.name) || !has(oldSelf.uid) || oldSelf.uid == '' || !has(self.uid) || self.uid != oldSelf.uid",message="spec.claimRef names another Tenant but keeps the uid of the Tenant it named: remove spec.claimRef.uid when presetting the claim for another Tenant (with a merge patch, \"uid\":null); the binder writes the new Tenant's uid",fieldPath=".uid",reason=FieldValueInvalid
	// +optional
	ClaimRef *ClaimReference `json:"claimRef,omitempty"`

	// CredentialRotation requests a rotation of the Database's password
	// when its ID changes; see CredentialRotation. It rotates every data
	// role's password too, each as its own rotation (a role's status shows
	// this ID as its credentialRotation.databaseID once done). Without it
	// the password is never changed.
	// +optional
	CredentialRotation *CredentialRotation `json:"credentialRotation,omitempty"`

	// AccessCleanup requests, when its ID changes, that the provider
	// remove every access to the database other than the login role's and
	// its own; see AccessCleanup. Used before a Released Database is
	// handed to another team. Without it nothing is ever revoked.
	// +optional
	AccessCleanup *AccessCleanup `json:"accessCleanup,omitempty"`
}

// A DatabaseStatus represents the observed state of a Database.
type DatabaseStatus struct {
	xpv2.ManagedResourceStatus `json:",inline"`

	AtProvider DatabaseObservation `json:"atProvider,omitempty"`

	// Binding is the Database's side of its claim.
	// +optional
	Binding BindingStatus `json:"binding,omitempty"`
}

// +kubebuilder:object:root=true

// A Database is one PostgreSQL database on a registered server, with its own
// owner LOGIN role, the extensions it asked for, and a credential that exists
// only in OpenBao. Databases are cluster-scoped and written by platform
// admins (an import, or a Database reserved for a Tenant) or by the provider
// (dynamic provisioning for a Tenant); a Tenant binds one through its
// DatabaseBinding, as a PersistentVolumeClaim binds a PersistentVolume.
// +kubebuilder:printcolumn:name="INSTANCE",type="string",JSONPath=".spec.providerConfigRef.name"
// +kubebuilder:printcolumn:name="DATABASE",type="string",JSONPath=".spec.forProvider.database"
// +kubebuilder:printcolumn:name="BINDING",type="string",JSONPath=".status.binding.phase"
// +kubebuilder:printcolumn:name="CLAIM",type="string",JSONPath=".status.binding.claim"
// +kubebuilder:printcolumn:name="RECLAIM",type="string",JSONPath=".spec.reclaimPolicy"
// +kubebuilder:printcolumn:name="PHASE",type="string",JSONPath=".status.atProvider.phase"
// +kubebuilder:printcolumn:name="SIZE",type="string",JSONPath=".status.atProvider.size.human"
// +kubebuilder:printcolumn:name="SYNCED",type="string",JSONPath=".status.conditions[?(@.type=='Synced')].status"
// +kubebuilder:printcolumn:name="READY",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="REASON",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason",priority=1
// +kubebuilder:printcolumn:name="OTHER-ACCESS",type="string",JSONPath=".status.conditions[?(@.type=='OtherAccess')].status",priority=1
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories={crossplane,managed,postgresql}
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
