package tenancy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// Reasons of a Database's Ready condition (besides InstanceNotReady).
const (
	ReasonConflict           = "Conflict"
	ReasonProvisioningFailed = "ProvisioningFailed"
	ReasonImmutableField     = "ImmutableField"
	ReasonImportDifferences  = "ImportDifferences"
	// ReasonEndpointChanged: the config now names another endpoint than the
	// one the credential was recorded for.
	ReasonEndpointChanged = "EndpointChanged"
	// ReasonDatabaseVanished: the database this Database provisioned (its
	// OID is on record) is gone from the server.
	ReasonDatabaseVanished = "DatabaseVanished"
	// ReasonBoundToTenant: a deleted Database waits until its claim is
	// released.
	ReasonBoundToTenant = "BoundToTenant"
)

// ManagedBy is the value of the managed-by ownership key.
const ManagedBy = "provider-postgresql-tenant"

// Ownership metadata keys written to a KV record's custom_metadata.
const (
	MetaManagedBy = "managed-by"
	// MetaName and MetaUID name the (cluster-scoped) Database that owns the
	// record.
	MetaName       = "database-name"
	MetaUID        = "database-uid"
	MetaConfigName = "config-name"
	MetaConfigUID  = "config-uid"
	// MetaDatabaseOID and MetaRoleOID record the OIDs of the database and
	// role this Database created: a database or role dropped and re-created
	// by someone else is not mistaken for it, and a role stays provably ours
	// after its logins are blocked for deletion.
	MetaDatabaseOID = "database-oid"
	MetaRoleOID     = "role-oid"
	// MetaEndpointPrefix prefixes the endpoint the credential was created
	// for (endpoint-host, endpoint-hostaddr, endpoint-port,
	// endpoint-sslmode): a tenant's password is only ever sent there.
	MetaEndpointPrefix = "endpoint-"
)

// EndpointKeys are the credential fields that name where it may be used.
var EndpointKeys = []string{"host", "hostaddr", "port", "sslmode"}

// Identity is who a Database is, as written into ownership metadata. A
// Database is cluster-scoped: its name and UID identify it; its config is
// always a ClusterProviderConfig.
type Identity struct {
	Name, UID             string
	ConfigName, ConfigUID string
	// Endpoint is the config's endpoint, keyed like the credential's fields
	// (EndpointKeys).
	Endpoint map[string]string
}

// OwnerMetadata is the custom_metadata of a KV record this Database owns.
func OwnerMetadata(id Identity) map[string]string {
	m := map[string]string{
		MetaManagedBy:  ManagedBy,
		MetaName:       id.Name,
		MetaUID:        id.UID,
		MetaConfigName: id.ConfigName,
		MetaConfigUID:  id.ConfigUID,
	}
	for k, v := range id.Endpoint {
		// OpenBao refuses empty metadata values: an empty field (no
		// hostaddr) is recorded by its absence.
		if v != "" {
			m[MetaEndpointPrefix+k] = v
		}
	}
	return m
}

// RecordedEndpoint is the endpoint a credential record was created for:
// its ownership metadata's endpoint-* keys, or, for a record without them
// (an import, or a record written before they existed), its own fields.
func RecordedEndpoint(kv KVState) map[string]string {
	out := map[string]string{}
	recorded := false
	for _, k := range EndpointKeys {
		v, ok := kv.Owner[MetaEndpointPrefix+k]
		recorded = recorded || ok
		out[k] = v
	}
	if recorded {
		// An absent key of a recorded endpoint was empty (no hostaddr).
		return out
	}
	clear(out)
	for _, k := range EndpointKeys {
		if v, ok := kv.Data[k]; ok {
			out[k] = v
		}
	}
	return out
}

// CredentialPath derives the KV path of a provisioned Database's own
// record from the Database's name: <base>/<name>.
func CredentialPath(base, name string) string {
	return base + "/" + name
}

// CredentialKeys are exactly the keys of a tenant KV record.
var CredentialKeys = []string{"username", "password", "database", "host", "hostaddr", "port", "sslmode"}

// KVState is what the KV read found.
type KVState struct {
	Present bool
	Owner   map[string]string
	// Data of the current version; nil when there is none.
	Data    map[string]string
	Version int
	// Created is when the current version was written (zero: unknown).
	Created time.Time
}

// DBState is what the catalog says of the database.
type DBState struct {
	Exists bool
	OID    uint32
	Owner  string
	// AllowConn: the database accepts connections. A database this
	// provider creates accepts none until its CONNECT is restricted to its
	// role: one that does not is a provisioning step to finish.
	AllowConn     bool
	PublicConnect bool
	RoleConnect   bool
	// IsTemplate: its owner marked it a template (ALTER DATABASE ...
	// IS_TEMPLATE true): any role with CREATEDB may then copy it, and it
	// cannot be dropped.
	IsTemplate bool
	// ConnLimited: the database has a connection limit of its own
	// (datconnlimit is not -1). A tenant database has none: its login
	// role's limit is the one that counts, and a limit of 0 would keep the
	// provider's login check out.
	ConnLimited bool
}

// RoleState is what the catalog says of the login role.
type RoleState struct {
	Exists bool
	OID    uint32
	// AttributesOK: LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
	// NOBYPASSRLS. The connection limit is not among them: it is one of
	// the limits (Limits), repaired only when managed.
	AttributesOK bool
	// CanLogin: LOGIN. GroupOK: the attributes of a data role's role,
	// which holds privileges and does not log in: NOSUPERUSER NOCREATEDB
	// NOCREATEROLE NOREPLICATION NOBYPASSRLS, whatever LOGIN.
	CanLogin, GroupOK bool
	// Elevated: SUPERUSER, REPLICATION or BYPASSRLS, which only a superuser
	// can take away.
	Elevated bool
	// AdminMember: the admin role holds the membership provisioning needs
	// (it can SET ROLE to it and use its privileges).
	AdminMember bool
	// AdminCanAdmin: the admin may grant, alter and drop the role (from
	// PostgreSQL 16 on, that takes ADMIN OPTION on it).
	AdminCanAdmin bool
	// Limits are the role's connection limit and session defaults.
	Limits RoleLimitsState
}

// Login is the result of logging in as the role with the KV credential.
type Login int

// Login results.
const (
	// LoginNotTried: there was nothing to try (no role or no credential).
	LoginNotTried Login = iota
	// LoginOK: logged in to the tenant database.
	LoginOK
	// LoginAuthOK: the password was accepted, but the database does not
	// exist (yet).
	LoginAuthOK
	// LoginRefused: the password was refused (or the role may not log in).
	LoginRefused
	// LoginUnavailable: the attempt failed for another reason.
	LoginUnavailable
	// LoginNotAccepting: the password was accepted, but the database
	// accepts no connections (SQLSTATE 55000 after authentication): its
	// provisioning has not finished.
	LoginNotAccepting
	// LoginLimitFull: the password was accepted, but the role's or the
	// database's connection limit is full (SQLSTATE 53300 raised after
	// authentication): whoever holds the credential has every session the
	// limit allows. The credential is proven; the session to read the
	// extensions was not opened.
	LoginLimitFull
)

// LoginFailure names a login result that is a failure of the credential
// check, as the metrics count it: "refused" (the server refused the
// credential) or "unavailable" (the login failed for another reason); ""
// for a login that proved the password or was not tried.
func LoginFailure(l Login) string {
	switch l {
	case LoginRefused:
		return "refused"
	case LoginUnavailable:
		return "unavailable"
	}
	return ""
}

// Accepted reports whether the login proved the password, whether or not
// it reached the database.
func (l Login) Accepted() bool { return passwordAccepted(l) }

// passwordAccepted: see Login.Accepted.
func passwordAccepted(l Login) bool {
	return l == LoginOK || l == LoginAuthOK || l == LoginNotAccepting || l == LoginLimitFull
}

// Observation is everything a decision about one Database needs.
type Observation struct {
	Identity Identity
	// Import: the management policies lack Create.
	Import bool
	// ImportUpdate: an import whose policies allow Update: differences are
	// repaired (never the password), once the credential proves the role.
	ImportUpdate bool
	// Deleting: the Database has a deletion timestamp.
	Deleting bool
	// Database, Role and Path are the effective names.
	Database, Role, Path string
	// Requested extensions (spec) and Installed ones (read as the role).
	Requested, Installed []string
	// WantData is the record a provisioned Database keeps (password aside).
	WantData map[string]string

	KV    KVState
	DB    DBState
	R     RoleState
	Login Login

	// Rotation is the credential rotation the spec asks for and the one
	// status reports.
	Rotation RotationRequest
	// Cleanup is the access cleanup the spec asks for and the one status
	// reports.
	Cleanup CleanupRequest

	// Limits are the limits in effect for the login role (the config's
	// defaults and the Database's overrides).
	Limits EffectiveLimits

	// PreWrite is what the checks made before any write found, when the
	// verdict asked for them (NeedsExtensionCheck, NeedsOptionsCheck).
	PreWrite PreWriteChecks
}

// PreWriteChecks are the findings of the checks a Database makes before it
// writes anything: whether each requested extension is one the owner can
// create, and whether the database options are allowed and supported. The
// controller runs a check only when the verdict without it asks for it,
// then decides again with its finding.
type PreWriteChecks struct {
	// ExtensionProblems say, one each, why a requested extension cannot
	// be created by the database owner.
	ExtensionProblems []string
	// OptionsReason and OptionsMessage say why the database options may
	// not be used ("" when they may).
	OptionsReason, OptionsMessage string
}

// Verdict is what to report and do.
type Verdict struct {
	// Exists/UpToDate are Crossplane's ResourceExists/ResourceUpToDate.
	Exists, UpToDate bool
	// Conflict, when set, names what exists without proof of ownership;
	// nothing may be changed.
	Conflict string
	// Differences of an import, reported and never repaired.
	Differences []string
	Phase       v1alpha1.DatabasePhase
	// Reason of a Ready=False condition that needs attention (Conflict,
	// DependencyUnavailable, ImportDifferences); "" while provisioning or
	// repairing normally, and when Ready.
	Reason string
	// Own tells which parts are provably this Database's.
	KVOurs, RoleOurs, DBOurs bool
	// Repairs to apply on Update, in order.
	Repairs []Repair
	// Ready: everything verified, including a real login.
	Ready   bool
	Message string
	// Rotation is the credential rotation step to take on Update.
	Rotation RotationVerdict
	// Cleanup is the access cleanup to run on Update.
	Cleanup CleanupVerdict
}

// Repair is one non-destructive correction of drift.
type Repair string

// Repairs, in the order they are applied.
const (
	RepairKVRecord      Repair = "restore the KV record's fields (same password)"
	RepairOwnerMetadata Repair = "restore the KV record's ownership metadata"
	RepairAdminMember   Repair = "make the admin a member of the login role"
	RepairRole          Repair = "reset the login role's attributes"
	// RepairPassword: the record's password was refused for the role
	// whose OID the record names: someone changed the role's password
	// (the role itself, or whoever holds its credential). The record is
	// the truth: the role gets the record's password back.
	RepairPassword Repair = "set the login role's password back to the credential record's" //nolint:gosec // the name of a repair, not a credential
	// RepairDatabase: the owner marked the database a template or gave it
	// a connection limit of its own.
	RepairDatabase   Repair = "reset the database's template flag and connection limit"
	RepairLimits     Repair = "set the login role's limits"
	RepairOwner      Repair = "give the database back to the login role"
	RepairConnect    Repair = "revoke CONNECT from PUBLIC, grant it to the login role, end other roles' sessions and allow connections"
	RepairExtensions Repair = "install missing extensions"
)

// KVOurs reports whether a KV record belongs to this Database.
func KVOurs(kv KVState, id Identity) bool {
	return kv.Present && kv.Owner[MetaManagedBy] == ManagedBy && kv.Owner[MetaUID] == id.UID && id.UID != ""
}

// KVForeign reports whether a KV record carries this provider's ownership
// metadata naming something else than this Database (another Database, a
// Database of the same name that was deleted and re-created, or a
// binding's delivery copy). Such a record is never taken: not imported,
// not logged in with, not repaired, not deleted. A record without the
// provider's metadata (written by hand) is not foreign.
func KVForeign(kv KVState, id Identity) bool {
	return kv.Present && kv.Owner[MetaManagedBy] == ManagedBy && (kv.Owner[MetaUID] != id.UID || kv.Owner[MetaName] != id.Name || id.UID == "")
}

// MayLogin reports whether the provider may send the record's password to
// the server to log in as the role: only a record this Database may use
// (its own when provisioning; for an import, one not owned by another),
// recorded for the endpoint the pool connects to, and naming the names in
// effect.
func MayLogin(o Observation) bool {
	if o.KV.Data["password"] == "" || EndpointChange(RecordedEndpoint(o.KV), o.WantData) != "" {
		return false
	}
	if o.Import {
		return !KVForeign(o.KV, o.Identity)
	}
	return KVOurs(o.KV, o.Identity) && NamesChanged(o) == ""
}

// NamesChanged returns why the effective names of a provisioning Database
// differ from the ones it provisioned, or "". The names are fixed at the
// first external write: the username and database fields of its own
// credential record are what it created. They differ only when the
// Database was edited around validation or restored from an older copy,
// or when the record was edited; acting on either could create a second
// database or drop the wrong one.
func NamesChanged(o Observation) string {
	if o.Import || !KVOurs(o.KV, o.Identity) {
		return ""
	}
	var diff []string
	for _, f := range []struct{ field, key, want string }{
		{"spec.forProvider.database", "database", o.Database},
		{"the login role (spec.forProvider.loginRole, default the database name)", "username", o.Role},
	} {
		if have := o.KV.Data[f.key]; have != "" && have != f.want {
			diff = append(diff, fmt.Sprintf("%s is %q but this Database provisioned %q", f.field, f.want, have))
		}
	}
	if len(diff) == 0 {
		return ""
	}
	fix := "restore the names in the Database (or, if the record was edited, its fields in OpenBao), or, to remove the Database without dropping anything, delete it with reclaimPolicy Retain"
	if o.Deleting {
		fix = "the deletion waits until the names match again (restore them in the Database, or, if the record was edited, its fields in OpenBao); to let the Database go without dropping anything, remove its finalizer by hand"
	}
	return fmt.Sprintf("%s (the username and database fields of its credential record %s). A Database's names are fixed once it has written anything: %s; nothing was written, created or dropped", strings.Join(diff, "; "), o.Path, fix)
}

// sslRank orders sslmodes by what they verify.
var sslRank = map[string]int{"disable": 0, "require": 1, "verify-ca": 2, "verify-full": 3}

// EndpointChange returns why a credential recorded for the endpoint record
// (RecordedEndpoint) may not be used against the endpoint in want, or "": a
// tenant's password is only ever sent to the host, hostaddr and port
// recorded with it, with at least the TLS verification recorded with it. A
// key the record lacks (a record written by hand, for an import)
// constrains nothing.
func EndpointChange(record, want map[string]string) string {
	if record == nil || want == nil {
		return ""
	}
	var diff []string
	for _, k := range []string{"host", "hostaddr", "port"} {
		if have, ok := record[k]; ok && have != want[k] {
			diff = append(diff, fmt.Sprintf("%s %q (now %q)", k, have, want[k]))
		}
	}
	if have, ok := record["sslmode"]; ok && sslRank[want["sslmode"]] < sslRank[have] {
		diff = append(diff, fmt.Sprintf("sslmode %q (now the weaker %q)", have, want["sslmode"]))
	}
	if len(diff) == 0 {
		return ""
	}
	return fmt.Sprintf("the credential was recorded for %s: the config's endpoint changed since. The provider sends a tenant's password only to the endpoint recorded with it, so it neither logs in, repairs nor deletes anything; revert the config, or, after making sure the new endpoint is the same server, correct those fields of the credential record in OpenBao", strings.Join(diff, ", "))
}

// Decide is the decision core: from an observation of the catalog, the KV
// record and the login attempt, decide what exists, what is whose, what to
// repair, the phase and the credential rotation step. It never trusts a
// phase recorded earlier: every step is re-verified from the observation.
// The access cleanup is decided last: it runs only on an otherwise settled
// verdict.
func Decide(o Observation) Verdict {
	return refusedBeforeWrites(o, decideCleanup(o, decideRotation(o, decide(o))))
}

// NeedsExtensionCheck reports whether the requested extensions must be
// checked before the verdict v is acted on: before a Database is created,
// and before missing extensions are installed. Never for an import (it
// installs only what it proves) or while deleting.
func NeedsExtensionCheck(o Observation, v Verdict) bool {
	return !o.Deleting && !o.Import && v.Reason == "" && (!v.Exists || slices.Contains(v.Repairs, RepairExtensions))
}

// NeedsOptionsCheck reports whether the database options must be checked
// before the verdict v is acted on: while the database does not exist yet.
func NeedsOptionsCheck(o Observation, v Verdict) bool {
	return !o.Deleting && !o.Import && v.Reason == "" && !o.DB.Exists
}

// refusedBeforeWrites turns v into a refusal when a check made before any
// write found a problem: an extension the owner cannot create is
// InvalidSpec, options that may not be used are what their check says.
// The resource then counts as existing and up to date, so that nothing is
// created or changed until the spec (or the server) changes.
func refusedBeforeWrites(o Observation, v Verdict) Verdict {
	if NeedsExtensionCheck(o, v) && len(o.PreWrite.ExtensionProblems) > 0 {
		v.Exists, v.UpToDate, v.Reason = true, true, ReasonInvalidSpec
		v.Message = strings.Join(o.PreWrite.ExtensionProblems, "; ") + "; nothing was created or changed"
		return v
	}
	if NeedsOptionsCheck(o, v) && o.PreWrite.OptionsReason != "" {
		v.Exists, v.UpToDate, v.Reason, v.Message = true, true, o.PreWrite.OptionsReason, o.PreWrite.OptionsMessage
	}
	return v
}

// decide is Decide without credential rotation.
func decide(o Observation) Verdict {
	if o.Import && KVForeign(o.KV, o.Identity) {
		// The record belongs to another Database: this import never owned
		// anything, so it changes nothing and, deleted, drops nothing.
		return Verdict{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonConflict,
			Message: fmt.Sprintf("the credential record %s belongs to %s: an import may only name a record written by hand; nothing was read from it, changed or dropped", o.Path, describeOwner(o.KV.Owner))}
	}
	if msg := EndpointChange(RecordedEndpoint(o.KV), o.WantData); msg != "" && (o.Import || KVOurs(o.KV, o.Identity)) {
		// Nothing on this endpoint is provably ours: change nothing, and
		// while deleting, drop nothing.
		return Verdict{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonEndpointChanged, Message: msg}
	}
	if o.Import {
		return decideImport(o)
	}
	if msg := NamesChanged(o); msg != "" {
		// Acting on other names would create a second database, or drop
		// or repair something else; while deleting, drop nothing.
		return Verdict{Exists: true, UpToDate: true, Phase: v1alpha1.DatabasePhasePending, Reason: ReasonImmutableField, Message: msg}
	}
	v, rec := decideOwnership(o)
	if vanished, done := decideVanished(o, v, rec); done {
		return vanished
	}
	if held, done := decideConflicts(o, v, rec); done {
		return held
	}
	v.Phase = provisionedPhase(v, rec.credential)
	v.Exists = v.DBOurs
	if !v.Exists {
		return decideProvisioning(o, v)
	}
	return decideDrift(o, v, rec)
}

// ownRecord is what a provisioning Database's own credential record
// proves: whether it holds a password, and the OIDs of the database and
// the role this Database created ("" until they are recorded).
type ownRecord struct {
	credential           bool
	databaseOID, roleOID string
}

// decideOwnership decides which of the KV record, the role and the
// database are provably this provisioning Database's, and what its own
// record proves.
func decideOwnership(o Observation) (Verdict, ownRecord) {
	v := Verdict{}
	v.KVOurs = KVOurs(o.KV, o.Identity)
	rec := ownRecord{credential: v.KVOurs && o.KV.Data["password"] != ""}
	if v.KVOurs {
		rec.databaseOID, rec.roleOID = o.KV.Owner[MetaDatabaseOID], o.KV.Owner[MetaRoleOID]
	}
	// A role is ours when our record names its OID, or (before the OID is
	// recorded) when our own credential logs in as it.
	if o.R.Exists {
		if rec.roleOID != "" {
			v.RoleOurs = rec.roleOID == fmt.Sprint(o.R.OID)
		} else {
			v.RoleOurs = rec.credential && passwordAccepted(o.Login)
		}
	}
	// A database is ours when our record names its OID, or (before the OID
	// is recorded, e.g. after an interruption) when its owner is our proven
	// role.
	if o.DB.Exists {
		if rec.databaseOID != "" {
			v.DBOurs = rec.databaseOID == fmt.Sprint(o.DB.OID)
		} else {
			v.DBOurs = v.RoleOurs && o.DB.Owner == o.Role
		}
	}
	return v, rec
}

// decideVanished stops a Database whose record proves it created a
// database that is gone from the server, or returns false.
func decideVanished(o Observation, v Verdict, rec ownRecord) (Verdict, bool) {
	if !v.KVOurs || rec.databaseOID == "" || o.DB.Exists || o.Deleting {
		return v, false
	}
	// Our record proves the database was created (its OID is on record)
	// and it is gone: creating it again would hand the tenant an empty
	// database as if nothing happened.
	v.Exists, v.UpToDate, v.Reason = true, true, ReasonDatabaseVanished
	v.Phase = v1alpha1.DatabasePhasePending
	v.Message = fmt.Sprintf("the database %q that this Database created (OID %s) no longer exists on the server; the provider does not create it again empty. Restore it from a backup (a restored database has another OID: import it with a Database whose managementPolicies lack Create), or delete this Database (with reclaimPolicy Delete its role and credential record %s go too); nothing was written", o.Database, rec.databaseOID, o.Path)
	return v, true
}

// decideConflicts stops a Database when something with its names exists
// that is not provably its own (a Conflict), or whose ownership cannot be
// checked now; it returns false when nothing is in the way.
func decideConflicts(o Observation, v Verdict, rec ownRecord) (Verdict, bool) {
	conflicts := ownershipConflicts(o, v, rec)
	if len(conflicts) == 0 && o.Login == LoginUnavailable && ((o.R.Exists && !v.RoleOurs) || (o.DB.Exists && !v.DBOurs)) {
		// Something exists whose ownership cannot be checked now: neither
		// adopt it nor call it a conflict; change nothing and retry.
		v.Exists, v.UpToDate, v.Reason = true, true, ReasonDependencyUnavailable
		switch {
		case v.DBOurs:
			v.Phase = v1alpha1.DatabasePhaseDatabaseCreated
		case rec.credential:
			v.Phase = v1alpha1.DatabasePhaseCredentialCreated
		default:
			v.Phase = v1alpha1.DatabasePhasePending
		}
		v.Message = "cannot verify who owns the existing role or database now (logging in failed for a reason other than the password); nothing was changed"
		return v, true
	}
	if len(conflicts) == 0 {
		return v, false
	}
	v.Reason = ReasonConflict
	v.Conflict = "Not proven this Database's: " + strings.Join(conflicts, "; ") + ". " + provenOwn(o, v) + ". Nothing of it was changed. To manage an existing database, import it with a Database whose managementPolicies lack Create and whose spec.forProvider.credentialPath names its credential; to start over, remove what is listed (after checking nobody uses it)."
	// Report existing and up to date so that Crossplane neither creates
	// nor updates anything.
	v.Exists, v.UpToDate = true, true
	v.Phase = v1alpha1.DatabasePhasePending
	v.Message = v.Conflict
	return v, true
}

// ownershipConflicts lists what exists with this Database's names without
// proof that it is this Database's.
func ownershipConflicts(o Observation, v Verdict, rec ownRecord) []string {
	var conflicts []string
	if o.KV.Present && !v.KVOurs {
		conflicts = append(conflicts, fmt.Sprintf("the KV record %s exists and belongs to %s", o.Path, describeOwner(o.KV.Owner)))
	}
	if o.R.Exists && !v.RoleOurs {
		switch {
		case rec.roleOID != "":
			conflicts = append(conflicts, fmt.Sprintf("the role %q exists with OID %d, but this Database created OID %s (dropped and re-created by someone else?)", o.Role, o.R.OID, rec.roleOID))
		case o.Login == LoginUnavailable:
			// Cannot tell now; not a conflict, not ours either.
		case rec.credential:
			conflicts = append(conflicts, fmt.Sprintf("the role %q exists and this Database's credential does not log in as it", o.Role))
		default:
			conflicts = append(conflicts, fmt.Sprintf("the role %q exists and this Database has no credential that proves it created it", o.Role))
		}
	}
	if o.DB.Exists && !v.DBOurs && o.Login != LoginUnavailable {
		if rec.databaseOID != "" {
			conflicts = append(conflicts, fmt.Sprintf("the database %q exists with OID %d, but this Database created OID %s (dropped and re-created by someone else?)", o.Database, o.DB.OID, rec.databaseOID))
		} else {
			conflicts = append(conflicts, fmt.Sprintf("the database %q exists, owned by %q, and was not created by this Database", o.Database, o.DB.Owner))
		}
	}
	return conflicts
}

// provenOwn says what is proven this Database's, to stand beside a
// conflict: after an interrupted create, a human sees which steps
// completed.
func provenOwn(o Observation, v Verdict) string {
	var confirmed []string
	if v.KVOurs {
		confirmed = append(confirmed, "its credential record "+o.Path)
	}
	if o.R.Exists && v.RoleOurs {
		confirmed = append(confirmed, fmt.Sprintf("the role %q (OID %d)", o.Role, o.R.OID))
	}
	if o.DB.Exists && v.DBOurs {
		confirmed = append(confirmed, fmt.Sprintf("the database %q (OID %d)", o.Database, o.DB.OID))
	}
	if len(confirmed) == 0 {
		return "Nothing is proven this Database's"
	}
	return "Proven this Database's: " + strings.Join(confirmed, ", ")
}

// provisionedPhase is the last provisioning step the observation confirms.
func provisionedPhase(v Verdict, credential bool) v1alpha1.DatabasePhase {
	switch {
	case v.DBOurs:
		return v1alpha1.DatabasePhaseDatabaseCreated
	case v.RoleOurs:
		return v1alpha1.DatabasePhaseRoleCreated
	case credential:
		return v1alpha1.DatabasePhaseCredentialCreated
	}
	return v1alpha1.DatabasePhasePlanned
}

// decideProvisioning decides a Database whose database is not (yet) its
// own: the next provisioning step, unless the admin lacks the privileges
// to take it.
func decideProvisioning(o Observation, v Verdict) Verdict {
	if v.RoleOurs && !o.R.AdminMember && !o.R.AdminCanAdmin {
		// Creating the database needs the membership, and granting it
		// needs ADMIN OPTION on the role: nothing more can be done.
		v.Exists, v.UpToDate, v.Reason = true, true, ReasonInsufficientPrivileges
		v.Message = noAdminOption(o.Role, "make itself a member of it to create the database")
		return v
	}
	v.Message = fmt.Sprintf("provisioning: %s", nextStep(v.Phase))
	return v
}

// decideDrift decides a provisioned Database: the repairs of what drifted
// from what it provisioned, and whether it is Ready.
func decideDrift(o Observation, v Verdict, rec ownRecord) Verdict {
	if o.Login == LoginUnavailable {
		v.UpToDate, v.Reason = true, ReasonDependencyUnavailable
		v.Message = "the database exists but logging in as its role failed for a reason other than the password; retrying"
		return v
	}
	v.Repairs = append(recordRepairs(o, rec), catalogRepairs(o)...)
	if needsAdminOption(v.Repairs) && !o.R.AdminCanAdmin {
		v.UpToDate, v.Reason, v.Repairs = true, ReasonInsufficientPrivileges, nil
		v.Message = noAdminOption(o.Role, "repair it")
		return v
	}
	v.UpToDate = len(v.Repairs) == 0
	return provisionedState(o, v)
}

// recordRepairs lists the repairs of the KV record, its ownership
// metadata and the role's password that the observation calls for, in the
// order they apply.
func recordRepairs(o Observation, rec ownRecord) []Repair {
	var r []Repair
	switch {
	case !sameData(o.KV.Data, o.WantData):
		// Altered fields: restore them, keeping the record's password (or,
		// when the current version lost it, the newest earlier one that
		// still logs in).
		r = append(r, RepairKVRecord)
	case o.Login == LoginRefused && rec.roleOID == "":
		// Cannot happen (without the role's OID on record only a login
		// proves the role ours); kept as the record repair it always was.
		r = append(r, RepairKVRecord)
	}
	if o.Login == LoginRefused && rec.roleOID != "" {
		// The role this Database created (its OID is on record) refuses
		// the record's password: someone changed it. The record is the
		// truth; the role gets its password back, without any login with
		// another one.
		r = append(r, RepairPassword)
	}
	if missingOwnerKeys(o.KV.Owner, o.Identity) || rec.databaseOID == "" || rec.roleOID == "" {
		r = append(r, RepairOwnerMetadata)
	}
	return r
}

// provisionedState decides the phase, reason and message of a provisioned
// Database once its repairs are known: Ready only when nothing is left to
// repair and the credential's password is accepted.
func provisionedState(o Observation, v Verdict) Verdict {
	switch {
	case o.R.Elevated:
		v.Message = fmt.Sprintf("the role %q has been given SUPERUSER, REPLICATION or BYPASSRLS by someone; only a superuser can take that away", o.Role)
	case !o.DB.AllowConn:
		// Created accepting no connections and interrupted before they
		// were allowed: finish, never a drift.
		v.Message = "provisioning: the database accepts no connections yet; next: " + JoinRepairs(v.Repairs)
	case !v.UpToDate:
		v.Message = "repairing drift: " + JoinRepairs(v.Repairs)
		if slices.Contains(v.Repairs, RepairLimits) {
			v.Message += " (" + strings.Join(DecideLimits(o.Limits, o.R.Limits).Drift, "; ") + ")"
		}
	case o.Login == LoginLimitFull:
		// The password was accepted: the credential is proven. Its holder
		// has every session its connection limit allows, which is the
		// app's own business.
		v.Ready = true
		v.Phase = v1alpha1.DatabasePhaseReady
		v.Message = fmt.Sprintf("database %q owned by %q; the credential's password is accepted, but every session its connection limit allows is in use, so the installed extensions were not read this time", o.Database, o.Role)
	case o.Login != LoginOK:
		v.Reason = ReasonProvisioningFailed
		v.Message = fmt.Sprintf("the credential at %s does not log in as %q, and nothing the provider repairs explains it (it gives the role the record's password back when the role refuses it): check the server's authentication rules (pg_hba.conf) and the role's password expiry", o.Path, o.Role)
	default:
		v.Ready = true
		v.Phase = v1alpha1.DatabasePhaseReady
		v.Message = fmt.Sprintf("database %q owned by %q with extensions %v; the credential logs in", o.Database, o.Role, o.Installed)
	}
	return v
}

// decideImport decides an import: what of it is proven, the differences
// from what a tenant database is, and the repairs of them when its
// policies allow Update.
func decideImport(o Observation) Verdict {
	v := Verdict{Exists: o.DB.Exists, UpToDate: true}
	// For an import, "ours" means named by the admin and proven by the
	// named credential: its password is accepted for the role, and the
	// database is owned by that role. Only that may be dropped by an
	// explicit Delete.
	credential := o.KV.Present && o.KV.Data["password"] != ""
	v.RoleOurs = o.R.Exists && credential && passwordAccepted(o.Login)
	v.KVOurs = v.RoleOurs
	v.DBOurs = o.DB.Exists && v.RoleOurs && o.DB.Owner == o.Role
	if !o.DB.Exists {
		v.Phase, v.Reason = v1alpha1.DatabasePhasePending, ReasonImportDifferences
		v.Message = fmt.Sprintf("import: the database %q does not exist", o.Database)
		return v
	}
	v.Phase = v1alpha1.DatabasePhaseDatabaseCreated
	d := importDifferences(o)
	v.Differences = d
	if len(d) > 0 && o.ImportUpdate && o.R.Exists && o.Login == LoginOK {
		// The admin allowed updates and the record's credential logs in as
		// the role: repair what differs, never the password.
		v.Repairs = catalogRepairs(o)
		v.UpToDate = len(v.Repairs) == 0
		if needsAdminOption(v.Repairs) && !o.R.AdminCanAdmin {
			v.Repairs, v.UpToDate = nil, true
			v.Reason = ReasonInsufficientPrivileges
			v.Message = noAdminOption(o.Role, "repair the import") + ". Differences: " + strings.Join(d, "; ")
			return v
		}
	}
	if len(d) == 0 {
		v.Ready = true
		v.Phase = v1alpha1.DatabasePhaseReady
		v.Message = fmt.Sprintf("imported read-only: database %q, role %q and the credential at %s match", o.Database, o.Role, o.Path)
		if o.ImportUpdate {
			v.Message = fmt.Sprintf("imported with Update allowed: database %q, role %q and the credential at %s match; drift is repaired", o.Database, o.Role, o.Path)
		}
		return v
	}
	v.Reason = ReasonImportDifferences
	switch {
	case len(v.Repairs) > 0:
		v.Reason = ""
		v.Message = "imported with Update allowed: repairing " + JoinRepairs(v.Repairs) + ". Differences: " + strings.Join(d, "; ")
	case o.ImportUpdate:
		v.Message = "imported with Update allowed; nothing was changed (" + importNotRepaired(o) + "). Differences: " + strings.Join(d, "; ")
	default:
		v.Message = "imported read-only; nothing was changed. Differences: " + strings.Join(d, "; ")
	}
	return v
}

// importDifferences lists how an existing imported database, its role and
// its credential differ from what a tenant database is.
func importDifferences(o Observation) []string {
	var d []string
	if !o.R.Exists {
		d = append(d, fmt.Sprintf("the role %q does not exist", o.Role))
	} else if !o.R.AttributesOK {
		d = append(d, fmt.Sprintf("the role %q does not have exactly LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS", o.Role))
	}
	if lv := DecideLimits(o.Limits, o.R.Limits); o.R.Exists && lv.Drifted() {
		d = append(d, fmt.Sprintf("the role %q's limits differ: %s", o.Role, strings.Join(lv.Drift, "; ")))
	}
	if o.DB.Owner != o.Role {
		d = append(d, fmt.Sprintf("the database is owned by %q, not %q", o.DB.Owner, o.Role))
	}
	if !o.DB.AllowConn {
		d = append(d, "the database accepts no connections (datallowconn is false)")
	}
	if o.DB.PublicConnect {
		d = append(d, "PUBLIC may connect to the database")
	} else if !o.DB.RoleConnect && o.ImportUpdate {
		d = append(d, fmt.Sprintf("the role %q holds no explicit CONNECT", o.Role))
	}
	// A tenant database is no template and has no connection limit of its
	// own, an import's like a provisioned one's.
	if o.DB.IsTemplate {
		d = append(d, "the database is marked a template (datistemplate is true): any role with CREATEDB may copy it")
	}
	if o.DB.ConnLimited {
		d = append(d, "the database has a connection limit of its own (datconnlimit is not -1)")
	}
	switch {
	case !o.KV.Present || o.KV.Data["password"] == "":
		d = append(d, fmt.Sprintf("no credential at %s", o.Path))
	case o.Login == LoginRefused:
		d = append(d, fmt.Sprintf("the credential at %s does not log in as %q", o.Path, o.Role))
	case o.Login == LoginUnavailable:
		d = append(d, "logging in with the credential failed for a reason other than the password")
	}
	if m := Missing(o.Requested, o.Installed); len(m) > 0 && o.Login == LoginOK {
		d = append(d, fmt.Sprintf("extensions not installed: %v", m))
	}
	return d
}

// importNotRepaired says why an import whose policies allow Update repairs
// none of its differences.
func importNotRepaired(o Observation) string {
	switch {
	case o.Login == LoginLimitFull:
		return "an import is repaired only once its credential logs in as its role, and every session the role's or the database's connection limit allows is in use"
	case !o.R.Exists || o.Login != LoginOK:
		return "an import is repaired only once its credential logs in as its role"
	case o.R.Elevated:
		return fmt.Sprintf("the role %q has been given SUPERUSER, REPLICATION or BYPASSRLS, which only a superuser can take away", o.Role)
	}
	return "none of the differences is one the provider repairs"
}

// catalogRepairs lists the repairs of the role, the database and its
// extensions that the observation calls for, in the order they apply.
func catalogRepairs(o Observation) []Repair {
	var r []Repair
	if !o.R.AdminMember {
		r = append(r, RepairAdminMember)
	}
	if !o.R.AttributesOK && !o.R.Elevated {
		r = append(r, RepairRole)
	}
	if o.R.Exists && DecideLimits(o.Limits, o.R.Limits).Drifted() {
		r = append(r, RepairLimits)
	}
	if o.DB.Owner != o.Role {
		r = append(r, RepairOwner)
	}
	if o.DB.PublicConnect || !o.DB.RoleConnect || !o.DB.AllowConn {
		r = append(r, RepairConnect)
	}
	if o.DB.IsTemplate || o.DB.ConnLimited {
		r = append(r, RepairDatabase)
	}
	if o.Login != LoginLimitFull && len(Missing(o.Requested, o.Installed)) > 0 {
		// With the role's sessions all taken, the extensions were not
		// read: nothing is known to be missing.
		r = append(r, RepairExtensions)
	}
	return r
}

// needsAdminOption reports whether any repair grants or alters the role.
func needsAdminOption(r []Repair) bool {
	return slices.Contains(r, RepairAdminMember) || slices.Contains(r, RepairRole) || slices.Contains(r, RepairLimits) ||
		slices.Contains(r, RepairPassword)
}

// noAdminOption says that the admin may not administer role, and what
// fixes it. It never names the admin role.
func noAdminOption(role, to string) string {
	return fmt.Sprintf("the admin role may not grant, alter or drop the role %q (PostgreSQL 16 and later require ADMIN OPTION on it, which only a role's creator gets by itself), so it cannot %s: as a superuser or the role's creator, run GRANT %q TO <the admin role> WITH ADMIN OPTION; nothing was changed", role, to, role)
}

func nextStep(p v1alpha1.DatabasePhase) string {
	switch p {
	case v1alpha1.DatabasePhaseCredentialCreated:
		return "next: create the login role"
	case v1alpha1.DatabasePhaseRoleCreated:
		return "next: create the database"
	default:
		return "next: write the credential to OpenBao"
	}
}

func describeOwner(m map[string]string) string {
	if m[MetaManagedBy] != ManagedBy {
		return "something this provider did not create"
	}
	if m[MetaUID] == "" {
		return "something else this provider wrote (not a Database's own record)"
	}
	return fmt.Sprintf("Database %s (uid %s)", m[MetaName], m[MetaUID])
}

func sameData(have, want map[string]string) bool {
	if want == nil {
		return true
	}
	for _, k := range CredentialKeys {
		if k == "password" {
			if have[k] == "" {
				return false
			}
			continue
		}
		if have[k] != want[k] {
			return false
		}
	}
	return len(have) == len(CredentialKeys)
}

func missingOwnerKeys(have map[string]string, id Identity) bool {
	for k, v := range OwnerMetadata(id) {
		if have[k] != v {
			return true
		}
	}
	return false
}

// Missing returns the requested names not in installed, sorted.
func Missing(requested, installed []string) []string {
	var out []string
	for _, r := range requested {
		if !slices.Contains(installed, r) {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// JoinRepairs names the repairs, comma-separated, for messages and logs.
func JoinRepairs(r []Repair) string {
	s := make([]string, len(r))
	for i := range r {
		s[i] = string(r[i])
	}
	return strings.Join(s, ", ")
}

// ClaimString is a claim as <namespace>/<name>, for display.
func ClaimString(c *v1alpha1.ClaimReference) string {
	if c == nil {
		return ""
	}
	return c.Namespace + "/" + c.Name
}

// Claimants are the bindings that may hold claim: in its namespace, of its
// Tenant's UID, being deleted or not. Each holds it only as its standing
// says (LiveBinding).
func Claimants(bindings []v1alpha1.DatabaseBinding, claim *v1alpha1.ClaimReference) []*v1alpha1.DatabaseBinding {
	if claim == nil || claim.UID == "" {
		return nil
	}
	var out []*v1alpha1.DatabaseBinding
	for i := range bindings {
		b := &bindings[i]
		if b.GetNamespace() == claim.Namespace && b.Spec.ForProvider.Tenant.UID == claim.UID {
			out = append(out, b)
		}
	}
	return out
}

// Claimant is a binding of a claim's Tenant UID, as LiveBinding needs it.
type Claimant struct {
	Standing Standing
	Deleting bool
}

// LiveBinding is whether a claim is held, from its claimants (their
// standing, DecideStanding) and whether the Database already records the
// claim Released. A claim recorded Released is held by nobody, not even by
// a new binding of the Tenant that released it (one its Composition wrote
// again after the old one was deleted): only an admin's edit of
// spec.claimRef reopens the Database. Otherwise the claim is live when a
// claimant is its Tenant's and not being deleted; pending while one may yet
// be (its Tenant does not list it yet), or while the binder has a release
// to make (a binding of the Tenant being deleted, or one whose Tenant is
// gone); none otherwise. A forged binding holds nothing.
func LiveBinding(claimants []Claimant, released bool) Claimancy {
	if released {
		return ClaimNone
	}
	out := ClaimNone
	for _, c := range claimants {
		switch {
		case c.Standing == StandingTenants && !c.Deleting:
			return ClaimLive
		case c.Standing == StandingPending && !c.Deleting,
			c.Standing == StandingTenants || c.Standing == StandingGone:
			out = ClaimPending
		}
	}
	return out
}

// ReleasedClaim reports whether a Database's binding status records its
// current claim as Released.
func ReleasedClaim(b v1alpha1.BindingStatus, claim *v1alpha1.ClaimReference) bool {
	return b.Phase == v1alpha1.BindingReleased && b.ReleasedClaim != nil && claim != nil && *b.ReleasedClaim == *claim
}

// BindingOf is the binding status a Database shows, from its claimRef,
// the status recorded earlier and whether a live DatabaseBinding of the
// claim's Tenant exists: no claim is Available (a released claim recorded
// earlier is kept for diagnosis); a claim without UID is Available,
// reserved for that Tenant; a claim whose Tenant has a live binding is
// Bound, unless the recorded status shows that very claim Released; any
// other claim with a UID is Released, and stays so until an admin clears
// or replaces spec.claimRef: a binding of the claim's Tenant written again
// later never turns Released into Bound.
func BindingOf(claim *v1alpha1.ClaimReference, recorded v1alpha1.BindingStatus, liveBinding bool) v1alpha1.BindingStatus {
	out := v1alpha1.BindingStatus{Phase: v1alpha1.BindingAvailable, ReleasedClaim: recorded.ReleasedClaim}
	if claim == nil {
		return out
	}
	out.Claim = ClaimString(claim)
	switch {
	case claim.UID == "":
	case liveBinding && !ReleasedClaim(recorded, claim):
		out.Phase = v1alpha1.BindingBound
	default:
		out.Phase = v1alpha1.BindingReleased
		c := *claim
		out.ReleasedClaim = &c
	}
	return out
}

// DeletionVerdict is what a deleted Database does.
type DeletionVerdict struct {
	// Wait: keep the finalizer and do nothing (Reason and Message say why).
	Wait            bool
	Reason, Message string
	// Drop: drop what the Database provably owns. Otherwise nothing is
	// dropped and the Database goes.
	Drop bool
}

// DecideDeletion decides a deleted Database's fate: while its claim's
// Tenant has a live DatabaseBinding, it waits (like a PersistentVolume
// still bound to a claim); then it drops what it owns only when the
// reclaim policy in effect is Delete and its management policies allow
// Delete, and otherwise leaves everything in place.
func DecideDeletion(reclaim v1alpha1.ReclaimPolicy, policiesAllowDelete bool, claim *v1alpha1.ClaimReference, liveBinding bool) DeletionVerdict {
	if claim != nil && claim.UID != "" && liveBinding {
		// The message goes to Events too, which for a cluster-scoped
		// object are in namespace default: it names no claim (the
		// Database's spec.claimRef does, for an admin).
		return DeletionVerdict{Wait: true, Reason: ReasonBoundToTenant, Message: "the Database is bound to the Tenant its spec.claimRef names, whose DatabaseBinding still exists: it is deleted once that claim is released (delete the Tenant's DatabaseBinding, or the Tenant); nothing was dropped"}
	}
	return DeletionVerdict{Drop: reclaim == v1alpha1.ReclaimDelete && policiesAllowDelete}
}
