package tenancy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// Reasons of a DatabaseBinding's Ready condition. A binding also reports
// Conflict (the delivery path belongs to someone else), InvalidSpec and
// InstanceNotReady, shared with the Database.
const (
	// ReasonAlreadyBound: the Database is bound, or reserved, to another
	// Tenant.
	ReasonAlreadyBound = "AlreadyBound"
	// ReasonReleased: the Database was released by a Tenant that is gone;
	// it is never rebound until an admin clears or replaces its claimRef.
	ReasonReleased = "Released"
	// ReasonDatabaseNotFound: the named Database does not exist (or the
	// bound one is gone).
	ReasonDatabaseNotFound = "DatabaseNotFound"
	// ReasonDatabaseNotReady: the Database is not Ready, or is being
	// deleted.
	ReasonDatabaseNotReady = "DatabaseNotReady"
	// ReasonCredentialProjectionFailed: the credential could not be copied
	// to the namespace's delivery path (OpenBao failed, or the Database's
	// record is not usable).
	ReasonCredentialProjectionFailed = "CredentialProjectionFailed" //nolint:gosec // a condition reason, not a credential
	// ReasonWrongInstance: a static binding names an instance that is not
	// the Database's.
	ReasonWrongInstance = "WrongInstance"
	// ReasonNotATenantsBinding: the binding is not controlled by a Tenant
	// that exists in its namespace and names it: it was not written by a
	// Tenant's Composition, and binds nothing.
	ReasonNotATenantsBinding = "NotATenantsBinding"
	// ReasonTenantGone: the Tenant that controlled the binding no longer
	// exists (deleted with its dependents orphaned): the binding releases
	// its Database as if it were deleted, and can be deleted.
	ReasonTenantGone = "TenantGone"
	// ReasonNamespaceNotAllowed: the server's namespace selector does not
	// select the Tenant's namespace; nothing is taken there.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonNamespaceLimitReached: the namespace holds as many Databases on
	// the server as its config allows one namespace; nothing more is taken
	// until it holds fewer.
	ReasonNamespaceLimitReached = "NamespaceLimitReached"
)

// Reasons of a DatabaseBinding's Ready condition while it makes progress.
const (
	// ReasonBinding: the claim is being written or recorded.
	ReasonBinding = "Binding"
	// ReasonWaitingForTenant: the binding's Tenant exists but does not list
	// the binding among its composed resources yet.
	ReasonWaitingForTenant = "WaitingForTenant"
	// ReasonWaitingForExternalSecret: the binding is being deleted while an
	// ExternalSecret of its namespace still reads its delivery copy.
	ReasonWaitingForExternalSecret = "WaitingForExternalSecret"
	// ReasonProvisioning: the Database is being created.
	ReasonProvisioning = "Provisioning"
	// ReasonDelivering: the credential is being copied to the delivery
	// path.
	ReasonDelivering = "Delivering"
	// ReasonAvailable: the Tenant can use its database.
	ReasonAvailable = "Available"
)

// Ownership metadata keys of a delivery copy (with MetaManagedBy).
const (
	MetaBindingNamespace  = "binding-namespace"
	MetaBindingName       = "binding-name"
	MetaBindingUID        = "binding-uid"
	MetaTenantUID         = "tenant-uid"
	MetaSourceDatabase    = "source-database"
	MetaSourceDatabaseUID = "source-database-uid"
	MetaSourceVersion     = "source-version"
)

// DynamicNamePrefix prefixes the name of a dynamically provisioned
// Database.
const DynamicNamePrefix = "tenant-"

// DynamicDatabaseName is the name of the Database provisioned for a Tenant:
// derived from the Tenant's UID, so a retry finds the same object and a new
// Tenant of the same name gets another one.
func DynamicDatabaseName(tenantUID string) string { return DynamicNamePrefix + tenantUID }

// DeliveryPath is the KV path of the delivery copy a namespace reads:
// <base>/<namespace>/<tenant name>.
func DeliveryPath(base, namespace, tenant string) string {
	return base + "/" + namespace + "/" + tenant
}

var identifierFold = strings.NewReplacer("-", "_", ".", "_")

// DefaultIdentifier derives a database name from a Tenant name ("my-app" ->
// "my_app"): lower-cased, '-' and '.' replaced by '_'. A name that does not
// then make an acceptable PostgreSQL name is an error telling the user to
// set the database name explicitly.
func DefaultIdentifier(tenant string) (string, error) {
	id := identifierFold.Replace(strings.ToLower(tenant))
	if err := ValidateName("the database name derived from the Tenant name", id); err != nil {
		return "", fmt.Errorf("%w: set the database name explicitly", err)
	}
	return id, nil
}

// BindingSpec is what a DatabaseBinding asks for.
type BindingSpec struct {
	// Namespace, Name and UID of the DatabaseBinding.
	Namespace, Name, UID string
	// TenantName and TenantUID name the Tenant (in Namespace).
	TenantName, TenantUID string
	// DatabaseRef names an existing Database (static binding); empty for a
	// dynamic one.
	DatabaseRef string
	// Database, LoginRole and Extensions of a dynamic binding.
	Database, LoginRole string
	Extensions          []string
	// Options are the encoding and locale a dynamic binding asks.
	Options *v1alpha1.DatabaseOptions
	// DataRoles are the data roles the Tenant asks for.
	DataRoles []v1alpha1.BindingDataRole
	// InstanceKind and Instance are spec.providerConfigRef (empty when
	// unset).
	InstanceKind, Instance string
	// Controller is the binding's controller owner reference: the Tenant
	// (or, for a legacy claim, its composite) whose Composition wrote it;
	// zero when it has none.
	Controller ControllerRef
}

// ControllerRef is an object's controller owner reference.
type ControllerRef struct {
	APIVersion, Kind, Name, UID string
}

// The kinds whose Composition writes DatabaseBindings: the namespaced
// Tenant (package/configuration/xrd.yaml) and the legacy cluster-scoped
// composite whose claim is a Tenant (package/configuration/legacy).
const (
	TenantAPIVersion       = "database.ayatori.ddupan.top/v1alpha1"
	TenantKind             = "Tenant"
	LegacyTenantAPIVersion = "legacy.database.ayatori.ddupan.top/v1alpha1"
	LegacyCompositeKind    = "XTenant"
	LegacyClaimKind        = "Tenant"
)

// ResourceRef is an entry of a composite's resource references
// (spec.crossplane.resourceRefs of a Tenant, spec.resourceRefs of the
// legacy composite).
type ResourceRef struct {
	APIVersion, Kind, Name, Namespace string
}

// ObservedTenant is the Tenant a binding's controller reference names, as
// read from the API server (never from the binding). For the legacy
// composite, Namespace and Name are its claim's (spec.claimRef).
type ObservedTenant struct {
	// Found: the object exists.
	Found bool
	// Legacy: it is the legacy composite.
	Legacy          bool
	UID             string
	Namespace, Name string
	ResourceRefs    []ResourceRef
}

// Standing is whether a binding counts as its Tenant's.
type Standing string

// Standings of a binding.
const (
	// StandingTenants: its controller is a Tenant (or the legacy
	// composite) that exists in the binding's namespace, with the UID the
	// binding names, and lists the binding among its composed resources.
	StandingTenants Standing = "Tenants"
	// StandingPending: that Tenant exists with that UID but does not list
	// the binding yet (Crossplane writes the list before it creates the
	// binding, so this lasts only as long as a cache is behind).
	StandingPending Standing = "Pending"
	// StandingGone: the Tenant it names no longer exists (not found, or
	// another object of that name).
	StandingGone Standing = "Gone"
	// StandingForged: anything else (no Tenant kind, another namespace,
	// another UID, a Tenant composing another binding): the binding was
	// not written by its Tenant's Composition.
	StandingForged Standing = "Forged"
)

// StandingVerdict is a binding's standing and what its Ready condition
// says about it when it does not count.
type StandingVerdict struct {
	Standing        Standing
	Reason, Message string
}

// ControllerIsTenantKind reports whether a controller reference names one
// of the two served kinds whose Composition writes DatabaseBindings.
func ControllerIsTenantKind(c ControllerRef) bool {
	return (c.APIVersion == TenantAPIVersion && c.Kind == TenantKind) ||
		(c.APIVersion == LegacyTenantAPIVersion && c.Kind == LegacyCompositeKind)
}

// DecideStanding decides whether a binding counts as its Tenant's, from
// its spec (with its controller reference) and the Tenant read from the
// API server: for a binding with a controller, the object that reference
// names; for one without (its Tenant was deleted with its dependents
// orphaned, which removes the reference), the Tenant the spec names.
// Messages name nothing but the binding's own fields.
func DecideStanding(s BindingSpec, t ObservedTenant) StandingVerdict {
	forged := func(msg string) StandingVerdict {
		return StandingVerdict{Standing: StandingForged, Reason: ReasonNotATenantsBinding, Message: msg + ": a DatabaseBinding is written by its Tenant's Composition only; nothing is bound, and it keeps nothing in use"}
	}
	gone := StandingVerdict{Standing: StandingGone, Reason: ReasonTenantGone,
		Message: fmt.Sprintf("the Tenant %s of this namespace that this DatabaseBinding was made for no longer exists", s.TenantName)}
	c := s.Controller
	switch {
	case c.UID == "" && (!t.Found || t.UID != s.TenantUID):
		return gone
	case c.UID == "":
		return StandingVerdict{Standing: StandingPending, Reason: ReasonWaitingForTenant,
			Message: fmt.Sprintf("this DatabaseBinding has no controller: waiting for the Tenant %s to take it back", s.TenantName)}
	case !ControllerIsTenantKind(c):
		return forged(fmt.Sprintf("this DatabaseBinding's controller is a %s of %s, not a %s of %s or a %s of %s", c.Kind, c.APIVersion, TenantKind, TenantAPIVersion, LegacyCompositeKind, LegacyTenantAPIVersion))
	case c.UID != s.TenantUID:
		return forged("spec.forProvider.tenant.uid is not the UID of this DatabaseBinding's controller")
	case !t.Found || t.UID != c.UID:
		return gone
	case t.Namespace != s.Namespace || t.Name != s.TenantName:
		return forged("this DatabaseBinding's controller is not the Tenant spec.forProvider.tenant names in this namespace")
	}
	other := false
	for _, r := range t.ResourceRefs {
		if r.APIVersion != v1alpha1.SchemeGroupVersion.String() || r.Kind != v1alpha1.DatabaseBindingKind {
			continue
		}
		if r.Name == s.Name && (r.Namespace == "" || r.Namespace == s.Namespace) {
			return StandingVerdict{Standing: StandingTenants}
		}
		other = true
	}
	if other {
		return forged(fmt.Sprintf("the Tenant %s composes another DatabaseBinding", s.TenantName))
	}
	return StandingVerdict{Standing: StandingPending, Reason: ReasonWaitingForTenant,
		Message: fmt.Sprintf("waiting for the Tenant %s to list this DatabaseBinding among its composed resources", s.TenantName)}
}

// Claimancy is whether a claim's Tenant holds its Database through a
// binding that counts.
type Claimancy string

// Claimancies.
const (
	// ClaimLive: a binding of the claim's Tenant counts as its Tenant's.
	ClaimLive Claimancy = "Live"
	// ClaimPending: none counts yet, but one may (StandingPending): a
	// Database neither shows Released nor goes away meanwhile.
	ClaimPending Claimancy = "Pending"
	// ClaimNone: no binding holds the claim (none, being deleted, gone or
	// forged).
	ClaimNone Claimancy = "None"
)

// Static reports whether the binding names an existing Database.
func (s BindingSpec) Static() bool { return s.DatabaseRef != "" }

// DatabaseName is the Database the binding is about.
func (s BindingSpec) DatabaseName() string {
	if s.Static() {
		return s.DatabaseRef
	}
	return DynamicDatabaseName(s.TenantUID)
}

// Claim is the claimRef naming this binding's Tenant.
func (s BindingSpec) Claim() v1alpha1.ClaimReference {
	return v1alpha1.ClaimReference{Namespace: s.Namespace, Name: s.TenantName, UID: s.TenantUID}
}

// ObservedDatabase is what was read of the Database.
type ObservedDatabase struct {
	Present                    bool
	Name, UID, ResourceVersion string
	ClaimRef                   *v1alpha1.ClaimReference
	// ClaimantLive: a DatabaseBinding of the Tenant ClaimRef.UID, in
	// ClaimRef.Namespace and not being deleted, counts as that Tenant's
	// (or may yet: ClaimPending).
	ClaimantLive bool
	Deleting     bool
	// Ready is the Database's Ready condition.
	Ready         xpv2.Condition
	ReclaimPolicy v1alpha1.ReclaimPolicy
	// Instance is the Database's spec.providerConfigRef.name.
	Instance            string
	Database, LoginRole string
	// RecordPath is status.atProvider.credential.path.
	RecordPath string
	Binding    v1alpha1.BindingStatus
	// Protected: the Database carries the claim protection finalizer.
	Protected bool
}

// ObservedInstance is what was read of a ClusterProviderConfig.
type ObservedInstance struct {
	Present, Deleting    bool
	Ready                xpv2.Condition
	DefaultReclaimPolicy v1alpha1.ReclaimPolicy
	// Namespace is what its namespace policy says of the binding's
	// namespace, read only when the binding may take a Database.
	Namespace NamespaceUse
}

// NamespaceUse is what a config's namespace policy says of one namespace.
type NamespaceUse struct {
	// Read: the policy was applied (the binding may take a Database). A
	// binding that may take one and was not read takes nothing.
	Read bool
	// Selected: the namespace is among those the config serves (true
	// without a selector).
	Selected bool
	// Limited: the config limits the Databases one namespace holds, to
	// Limit; Held is how many the namespace holds now (being created
	// included).
	Limited     bool
	Limit, Held int
	// Invalid is why the config's selector cannot be applied ("": it
	// can).
	Invalid string
}

// namespaceRefusal refuses a binding whose namespace may not take one more
// Database on instance i, or returns false. It names no other namespace
// nor the selector (the admin's, not the team's).
func namespaceRefusal(s BindingSpec, instance string, i ObservedInstance) (BindingDecision, bool) {
	u := i.Namespace
	switch {
	case !u.Read:
		// Never taken on an unread policy.
		return wait(v1alpha1.BindingPhasePending, ReasonInstanceNotReady, fmt.Sprintf("which namespaces ClusterProviderConfig %s serves is not read yet", instance)), true
	case u.Invalid != "":
		return wait(v1alpha1.BindingPhasePending, ReasonInstanceNotReady, fmt.Sprintf("ClusterProviderConfig %s has a namespace selector that cannot be applied (%s): nothing is created until your platform team fixes it", instance, u.Invalid)), true
	case !u.Selected:
		return refuse(v1alpha1.BindingPhasePending, ReasonNamespaceNotAllowed, fmt.Sprintf("ClusterProviderConfig %s does not serve namespace %s (its namespace selector does not select it): nothing is created; ask your platform team to allow this namespace, or name a server that serves it", instance, s.Namespace)), true
	case u.Limited && u.Held >= u.Limit:
		return refuse(v1alpha1.BindingPhasePending, ReasonNamespaceLimitReached, fmt.Sprintf("namespace %s holds %d of the %d databases ClusterProviderConfig %s allows one namespace: nothing is created; it is taken once the namespace holds fewer (delete a Tenant there), or when your platform team raises the limit", s.Namespace, u.Held, u.Limit, instance)), true
	}
	return BindingDecision{}, false
}

// BindingRecord is the binding's side of the bind, in its status.
type BindingRecord struct {
	DatabaseName, DatabaseUID string
}

// BindingObservation is everything the binder decides on.
type BindingObservation struct {
	Spec BindingSpec
	// Deleting: the binding is being deleted.
	Deleting bool
	Database ObservedDatabase
	// Instance is the ClusterProviderConfig the binding names (dynamic:
	// where the Database is created; static: the Database's; a dynamic
	// binding that names none: its Database's, or else the one default
	// server of its namespace).
	Instance ObservedInstance
	// Default is which servers are the default of the binding's
	// namespace: read only for a dynamic binding that names no server
	// while its Database does not exist.
	Default DefaultChoice
	// Recorded is what the binding's status records.
	Recorded BindingRecord
	// RecordedCopy is the delivery path the binding's status records.
	RecordedCopy string
	// Standing is whether the binding counts as its Tenant's
	// (DecideStanding); only StandingTenants binds.
	Standing StandingVerdict
	// Phase is the phase the binding's status shows.
	Phase v1alpha1.DatabaseBindingPhase
	// Readers are the ExternalSecrets of the binding's namespace that read
	// its delivery copy (read only when the binding is being deleted or
	// its Tenant is gone).
	Readers []string
}

// BindingAction is what the binder does next.
type BindingAction string

// Binding actions.
const (
	// ActionCreateDynamic creates BindingDecision.Create.
	ActionCreateDynamic BindingAction = "CreateDynamic"
	// ActionWriteClaim writes BindingDecision.Claim into the Database with
	// the resourceVersion that was read.
	ActionWriteClaim BindingAction = "WriteClaim"
	// ActionCompleteRecord records BindingDecision.Record in the binding's
	// status.
	ActionCompleteRecord BindingAction = "CompleteRecord"
	// ActionCopyCredential copies the Database's record to the delivery
	// path when DecideDelivery says so.
	ActionCopyCredential BindingAction = "CopyCredential" //nolint:gosec // an action name, not a credential
	// ActionWait writes nothing: something else must happen first.
	ActionWait BindingAction = "Wait"
	// ActionRefuse writes nothing: a human must act (Reason, Message).
	ActionRefuse BindingAction = "Refuse"
	// ActionRelease releases the Database (BindingDecision.Release) on
	// deletion.
	ActionRelease BindingAction = "Release"
	// ActionNone: nothing left to do on the Database (a deleted binding
	// that has released it, or never bound it).
	ActionNone BindingAction = "None"
)

// BindingDecision is the binder's verdict.
type BindingDecision struct {
	Action BindingAction
	Phase  v1alpha1.DatabaseBindingPhase
	// Reason and Message of the Ready condition (never Available here: that
	// takes DecideDelivery's InSync).
	Reason, Message string
	// Create is the Database to create (ActionCreateDynamic).
	Create *v1alpha1.Database
	// Claim and ResourceVersion: the claimRef to write on the Database as
	// read at ResourceVersion (ActionWriteClaim).
	Claim           *v1alpha1.ClaimReference
	ResourceVersion string
	// Record is what the binding's status records: the Database once its
	// claimRef names this Tenant, empty otherwise (a one-sided record is
	// cleared).
	Record BindingRecord
	// Release is how the Database is released (ActionRelease).
	Release v1alpha1.ReclaimPolicy
	// Released is the Database's binding status to record on a Retain
	// release.
	Released *v1alpha1.BindingStatus
	// CheckCopy: on deletion, the delivery copy may exist and must be
	// deleted if it names this binding.
	CheckCopy bool
	// Orphaned: the binding's Tenant is gone; it is released as if it
	// were deleted (Release, CheckCopy) while it stays.
	Orphaned bool
	// Unprotect: on deletion, the released Database still carries the
	// claim protection this binding's Tenant put on it, and it is lifted
	// (after the Release, if any). Without it the Database could never go
	// away: nothing else removes that finalizer.
	Unprotect bool
}

// claimNames reports whether c names exactly this Tenant (namespace, name
// and UID).
func claimNames(c *v1alpha1.ClaimReference, s BindingSpec) bool {
	return c != nil && c.Namespace == s.Namespace && c.Name == s.TenantName && c.UID == s.TenantUID
}

// reservedFor reports whether c reserves the Database for this Tenant's
// namespace and name without a UID.
func reservedFor(c *v1alpha1.ClaimReference, s BindingSpec) bool {
	return c != nil && c.Namespace == s.Namespace && c.Name == s.TenantName && c.UID == ""
}

// describeClaim names a claim as the binding's namespace may see it: a
// Tenant of its own namespace by name, never a UID (an earlier Tenant's
// UID is what a forged binding would name), and nothing of another
// namespace.
func describeClaim(c *v1alpha1.ClaimReference, s BindingSpec) string {
	if c.Namespace == s.Namespace {
		return fmt.Sprintf("the Tenant %s of this namespace", c.Name)
	}
	return "a Tenant of another namespace"
}

// released reports whether the Database's binding status records that its
// current claim was released: a binding of that claim's Tenant never binds
// it again; an admin's edit of spec.claimRef does.
func released(d ObservedDatabase) bool { return ReleasedClaim(d.Binding, d.ClaimRef) }

// validateSpec returns what is wrong with the spec, or "".
func validateSpec(s BindingSpec) string {
	switch {
	case s.TenantName == "" || s.TenantUID == "":
		return "spec.forProvider.tenant must name the Tenant and its uid"
	case s.InstanceKind != "" && s.InstanceKind != v1alpha1.ClusterProviderConfigKind:
		return fmt.Sprintf("spec.providerConfigRef.kind must be %s (the instance), not %q", v1alpha1.ClusterProviderConfigKind, s.InstanceKind)
	case s.Static() && (s.Database != "" || s.LoginRole != ""):
		return "a static binding (spec.forProvider.databaseRef) takes the Database's names: leave database and loginRole unset"
	case s.Static():
		return ""
	case s.Database == "":
		return "a dynamic binding needs spec.forProvider.database"
	}
	if err := ValidateName("spec.forProvider.database", s.Database); err != nil {
		return err.Error()
	}
	if s.LoginRole != "" {
		if err := ValidateName("spec.forProvider.loginRole", s.LoginRole); err != nil {
			return err.Error()
		}
	}
	for _, x := range s.Extensions {
		if err := ValidateIdentifier("extension", x); err != nil {
			return err.Error()
		}
	}
	return ""
}

// What a binding's namespace reads. A binding's conditions are read in its
// namespace, and its Tenant shows them: they tell that namespace its own
// Tenant's state and nothing else. A config's or a Database's Ready
// message is written for admins: it names the server (host, hostaddr),
// other roles and databases on it (the owner of a database that is in the
// way, another Database's record) and the text of server and OpenBao
// errors. So a binding relays their reasons, each with a fixed text saying
// what the app team can do (namespaceAdvice); the message stays where
// admins read it.

// instanceProblem returns why the instance cannot be used now, or "". The
// config's message is not relayed.
func instanceProblem(name string, i ObservedInstance) string {
	switch {
	case !i.Present:
		return fmt.Sprintf("ClusterProviderConfig %s does not exist", name)
	case i.Deleting:
		return fmt.Sprintf("ClusterProviderConfig %s is being deleted", name)
	case i.Ready.Status != corev1.ConditionTrue && i.Ready.Reason == "":
		return fmt.Sprintf("ClusterProviderConfig %s is not Ready yet", name)
	case i.Ready.Status != corev1.ConditionTrue:
		return fmt.Sprintf("ClusterProviderConfig %s is not Ready (%s): ask your platform team; the config's status, which admins read, says why", name, i.Ready.Reason)
	}
	return ""
}

// databaseProblem returns why the Database cannot be used now, or "". Its
// Ready reason is relayed only when it is the binding's own (its claimRef
// names this Tenant), and its message only when it describes the Tenant's
// own request (namespaceAdvice); another Database's state is not the
// namespace's to see.
func databaseProblem(d ObservedDatabase, own bool) string {
	switch {
	case d.Deleting:
		return fmt.Sprintf("Database %s is being deleted", d.Name)
	case d.Ready.Status != corev1.ConditionTrue && (progressReasons[string(d.Ready.Reason)] || !own):
		// On its way (or not the binding's to describe): one stable
		// message, so that the Database's own progress messages do not
		// rewrite the binding's status, and render its Tenant, at each
		// step.
		return fmt.Sprintf("Database %s is not Ready yet", d.Name)
	case d.Ready.Status != corev1.ConditionTrue:
		return fmt.Sprintf("Database %s is not Ready (%s): %s", d.Name, d.Ready.Reason, namespaceAdvice(string(d.Ready.Reason), d.Ready.Message))
	case d.RecordPath == "":
		return fmt.Sprintf("Database %s reports no credential record yet", d.Name)
	}
	return ""
}

// namespaceAdvice says what an app team can do about its own Database's
// Ready reason, in place of the Database's message (which is for admins).
// The one exception is a refused spec (InvalidSpec, the database options'
// reasons): that message is made of what the Tenant asked for and what
// the config allows (names, extensions, encodings and locales), and it is
// what the team must read to fix its Tenant.
func namespaceAdvice(reason, message string) string {
	switch reason {
	case ReasonInvalidSpec, ReasonDatabaseOptionsNotAllowed, ReasonDatabaseOptionsUnsupported:
		return message
	case ReasonConflict:
		return "a database, login role or credential record with this Tenant's names exists on the server and is not this Tenant's; nothing of it was changed. Choose other names (spec.database, spec.loginRole), or ask your platform team, who see what is in the way in the Database's status"
	case ReasonDatabaseVanished:
		return "the database was removed from the server, and it is not created again empty; ask your platform team to restore it"
	}
	return "ask your platform team; the Database's status, which admins read, says why"
}

// progressReasons are a Database's Ready reasons that say it is on its way,
// not that something needs a human.
var progressReasons = map[string]bool{"": true, "Creating": true, "Available": true, "Deleting": true, "ReconcileSuccess": true}

// boundDatabaseReason is the reason a binding reports while its own
// (bound) Database is not Ready: the Database's own reason when it names a
// problem (Conflict, InvalidSpec, ImmutableField, DatabaseVanished, ...), so
// that the Tenant shows it without anyone reading the Database; otherwise
// DatabaseNotReady.
func boundDatabaseReason(d ObservedDatabase) string {
	if d.Deleting || d.Ready.Status == corev1.ConditionTrue || progressReasons[string(d.Ready.Reason)] {
		return ReasonDatabaseNotReady
	}
	return string(d.Ready.Reason)
}

// ClaimProtectionFinalizer keeps a bound Database from going away while its
// Tenant uses it, whatever its management policies say (as Kubernetes'
// pv-protection keeps a bound PersistentVolume): the binder adds it with
// the claim and removes it when it releases the Database.
const ClaimProtectionFinalizer = "database.ayatori.ddupan.top/claim-protection"

// NewDynamicDatabase is the Database provisioned for a dynamic binding: its
// claimRef already names the Tenant, its reclaimPolicy is the instance's
// default, and it asks for what the binding asks for.
func NewDynamicDatabase(s BindingSpec, defaultReclaim v1alpha1.ReclaimPolicy) *v1alpha1.Database {
	if defaultReclaim == "" {
		defaultReclaim = v1alpha1.ReclaimRetain
	}
	claim := s.Claim()
	db := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: DynamicDatabaseName(s.TenantUID), Finalizers: []string{ClaimProtectionFinalizer}},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
				ProviderConfigReference: &xpv2.Reference{Name: s.Instance},
				ManagementPolicies:      slices.Clone(v1alpha1.DefaultManagementPolicies),
			},
			ForProvider:   v1alpha1.DatabaseParameters{Database: s.Database, Extensions: slices.Clone(s.Extensions)},
			ReclaimPolicy: defaultReclaim,
			ClaimRef:      &claim,
		},
	}
	if s.LoginRole != "" {
		r := s.LoginRole
		db.Spec.ForProvider.LoginRole = &r
	}
	if s.Options != nil {
		db.Spec.ForProvider.Options = s.Options.DeepCopy()
	}
	for _, r := range s.DataRoles {
		db.Spec.ForProvider.DataRoles = append(db.Spec.ForProvider.DataRoles, v1alpha1.DataRole{Name: r.Name, Access: r.Access})
	}
	return db
}

// ReleasedStatus is the Database's binding status once claim is released.
func ReleasedStatus(claim v1alpha1.ClaimReference) v1alpha1.BindingStatus {
	return v1alpha1.BindingStatus{Phase: v1alpha1.BindingReleased, Claim: claim.Namespace + "/" + claim.Name, ReleasedClaim: &claim}
}

// DecideBinding decides what the binder does with one DatabaseBinding.
func DecideBinding(o BindingObservation) BindingDecision {
	if v, done := decideLeaving(o); done {
		return v
	}
	s, d := o.Spec, o.Database
	if msg := validateSpec(s); msg != "" {
		return refuse(v1alpha1.BindingPhasePending, ReasonInvalidSpec, msg)
	}
	if v, done := decideNotTenants(o); done {
		return v
	}
	if d.Present && claimNames(d.ClaimRef, s) && released(d) {
		// Only an admin's edit of spec.claimRef makes a released Database
		// bindable again, even for a binding of the Tenant it names.
		return refuse(v1alpha1.BindingPhasePending, ReasonReleased, fmt.Sprintf("Database %s was released by this Tenant (its DatabaseBinding was deleted): a released Database is never bound again without an admin, even to the Tenant that released it, and nothing is delivered; ask your platform team to rebind it to this Tenant", d.Name))
	}
	if d.Present && claimNames(d.ClaimRef, s) {
		return decideBound(o)
	}
	// Nothing grants use from here on: a one-sided record is cleared.
	if !d.Present {
		return decideNoDatabase(o)
	}
	if v, refused := claimRefusal(o); refused {
		return v
	}
	return decideClaim(o)
}

// decideLeaving decides a binding being deleted or whose Tenant is gone
// while an ExternalSecret still reads its delivery copy (it waits), and
// the release of one being deleted; it returns false for anything else.
func decideLeaving(o BindingObservation) (BindingDecision, bool) {
	if !o.Deleting && o.Standing.Standing != StandingGone {
		return BindingDecision{}, false
	}
	if len(o.Readers) > 0 {
		// The Secret goes first: while an ExternalSecret still reads
		// the delivery copy, nothing is released and the copy stays, so
		// the app's Secret never outlives what it was made from nor
		// points at a copy removed under it. This holds for a binding
		// whose Tenant is gone too (the Tenant is deleted before the
		// garbage collector deletes its binding and ExternalSecret).
		return BindingDecision{
			Action: ActionWait, Phase: o.Phase, Record: o.Recorded, Reason: ReasonWaitingForExternalSecret,
			Message: fmt.Sprintf("waiting for %s of this namespace, which reads this binding's credential, to be deleted: only then is the Database released and the delivery copy removed", describeReaders(o.Readers)),
		}, true
	}
	if o.Deleting {
		return decideRelease(o), true
	}
	return BindingDecision{}, false
}

// decideNotTenants decides a binding that does not count as its Tenant's:
// one whose Tenant is gone releases its Database, one whose Tenant does
// not list it yet waits, and any other is refused. It returns false for a
// binding that counts.
func decideNotTenants(o BindingObservation) (BindingDecision, bool) {
	switch st := o.Standing; st.Standing {
	case StandingTenants:
		return BindingDecision{}, false
	case StandingGone:
		return decideOrphaned(o), true
	case StandingPending:
		return wait(v1alpha1.BindingPhasePending, st.Reason, st.Message), true
	default:
		// Forged, or not decided (the zero value never binds).
		reason, msg := st.Reason, st.Message
		if reason == "" {
			reason, msg = ReasonNotATenantsBinding, "whether a Tenant controls this DatabaseBinding is not known: nothing is bound"
		}
		return refuse(v1alpha1.BindingPhasePending, reason, msg), true
	}
}

// decideNoDatabase decides a binding whose Database does not exist: a
// bound Database that is gone, or a static binding's, is refused; a
// dynamic binding's is created on its server, once that server and the
// namespace's share of it allow.
func decideNoDatabase(o BindingObservation) BindingDecision {
	s := o.Spec
	if o.Recorded.DatabaseName != "" {
		return refuse(v1alpha1.BindingPhasePending, ReasonDatabaseNotFound, fmt.Sprintf("the bound Database %s (uid %s) no longer exists: the Tenant's database is not replaced silently; recreate the Tenant, or restore the Database with spec.claimRef naming this Tenant", o.Recorded.DatabaseName, o.Recorded.DatabaseUID))
	}
	if s.Static() {
		return refuse(v1alpha1.BindingPhasePending, ReasonDatabaseNotFound, fmt.Sprintf("Database %s does not exist", s.DatabaseRef))
	}
	on := s
	if s.Instance == "" {
		// Placed once, on the namespace's one default server: the
		// Database created records it, and is read from then on.
		name, v, ok := defaultInstance(s, o.Default)
		if !ok {
			return v
		}
		on.Instance = name
	}
	if msg := instanceProblem(on.Instance, o.Instance); msg != "" {
		return wait(v1alpha1.BindingPhasePending, ReasonInstanceNotReady, msg)
	}
	if v, refused := namespaceRefusal(s, on.Instance, o.Instance); refused {
		return v
	}
	return BindingDecision{
		Action: ActionCreateDynamic, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonProvisioning,
		Message: fmt.Sprintf("creating Database %s on ClusterProviderConfig %s", s.DatabaseName(), on.Instance),
		Create:  NewDynamicDatabase(on, o.Instance.DefaultReclaimPolicy),
	}
}

// decideClaim decides an existing Database that no other Tenant holds and
// whose claimRef does not name this one yet: a static binding claims it
// once it is on the named server, that server and the Database are Ready
// and, when no admin reserved it, the namespace may take one more; a
// dynamic binding never takes it over.
func decideClaim(o BindingObservation) BindingDecision {
	s, d := o.Spec, o.Database
	if !s.Static() {
		// The Database named after this Tenant's UID exists without a
		// claim (or one reserved without a UID): it was not provisioned for
		// this Tenant, or an admin cleared its claim.
		return refuse(v1alpha1.BindingPhasePending, ReasonConflict, fmt.Sprintf("Database %s exists but its spec.claimRef does not name this Tenant: it is not taken over; an admin sets spec.claimRef to {namespace: %s, name: %s, uid: %s} to hand it over", d.Name, s.Namespace, s.TenantName, s.TenantUID))
	}
	if s.Instance != "" && d.Instance != s.Instance {
		return refuse(v1alpha1.BindingPhasePending, ReasonWrongInstance, fmt.Sprintf("Database %s is on ClusterProviderConfig %s, not on %s as spec.providerConfigRef names", d.Name, d.Instance, s.Instance))
	}
	if d.Deleting {
		return refuse(v1alpha1.BindingPhasePending, ReasonDatabaseNotReady, fmt.Sprintf("Database %s is being deleted", d.Name))
	}
	if msg := instanceProblem(d.Instance, o.Instance); msg != "" {
		return wait(v1alpha1.BindingPhasePending, ReasonInstanceNotReady, msg)
	}
	if msg := databaseProblem(d, false); msg != "" {
		return wait(v1alpha1.BindingPhasePending, ReasonDatabaseNotReady, msg)
	}
	if d.ClaimRef == nil {
		// Reserved by no admin: the namespace takes it by itself.
		if v, refused := namespaceRefusal(s, d.Instance, o.Instance); refused {
			return v
		}
	}
	claim := s.Claim()
	return BindingDecision{
		Action: ActionWriteClaim, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding,
		Message: fmt.Sprintf("claiming Database %s", d.Name),
		Claim:   &claim, ResourceVersion: d.ResourceVersion,
	}
}

// claimRefusal refuses a Database whose claimRef names another Tenant.
func claimRefusal(o BindingObservation) (BindingDecision, bool) {
	s, d := o.Spec, o.Database
	c := d.ClaimRef
	switch {
	case c == nil || reservedFor(c, s):
		return BindingDecision{}, false
	case c.UID == "":
		return refuse(v1alpha1.BindingPhasePending, ReasonAlreadyBound, fmt.Sprintf("Database %s is reserved for %s", d.Name, describeClaim(c, s))), true
	case d.ClaimantLive:
		return refuse(v1alpha1.BindingPhasePending, ReasonAlreadyBound, fmt.Sprintf("Database %s is bound to %s", d.Name, describeClaim(c, s))), true
	case c.Namespace == s.Namespace && c.Name == s.TenantName:
		return refuse(v1alpha1.BindingPhasePending, ReasonReleased, fmt.Sprintf("Database %s was released by an earlier Tenant of this name: a released Database is never rebound automatically; an admin clears or presets its spec.claimRef to make it bindable", d.Name)), true
	default:
		return refuse(v1alpha1.BindingPhasePending, ReasonReleased, fmt.Sprintf("Database %s was released by %s: a released Database is never rebound automatically; an admin clears or presets its spec.claimRef to make it bindable", d.Name, describeClaim(c, s))), true
	}
}

// decideBound handles a Database whose claimRef names this Tenant.
func decideBound(o BindingObservation) BindingDecision {
	s, d := o.Spec, o.Database
	rec := BindingRecord{DatabaseName: d.Name, DatabaseUID: d.UID}
	if s.Static() && s.Instance != "" && d.Instance != s.Instance {
		return BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhaseBound, Reason: ReasonWrongInstance, Record: o.Recorded,
			Message: fmt.Sprintf("Database %s is on ClusterProviderConfig %s, not on %s as spec.providerConfigRef names", d.Name, d.Instance, s.Instance)}
	}
	if o.Recorded != rec {
		return BindingDecision{Action: ActionCompleteRecord, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Record: rec,
			Message: fmt.Sprintf("Database %s is claimed for this Tenant; recording the binding", d.Name)}
	}
	// Phases only move forward, in the order Pending, Binding, Bound,
	// Provisioning, Ready: a static binding is Bound once both sides name
	// each other (its Database is Ready already) while its credential is
	// delivered; a dynamic one is Provisioning until its new Database is
	// Ready and the credential delivered; either is Provisioning while its
	// Database is not Ready.
	if msg := databaseProblem(d, true); msg != "" {
		phase := v1alpha1.BindingPhaseProvisioning
		if d.Deleting {
			phase = v1alpha1.BindingPhaseBound
		}
		return BindingDecision{Action: ActionWait, Phase: phase, Reason: boundDatabaseReason(d), Message: msg, Record: rec}
	}
	phase := v1alpha1.BindingPhaseBound
	if !s.Static() {
		phase = v1alpha1.BindingPhaseProvisioning
	}
	return BindingDecision{Action: ActionCopyCredential, Phase: phase, Reason: ReasonDelivering, Record: rec,
		Message: fmt.Sprintf("Database %s is bound and Ready; delivering its credential", d.Name)}
}

// decideRelease decides the release of a binding being deleted. Only a
// Database whose claimRef names this Tenant is released, and only by a
// binding that is its Tenant's or whose Tenant is gone; a binding that was
// forged, refused or never bound releases nothing.
func decideRelease(o BindingObservation) BindingDecision {
	s, d := o.Spec, o.Database
	v := BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending, Record: o.Recorded}
	st := o.Standing.Standing
	ours := d.Present && claimNames(d.ClaimRef, s) && (st == StandingTenants || st == StandingGone)
	v.CheckCopy = ours || o.RecordedCopy != "" || o.Recorded.DatabaseName != ""
	if !ours {
		v.Message = "nothing to release"
		return v
	}
	v.Phase = v1alpha1.BindingPhaseReleased
	v.Unprotect = d.Protected
	if released(d) {
		// Released already (by this binder, or with no binding of the
		// claim left): nothing more is done, whatever the reclaim policy
		// says now; a Delete is never made from a later edit or a later
		// binding.
		v.Message = fmt.Sprintf("Database %s is Released", d.Name)
		return v
	}
	switch d.ReclaimPolicy {
	case v1alpha1.ReclaimDelete:
		if d.Deleting {
			v.Message = fmt.Sprintf("Database %s is being deleted (reclaimPolicy Delete)", d.Name)
			return v
		}
		v.Action, v.Release = ActionRelease, v1alpha1.ReclaimDelete
		v.Message = fmt.Sprintf("deleting Database %s (reclaimPolicy Delete)", d.Name)
	default:
		st := ReleasedStatus(*d.ClaimRef)
		v.Action, v.Release, v.Released = ActionRelease, v1alpha1.ReclaimRetain, &st
		v.Message = fmt.Sprintf("recording Database %s as Released (reclaimPolicy Retain)", d.Name)
	}
	return v
}

// describeReaders names the ExternalSecrets (sorted, at most three).
func describeReaders(names []string) string {
	n := slices.Sorted(slices.Values(names))
	if len(n) == 1 {
		return "ExternalSecret " + n[0]
	}
	if len(n) > 3 {
		return fmt.Sprintf("ExternalSecrets %s and %d more", strings.Join(n[:3], ", "), len(n)-3)
	}
	return "ExternalSecrets " + strings.Join(n, ", ")
}

// decideOrphaned decides a binding whose Tenant is gone: it releases its
// Database exactly as its deletion would (Retain: Released; Delete: the
// Database is deleted) and removes its delivery copy, and says that it can
// be deleted.
func decideOrphaned(o BindingObservation) BindingDecision {
	v := decideRelease(o)
	v.Orphaned, v.Reason = true, ReasonTenantGone
	v.Message = fmt.Sprintf("%s: %s; its delivery copy is removed; delete this DatabaseBinding", o.Standing.Message, v.Message)
	return v
}

func refuse(p v1alpha1.DatabaseBindingPhase, reason, msg string) BindingDecision {
	return BindingDecision{Action: ActionRefuse, Phase: p, Reason: reason, Message: msg}
}

func wait(p v1alpha1.DatabaseBindingPhase, reason, msg string) BindingDecision {
	return BindingDecision{Action: ActionWait, Phase: p, Reason: reason, Message: msg}
}

// BindingKV is a KV v2 record as read.
type BindingKV struct {
	// Present: data or metadata exists at the path.
	Present bool
	// Data of the current version; nil when there is none.
	Data map[string]string
	// Owner is the custom_metadata.
	Owner   map[string]string
	Version int
}

// DeliveryObservation is what the delivery decision needs.
type DeliveryObservation struct {
	Spec BindingSpec
	// DatabaseName and DatabaseUID of the bound Database.
	DatabaseName, DatabaseUID string
	// SourcePath and Source are the Database's own record.
	SourcePath string
	Source     BindingKV
	// Import: the Database imports an existing record (its
	// spec.forProvider.credentialPath), which the Database controller has
	// proven to log in but never writes ownership into while read-only.
	Import bool
	// CopyPath and Copy are the delivery copy.
	CopyPath string
	Copy     BindingKV
	// Known are the connection keys the provider knows of an imported
	// Database (its database name, and the host, hostaddr, port and
	// sslmode of its server's config): what an imported record lacks of
	// them is taken from here into the copy (FillableKeys). Nil for a
	// Database's own record, which has them all.
	Known map[string]string
}

// FillableKeys are the keys of an imported credential record that the
// delivery copy takes from what the provider knows when the record lacks
// them: where to connect, never who or with what password. A record made
// by another tool often holds only a username and a password (a
// provider-sql connection Secret's endpoint is not a host the provider
// checks); the Database controller proved that password against the
// config's endpoint, which is what the copy then names.
var FillableKeys = []string{"database", "host", "hostaddr", "port", "sslmode"}

// DeliveryVerdict says whether and how to write the delivery copy.
type DeliveryVerdict struct {
	// InSync: the copy is this binding's and holds the source's current
	// version.
	InSync bool
	// Write: write Data with check-and-set CAS, then set Owner. Claim: the
	// path is free, so create its metadata (naming this binding) first.
	Write, Claim bool
	CAS          int
	Data, Owner  map[string]string
	// Reason and Message when neither in sync nor writable.
	Reason, Message string
}

// requiredKeys must be present and non-empty in a record that is copied;
// hostaddr may be empty.
var requiredKeys = []string{"username", "password", "database", "host", "port", "sslmode"}

// DeliveryOwner is the ownership metadata of this binding's delivery copy
// of version of the Database's record.
func DeliveryOwner(s BindingSpec, database, databaseUID string, version int) map[string]string {
	return map[string]string{
		MetaManagedBy:         ManagedBy,
		MetaBindingNamespace:  s.Namespace,
		MetaBindingName:       s.Name,
		MetaBindingUID:        s.UID,
		MetaTenantUID:         s.TenantUID,
		MetaSourceDatabase:    database,
		MetaSourceDatabaseUID: databaseUID,
		MetaSourceVersion:     strconv.Itoa(version),
	}
}

// CopyOwnedBy reports whether the delivery copy's metadata names this
// binding.
func CopyOwnedBy(owner map[string]string, s BindingSpec) bool {
	return owner[MetaManagedBy] == ManagedBy && owner[MetaBindingNamespace] == s.Namespace &&
		owner[MetaBindingName] == s.Name && owner[MetaBindingUID] == s.UID
}

// describeCopyOwner names the owner of a delivery path as the binding's
// namespace may see it: a binding of that namespace by name, never a UID,
// and nothing of another namespace.
func describeCopyOwner(owner map[string]string, s BindingSpec) string {
	switch {
	case owner[MetaManagedBy] != ManagedBy || owner[MetaBindingUID] == "":
		return "a record the provider does not own"
	case owner[MetaBindingNamespace] == s.Namespace && owner[MetaBindingName] == s.Name:
		return "an earlier DatabaseBinding of this name in this namespace"
	case owner[MetaBindingNamespace] == s.Namespace:
		return fmt.Sprintf("the DatabaseBinding %s of this namespace", owner[MetaBindingName])
	}
	return "a DatabaseBinding of another namespace"
}

// DecideDelivery decides the delivery copy of a bound, Ready Database's
// record. A path owned by anything but this binding is a Conflict with
// nothing written.
func DecideDelivery(o DeliveryObservation) DeliveryVerdict {
	src := o.Source
	switch {
	case !src.Present || src.Data == nil:
		return DeliveryVerdict{Reason: ReasonCredentialProjectionFailed, Message: fmt.Sprintf("the credential record %s of Database %s has no current version", o.SourcePath, o.DatabaseName)}
	case src.Owner[MetaManagedBy] == ManagedBy && src.Owner[MetaUID] != o.DatabaseUID,
		src.Owner[MetaManagedBy] != ManagedBy && !o.Import:
		// A record the provider made for another Database is never
		// handed out for this one; a record without ownership is
		// acceptable only as what an admin imported.
		return DeliveryVerdict{Reason: ReasonCredentialProjectionFailed, Message: fmt.Sprintf("the credential record %s does not belong to Database %s (uid %s): it is not copied", o.SourcePath, o.DatabaseName, o.DatabaseUID)}
	}
	data := make(map[string]string, len(CredentialKeys))
	for _, k := range CredentialKeys {
		data[k] = src.Data[k]
	}
	if o.Import {
		for _, k := range FillableKeys {
			if _, ok := src.Data[k]; !ok || (src.Data[k] == "" && k != "hostaddr") {
				data[k] = o.Known[k]
			}
		}
	}
	var missing []string
	for _, k := range requiredKeys {
		if data[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return DeliveryVerdict{Reason: ReasonCredentialProjectionFailed, Message: fmt.Sprintf("the credential record %s of Database %s lacks %s: it is not copied", o.SourcePath, o.DatabaseName, strings.Join(missing, ", "))}
	}
	owner := DeliveryOwner(o.Spec, o.DatabaseName, o.DatabaseUID, src.Version)
	c := o.Copy
	switch {
	case !c.Present:
		return DeliveryVerdict{Write: true, Claim: true, CAS: 0, Data: data, Owner: owner}
	case !CopyOwnedBy(c.Owner, o.Spec):
		return DeliveryVerdict{Reason: ReasonConflict, Message: fmt.Sprintf("the delivery path %s belongs to %s: nothing is written; it is freed when its owner is deleted, or by an admin", o.CopyPath, describeCopyOwner(c.Owner, o.Spec))}
	case maps.Equal(c.Data, data) && c.Owner[MetaSourceDatabaseUID] == o.DatabaseUID &&
		c.Owner[MetaSourceVersion] == strconv.Itoa(src.Version) && c.Owner[MetaTenantUID] == o.Spec.TenantUID &&
		c.Owner[MetaSourceDatabase] == o.DatabaseName:
		return DeliveryVerdict{InSync: true}
	}
	return DeliveryVerdict{Write: true, CAS: c.Version, Data: data, Owner: owner}
}

// DatabaseRecordPath is the path of a Database's own credential record, from
// its spec alone: the imported record it names, or the one derived from its
// name. imported is true for the former.
func DatabaseRecordPath(base, database string, credentialPath *string) (path string, imported bool) {
	if credentialPath != nil && *credentialPath != "" {
		return *credentialPath, true
	}
	return CredentialPath(base, database), false
}

// DeliveryProof is what the binder's last reading of a delivery in sync
// proved: the copy at CopyPath held the record at SourcePath of the
// Database with DatabaseUID at SourceVersion. It is kept in memory so that
// not every poll reads both from OpenBao.
type DeliveryProof struct {
	DatabaseUID, SourcePath, CopyPath string
	SourceVersion                     int
	// Due is when both must be read again.
	Due time.Time
}

// DeliveryCheck is what decides whether the binder reads the Database's
// record and the delivery copy.
type DeliveryCheck struct {
	// Last is the last proof, nil when none is known (a new binding, a
	// write since, the provider restarted).
	Last *DeliveryProof
	// Now is the delivery as the binder would read it now: the Database's
	// UID and the two paths.
	Now DeliveryProof
	// RecordVersion is the version of the Database's record that the
	// Database controller's last proven login used, while that login
	// stands; RecordProven is false when there is none (the Database
	// reads its record at every poll then, and so does the binder).
	RecordVersion int
	RecordProven  bool
	Time          time.Time
}

// DeliveryCheckDue returns why the binder must read the record and the copy
// now, or "" when the last proof stands: nothing the binder can see without
// reading them changed, the Database controller still proves the same
// record version, and the periodic check is not due.
func DeliveryCheckDue(c DeliveryCheck) string {
	l := c.Last
	switch {
	case l == nil:
		return "no delivery in sync proven since the provider started or the last write"
	case l.DatabaseUID != c.Now.DatabaseUID || l.SourcePath != c.Now.SourcePath || l.CopyPath != c.Now.CopyPath:
		return "the Database or a path changed"
	case !c.RecordProven:
		return "the Database's record is not proven by a standing login"
	case c.RecordVersion != l.SourceVersion:
		return "the Database's record has a new version"
	case !c.Time.Before(l.Due):
		return "the periodic check is due"
	}
	return ""
}
