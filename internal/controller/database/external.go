package database

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/password"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Steps, as named to the fault-injection hook and in messages.
const (
	StepCheckExtensions = "check-extensions"
	StepOwnerMetadata   = "kv-owner-metadata"
	StepCredential      = "kv-credential" //nolint:gosec // a step name, not a credential
	StepRole            = "role"
	StepDatabase        = "database"
	StepRecordOID       = "kv-record-oid"
	StepConnect         = "connect-privileges"
	StepExtensions      = "extensions"
	StepCreated         = "created"
	StepRepair          = "repair"
	StepBlockLogins     = "block-logins"
	StepTerminate       = "terminate-sessions"
	StepDropDatabase    = "drop-database"
	StepDropRole        = "drop-role"
	StepDeleteKV        = "delete-kv"
	// Credential rotation: the intent and the new version in OpenBao; the
	// role's new verifier; ending the role's sessions; the completion in
	// the record's metadata.
	StepRotateCredential = "rotate-kv-credential" //nolint:gosec // a step name, not a credential
	StepRotateRole       = "rotate-role"
	StepRotateSessions   = "rotate-terminate-sessions"
	StepRotateRecord     = "rotate-record"
	// Access cleanup: the removal itself (every step re-reads the
	// catalog); the completion in the record's metadata.
	StepCleanup       = "access-cleanup"
	StepCleanupRecord = "access-cleanup-record"
)

// external acts on one Database's server and OpenBao record, for one
// reconcile: Observe fills obs and verdict, which Create, Update and Delete
// then act on.
type external struct {
	log     logging.Logger
	pool    *postgres.Pool
	kv      KV
	opts    options.Options
	hook    func(string) error
	record  event.Recorder
	confirm *confirmer
	logins  *memo.Logins
	kube    client.Client
	cfgVer  string
	// cfgLimits are the config's spec.tenantLimits: the defaults of the
	// login role's limits.
	cfgLimits *v1alpha1.TenantLimits
	// defaultConnLimit is the connection limit of the login roles the
	// provider makes when neither the config nor the Database sets one
	// (tenancy.DefaultConnectionLimit); nil when the config sets one or the
	// server's connections could not be read. An import's own login role
	// keeps only the limits set explicitly.
	defaultConnLimit *int32
	id               tenancy.Identity
	// drop: the Database is being deleted and drops what it provably owns
	// (reclaim policy Delete, management policies with Delete, claim
	// released).
	drop bool

	names     names
	prevPhase v1alpha1.DatabasePhase
	obs       tenancy.Observation
	verdict   tenancy.Verdict
	// access is what the catalog shows of access by roles other than the
	// owner (the OtherAccess condition).
	access tenancy.OtherAccessVerdict
	// exts is what the server said about the requested extensions, when
	// Observe checked them.
	exts map[string]postgres.Extension

	// optionPolicy is the config's spec.databaseOptions; createOpts the
	// options Observe checked for Create (checkOptions).
	optionPolicy *v1alpha1.DatabaseOptionsPolicy
	createOpts   postgres.CreateOptions
	// sizes are the config's measured database sizes; cfgUID its UID.
	sizes  *memo.Sizes
	cfgUID types.UID
	// dataRoles are the data roles Observe found, when the owner is
	// Ready.
	dataRoles []dataRole
	// roleList is the metadata that lists the data roles (names.roles);
	// roleListOurs: it is this Database's.
	roleList     map[string]string
	roleListOurs bool
}

// names are the effective names of a Database.
type names struct {
	database, role, path string
	// roles is where the data roles' records live (<roles>/roles/<name>)
	// and whose metadata lists them: the Database's own record, or, for
	// an import (whose record is the admin's), a metadata-only entry at
	// the path a provisioning Database's record would have.
	roles     string
	importing bool
}

// policies resolves db's management policies as the managed reconciler
// does. The feature is on: Setup refuses to start without it.
func policies(db *v1alpha1.Database) managed.ManagementPoliciesChecker {
	return managed.NewManagementPoliciesResolver(true, db.GetManagementPolicies())
}

// resolve returns the effective names, or an error with a Ready condition
// (InvalidSpec) already set.
func (e *external) resolve(db *v1alpha1.Database) (names, error) {
	n := names{importing: !policies(db).ShouldCreate(), database: db.Spec.ForProvider.Database}
	n.role = n.database
	if r := db.Spec.ForProvider.LoginRole; r != nil {
		n.role = *r
	}
	for field, v := range map[string]string{"database": n.database, "loginRole": n.role} {
		if err := tenancy.ValidateName("spec.forProvider."+field, v); err != nil {
			return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
		}
	}
	if err := tenancy.ValidateLimits("spec.forProvider.limits", db.Spec.ForProvider.Limits); err != nil {
		return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
	}
	if err := tenancy.ValidateLimits("the ClusterProviderConfig's spec.tenantLimits", e.cfgLimits); err != nil {
		return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
	}
	for _, x := range db.Spec.ForProvider.Extensions {
		if err := tenancy.ValidateIdentifier("extension", x); err != nil {
			return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
		}
	}
	derived := tenancy.CredentialPath(e.opts.OpenBao.DatabaseBasePath, db.GetName())
	cp := db.Spec.ForProvider.CredentialPath
	switch {
	case n.importing && cp == nil:
		return n, fail(db, tenancy.ReasonInvalidSpec, "an import (managementPolicies without Create) must name the existing credential record in spec.forProvider.credentialPath")
	case n.importing:
		n.path = *cp
	case cp != nil && *cp != derived:
		return n, fail(db, tenancy.ReasonInvalidSpec, fmt.Sprintf("spec.forProvider.credentialPath may not be chosen by a provisioning Database: it is derived as %q", derived))
	default:
		n.path = derived
	}
	if err := tenancy.ValidatePath("spec.forProvider.credentialPath", n.path); err != nil {
		return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
	}
	n.roles = derived
	if n.importing && len(db.Spec.ForProvider.DataRoles) > 0 && !policies(db).ShouldUpdate() {
		return n, fail(db, tenancy.ReasonInvalidSpec, "spec.forProvider.dataRoles: a read-only import never changes the database's grants, and data roles are granted the owner's data; add Update to spec.managementPolicies to have them made, or remove spec.forProvider.dataRoles; nothing was created or changed")
	}
	if n.importing {
		if err := tenancy.ValidateImportPath("spec.forProvider.credentialPath", n.path, e.opts.OpenBao.TenantBasePath); err != nil {
			return n, fail(db, tenancy.ReasonInvalidSpec, err.Error())
		}
	}
	return n, nil
}

// fail sets Ready=False with reason and message and returns the message as
// an error.
func fail(db *v1alpha1.Database, reason, msg string) error {
	// The error class is logged by the managed reconciler with the error;
	// the message names steps and objects, never a credential.
	metrics.Failure("database", reason)
	db.SetConditions(xpv2.Condition{
		Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ConditionReason(reason),
		Message: msg, LastTransitionTime: metav1.Now(), ObservedGeneration: db.GetGeneration(),
	})
	return errors.New(msg)
}

// failFrom classifies err (a postgres or openbao failure) into a reason.
func failFrom(db *v1alpha1.Database, step string, err error) error {
	reason := tenancy.ReasonProvisioningFailed
	if c := postgres.ClassOf(err); c != "" {
		// Every class is named as the reason a human acts on.
		reason = string(c)
	}
	if openbao.Unavailable(err) {
		reason = tenancy.ReasonDependencyUnavailable
	}
	return fail(db, reason, fmt.Sprintf("step %s failed: %v", step, err))
}

func (e *external) step(name string) error {
	if e.hook == nil {
		return nil
	}
	return e.hook(name)
}

// wantData is the record a Database keeps (password aside): its names and
// the endpoint its admin pool connects to.
func (e *external) wantData(n names) map[string]string {
	m := map[string]string{"username": n.role, "database": n.database}
	for k, v := range e.id.Endpoint {
		m[k] = v
	}
	return m
}

// Observe reads the catalog (one query), the KV record (one request) and,
// when there is a role and a credential, logs in as the role to its
// database (one connection, which also lists the installed extensions),
// then lets the decision core judge. While the last proven login stands,
// it neither logs in nor reads the record: it uses the record kept with
// that login (tenancy.RememberedRecord), and reads it after all when the
// verdict finds anything to do.
func (e *external) Observe(ctx context.Context, db *v1alpha1.Database) (managed.ExternalObservation, error) {
	n, err := e.resolve(db)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.names = n
	cat, err := e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return managed.ExternalObservation{}, failFrom(db, "observe", err)
	}
	o := tenancy.Observation{
		Identity: e.id, Import: n.importing, ImportUpdate: n.importing && policies(db).ShouldUpdate(), Deleting: meta.WasDeleted(db),
		Database: n.database, Role: n.role, Path: n.path,
		Requested: db.Spec.ForProvider.Extensions,
		WantData:  e.wantData(n),
		Rotation:  rotationRequest(db),
		Cleanup:   cleanupRequest(db),
		DB: tenancy.DBState{Exists: cat.DatabaseExists, OID: cat.DatabaseOID, Owner: cat.Owner, AllowConn: cat.AllowConn, PublicConnect: cat.PublicConnect, RoleConnect: cat.RoleConnect,
			IsTemplate: cat.IsTemplate, ConnLimited: cat.DatabaseExists && cat.DatabaseConnLimit != -1},
		R: tenancy.RoleState{Exists: cat.RoleExists, OID: cat.RoleOID, AttributesOK: cat.RoleAttributesOK(), AdminMember: cat.AdminMember, AdminCanAdmin: cat.AdminCanAdmin,
			Elevated: cat.Superuser || cat.Replication || cat.BypassRLS, Limits: cat.RoleLimits()},
		Limits: tenancy.LimitsOf(e.cfgLimits, db.Spec.ForProvider.Limits),
	}
	if !n.importing {
		o.Limits = o.Limits.WithDefaultConnectionLimit(e.defaultConnLimit)
	}
	now := time.Now()
	var v tenancy.Verdict
	last := e.lastLogin(db)
	remembered := e.rememberedRecord(o, cat, last, now)
	if remembered != nil {
		// The last proven login stands with this record: what it proved
		// stands too.
		o.KV, o.Login, o.Installed = *remembered, tenancy.LoginOK, last.Installed
		if v = tenancy.Decide(o); tenancy.Steady(v) {
			metrics.RecordRemembered()
			metrics.LoginSkipped()
		}
	}
	if remembered == nil || !tenancy.Steady(v) {
		rec, err := e.kv.Read(ctx, n.path)
		if err != nil {
			return managed.ExternalObservation{}, fail(db, tenancy.ReasonDependencyUnavailable, err.Error())
		}
		metrics.RecordRead()
		o.KV, o.Login, o.Installed = tenancy.KVState{}, tenancy.LoginNotTried, nil
		if rec != nil {
			o.KV = tenancy.KVState{Present: true, Owner: rec.Owner, Data: rec.Data, Version: rec.Version}
		}
		if cat.RoleExists && tenancy.MayLogin(o) {
			o.Login, o.Installed = e.loginIfDue(ctx, db, n, o, cat, last, now)
		}
		v = tenancy.Decide(o)
	}
	if tenancy.NeedsExtensionCheck(o, v) {
		// Every requested extension must be one the owner can create
		// before any write. A failed query is DependencyUnavailable, never
		// "unsupported".
		problems, err := e.checkExtensions(ctx, o.Requested, o.Installed)
		if err != nil {
			return managed.ExternalObservation{}, fail(db, tenancy.ReasonDependencyUnavailable, "cannot check pg_available_extensions for the requested extensions: "+err.Error())
		}
		o.PreWrite.ExtensionProblems = problems
		v = tenancy.Decide(o)
	}
	if tenancy.NeedsOptionsCheck(o, v) {
		// The encoding and locale must be allowed and supported before
		// any write.
		o.PreWrite.OptionsReason, o.PreWrite.OptionsMessage = e.checkOptions(ctx, db)
		v = tenancy.Decide(o)
	}
	e.obs = o
	e.dataRoles = nil
	if err := e.readRoleList(ctx, o); err != nil {
		return managed.ExternalObservation{}, failFrom(db, "read the data roles' list", err)
	}
	if !meta.WasDeleted(db) && v.Ready && (!o.Import || o.ImportUpdate) && (len(db.Spec.ForProvider.DataRoles) > 0 || len(tenancy.RecordedDataRoles(e.roleList)) > 0) {
		// The data roles once the owner is Ready: they are granted the
		// owner's data.
		roles, err := e.observeDataRoles(ctx, db)
		if err != nil {
			return managed.ExternalObservation{}, failFrom(db, "observe data roles", err)
		}
		e.dataRoles = roles
		verdicts := make([]tenancy.DataRoleVerdict, len(roles))
		for i, r := range roles {
			verdicts[i] = r.verdict
		}
		v = tenancy.WithDataRoles(v, verdicts)
	}
	// The data roles this Database's record lists hold the CONNECT it
	// granted them: that is not other access.
	var dataRoles []string
	if v.KVOurs || e.roleListOurs {
		for _, name := range tenancy.RecordedDataRoles(e.roleList) {
			dataRoles = append(dataRoles, tenancy.DataRoleName(n.role, name))
		}
	}
	e.access = tenancy.DecideOtherAccess(tenancy.OtherAccessInput{Database: n.database, Role: n.role, Grants: cat.OtherGrants, Members: cat.OtherMembers, DataRoles: dataRoles})
	e.reportDataRoles(db)
	e.verdict = v
	if !meta.WasDeleted(db) {
		e.reportOptions(ctx, db, cat.DatabaseExists, cat.DatabaseOID)
		e.reportSize(db, cat.DatabaseExists)
	}

	e.report(db, v)
	obs := managed.ExternalObservation{ResourceExists: v.Exists, ResourceUpToDate: v.UpToDate}
	if meta.WasDeleted(db) {
		// While deleting, exist as long as anything provably ours is left,
		// and only that: a foreign object is never deleted. When the
		// endpoint or the names changed, nothing can be proven either way:
		// exist, so that Delete refuses and the finalizer stays.
		obs.ResourceExists = e.drop && (v.KVOurs || v.RoleOurs || v.DBOurs || refusesDelete(v.Reason))
	}
	return obs, nil
}

// checkExtensions returns, one line each, why requested extensions cannot
// be created by the database owner: not available on the server, not
// trusted (they need a superuser, and the provider never creates an
// extension as the admin), outside a managed service's allow-list, or
// needing another extension that is neither requested nor installed.
func (e *external) checkExtensions(ctx context.Context, requested, installed []string) ([]string, error) {
	if len(requested) == 0 {
		return nil, nil
	}
	if err := e.step(StepCheckExtensions); err != nil {
		return nil, err
	}
	info, err := e.pool.Extensions(ctx, requested)
	if err != nil {
		return nil, err
	}
	e.exts = info
	var missing, untrusted, denied, needs []string
	for _, x := range requested {
		i := info[x]
		switch {
		case !i.Available:
			missing = append(missing, x)
		case i.NotAllowed:
			denied = append(denied, x)
		case !i.OwnerMayCreate:
			untrusted = append(untrusted, x)
		}
		for _, r := range i.Requires {
			if !slices.Contains(requested, r) && !slices.Contains(installed, r) && r != "plpgsql" {
				needs = append(needs, fmt.Sprintf("%s needs %s", x, r))
			}
		}
	}
	var p []string
	if len(missing) > 0 {
		p = append(p, fmt.Sprintf("extensions %v are not available on this server (pg_available_extensions)", missing))
	}
	if len(denied) > 0 {
		p = append(p, fmt.Sprintf("extensions %v are not in the server's extension allow-list (rds.allowed_extensions or azure.extensions): the platform team must allow them first", denied))
	}
	if len(untrusted) > 0 {
		p = append(p, fmt.Sprintf("extensions %v are not trusted: only a superuser can create them and the database owner is none; the provider never creates extensions as the admin, so a platform admin must install them by hand or choose trusted ones", untrusted))
	}
	if len(needs) > 0 {
		p = append(p, fmt.Sprintf("requested extensions need others that are not requested (%s): add them to spec.forProvider.extensions", strings.Join(needs, ", ")))
	}
	return p, nil
}

// ownerMeta is the ownership metadata with the recorded OIDs (0: unknown).
func (e *external) ownerMeta(roleOID, dbOID uint32) map[string]string {
	m := tenancy.OwnerMetadata(e.id)
	if roleOID != 0 {
		m[tenancy.MetaRoleOID] = fmt.Sprint(roleOID)
	}
	if dbOID != 0 {
		m[tenancy.MetaDatabaseOID] = fmt.Sprint(dbOID)
	}
	return m
}

// recordOIDs writes the OIDs into the record's metadata when they differ.
func (e *external) recordOIDs(ctx context.Context, db *v1alpha1.Database, have map[string]string, roleOID, dbOID uint32) error {
	want := e.ownerMeta(roleOID, dbOID)
	if have[tenancy.MetaRoleOID] == want[tenancy.MetaRoleOID] && have[tenancy.MetaDatabaseOID] == want[tenancy.MetaDatabaseOID] {
		return nil
	}
	if err := e.step(StepRecordOID); err != nil {
		return failFrom(db, StepRecordOID, err)
	}
	if err := e.kv.SetOwner(ctx, e.names.path, want); err != nil {
		return failFrom(db, StepRecordOID, err)
	}
	for k, v := range want {
		have[k] = v
	}
	return nil
}

// loginFingerprint is the state a login is made under: the catalog's and
// the record's version.
func loginFingerprint(cat postgres.Catalog, version int) string {
	return fmt.Sprintf("%s kv=%d", cat.LoginFingerprint(), version)
}

// lastLogin is the Database's last proven login, nil when none is known or
// the periodic check is off (every Observe logs in and reads the record).
func (e *external) lastLogin(db *v1alpha1.Database) *tenancy.ProvenLogin {
	if e.logins == nil || e.opts.LoginCheckInterval <= 0 {
		return nil
	}
	return e.logins.Get(db.GetUID())
}

// rememberedRecord is the record kept with the last proven login while that
// login stands, nil when the record must be read from OpenBao.
func (e *external) rememberedRecord(o tenancy.Observation, cat postgres.Catalog, last *tenancy.ProvenLogin, now time.Time) *tenancy.KVState {
	if !cat.RoleExists {
		return nil
	}
	return tenancy.RememberedRecord(o, tenancy.LoginCheck{Last: last, Now: now},
		func(version int) string { return loginFingerprint(cat, version) })
}

// loginIfDue logs in as the role, unless the last proven login (last, as
// Observe read it) still stands (tenancy.LoginDue): then it reports that login's result, and the
// server sees no new connection.
func (e *external) loginIfDue(ctx context.Context, db *v1alpha1.Database, n names, o tenancy.Observation, cat postgres.Catalog, last *tenancy.ProvenLogin, now time.Time) (tenancy.Login, []string) {
	check := tenancy.LoginCheck{Fingerprint: loginFingerprint(cat, o.KV.Version), Now: now, Last: last}
	if tenancy.LoginDue(o, check) == "" {
		metrics.LoginSkipped()
		return tenancy.LoginOK, check.Last.Installed
	}
	login, installed := e.login(ctx, n, o.KV.Data["password"])
	if login == tenancy.LoginLimitFull && last != nil {
		// No session to read the extensions: the last proven login's list
		// is the best known.
		installed = last.Installed
	}
	metrics.LoginMade()
	if f := tenancy.LoginFailure(login); f != "" {
		metrics.LoginFailed(f)
	}
	if e.logins != nil {
		if login == tenancy.LoginOK && e.opts.LoginCheckInterval > 0 {
			p := tenancy.ProvenLogin{Fingerprint: check.Fingerprint, Installed: installed,
				Due: tenancy.NextLoginDue(now, e.opts.LoginCheckInterval, e.logins.Spread())}
			if !o.Import {
				// An import reads its record at every Observe.
				rec := o.KV.WithoutPassword()
				p.Record = &rec
			}
			e.logins.Put(db.GetUID(), p, now)
		} else {
			e.logins.Forget(db.GetUID())
		}
	}
	return login, installed
}

// forgetLogin makes the next Observe log in: called before every write.
func (e *external) forgetLogin(db *v1alpha1.Database) {
	if e.logins != nil {
		e.logins.Forget(db.GetUID())
		// A write on the Database (a rotation, a cleanup that revokes
		// other roles' grants, a repair) is checked on its data roles too.
		names, _ := dataRoleNames(db, e.roleList)
		for _, name := range names {
			e.logins.Forget(memo.DataRoleKey(db.GetUID(), name))
		}
	}
}

// login connects as the role to its database with the KV password.
func (e *external) login(ctx context.Context, n names, password string) (tenancy.Login, []string) {
	c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: password})
	if err != nil {
		var pe *postgres.Error
		if errors.As(err, &pe) {
			switch {
			case pe.SQLState == "3D000":
				return tenancy.LoginAuthOK, nil
			case pe.SQLState == "55000":
				// The database accepts no connections: the server says so
				// only after authentication. Not a refused credential.
				return tenancy.LoginNotAccepting, nil
			case postgres.LimitAfterAuthentication(err):
				// The role's (or the database's) connection limit is full,
				// checked after the password was accepted: whoever holds
				// the credential has every session it allows.
				return tenancy.LoginLimitFull, nil
			case pe.Class == postgres.ClassAuthentication:
				return tenancy.LoginRefused, nil
			}
		}
		return tenancy.LoginUnavailable, nil
	}
	defer c.Close(ctx) //nolint:errcheck // read-only connection
	exts, err := c.Extensions(ctx)
	if err != nil {
		return tenancy.LoginUnavailable, nil
	}
	return tenancy.LoginOK, exts
}

// report writes the verdict into status and conditions.
func (e *external) report(db *v1alpha1.Database, v tenancy.Verdict) {
	ap := &db.Status.AtProvider
	e.prevPhase = ap.Phase
	ap.Phase = v.Phase
	ap.Credential = v1alpha1.CredentialObservation{
		Path:       e.names.path,
		OpenBaoURL: openbao.ConsumerURL(e.opts.OpenBao.ConsumerAddress, e.opts.OpenBao.KVMount, e.names.path),
	}
	ap.PostgreSQLVersion = e.cfgVer
	ap.DatabaseOID, ap.Owner, ap.Extensions = 0, "", nil
	if e.obs.DB.Exists {
		ap.DatabaseOID, ap.Owner = int64(e.obs.DB.OID), e.obs.DB.Owner
	}
	if e.obs.Login == tenancy.LoginOK {
		ap.Extensions = e.obs.Installed
	}
	if v.KVOurs || (e.obs.Import && !tenancy.KVForeign(e.obs.KV, e.id)) {
		// The last completed rotation, as the record's metadata keeps it
		// (status may have been lost).
		if r := completedRotation(e.obs.KV.Owner); r != nil {
			ap.CredentialRotation = r
		}
		// The last completed access cleanup: what status kept of it when
		// it is the same one, else the record's metadata.
		if c := completedCleanup(e.obs.KV.Owner); c != nil && (ap.AccessCleanup == nil || ap.AccessCleanup.ID != c.ID) {
			ap.AccessCleanup = c
		}
	}
	ap.Limits = nil
	if e.obs.R.Exists {
		ap.Limits = tenancy.DecideLimits(e.obs.Limits, e.obs.R.Limits).Status
	}
	e.reportOtherAccess(db)
	prev := db.GetCondition(xpv2.TypeReady)
	// A Ready verdict carries no reason; the condition it sets says
	// Available. Log only changes, not every poll of a Ready Database.
	reason := v.Reason
	if v.Ready {
		reason = string(xpv2.Available().Reason)
	}
	if string(prev.Reason) != reason || prev.Status == corev1.ConditionTrue != v.Ready || ap.Phase != e.prevPhase {
		e.log.Info("Database observed", "phase", v.Phase, "ready", v.Ready, "reason", v.Reason, "kvOurs", v.KVOurs, "roleOurs", v.RoleOurs, "databaseOurs", v.DBOurs, "repairs", tenancy.JoinRepairs(v.Repairs))
	}
	switch {
	case v.Ready:
		db.SetConditions(xpv2.Available().WithMessage(v.Message))
		if prev.Status != corev1.ConditionTrue {
			e.record.Event(db, event.Normal("Ready", v.Message))
		}
	case v.Reason != "":
		metrics.Failure("database", v.Reason)
		db.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ConditionReason(v.Reason), Message: v.Message, LastTransitionTime: metav1.Now(), ObservedGeneration: db.GetGeneration()})
		if string(prev.Reason) != v.Reason {
			e.record.Event(db, event.Warning(event.Reason(v.Reason), errors.New(v.Message)))
		}
	case meta.WasDeleted(db):
		db.SetConditions(xpv2.Deleting())
	default:
		db.SetConditions(xpv2.Creating().WithMessage(v.Message))
	}
}

// reportOtherAccess shows the access roles other than the owner have, in
// status.atProvider.otherAccess and the OtherAccess condition: never on
// Ready, which is relayed to the Tenant's namespace, and never in an
// Event, which a namespace may read; the roles' names stay on the
// cluster-scoped Database. Nothing is revoked.
func (e *external) reportOtherAccess(db *v1alpha1.Database) {
	a := e.access
	db.Status.AtProvider.OtherAccess = a.Status
	status := corev1.ConditionFalse
	if a.Present {
		status = corev1.ConditionTrue
	}
	if prev := db.GetCondition(tenancy.ConditionOtherAccess); prev.Status != status {
		grantees, members := 0, 0
		if a.Status != nil {
			grantees, members = len(a.Status.Grantees), len(a.Status.Members)
		}
		e.log.Info("Database other access observed", "otherAccess", a.Present, "grantees", grantees, "members", members)
	}
	db.SetConditions(xpv2.Condition{Type: tenancy.ConditionOtherAccess, Status: status, Reason: xpv2.ConditionReason(a.Reason),
		Message: a.Message, LastTransitionTime: metav1.Now(), ObservedGeneration: db.GetGeneration()})
}

// Create provisions in the documented order, each step confirmed before the
// next, resuming after whatever an earlier attempt finished.
func (e *external) Create(ctx context.Context, db *v1alpha1.Database) (managed.ExternalCreation, error) {
	e.forgetLogin(db)
	n, o, v := e.names, e.obs, e.verdict
	if v.Reason != "" {
		return managed.ExternalCreation{}, errors.New(v.Message)
	}
	if v.Phase == v1alpha1.DatabasePhasePlanned && !v.KVOurs {
		e.record.Event(db, event.Normal("ProvisioningStarted", fmt.Sprintf("provisioning database %q with login role %q", n.database, n.role)))
	}
	// 1. Extension availability was checked by Observe, before any write.

	// 2-5. The credential: ownership metadata first (only on an absent
	// path), then the first version with check-and-set 0, then read back.
	// An own record is always reused: never a second password.
	owner := tenancy.OwnerMetadata(e.id)
	if r := db.Spec.CredentialRotation; r != nil {
		// The first password counts as the rotation the new Database
		// names: creating a Database never rotates.
		for k, v := range tenancy.RotationCreated(r.ID, time.Now().UTC().Format(time.RFC3339)) {
			owner[k] = v
		}
	}
	if v.KVOurs {
		owner = o.KV.Owner
	} else {
		if err := e.step(StepOwnerMetadata); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepOwnerMetadata, err)
		}
		if err := e.kv.SetOwner(ctx, n.path, owner); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepOwnerMetadata, err)
		}
	}
	password := o.KV.Data["password"]
	if password == "" {
		if err := e.step(StepCredential); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepCredential, err)
		}
		pw, err := NewPassword()
		if err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepCredential, err)
		}
		data := e.wantData(n)
		data["password"] = pw
		if _, err := e.kv.Write(ctx, n.path, data, 0); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepCredential, err)
		}
		rec, err := e.kv.Read(ctx, n.path)
		if err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepCredential, err)
		}
		if rec == nil || rec.Data["password"] != data["password"] || !tenancy.KVOurs(tenancy.KVState{Present: true, Owner: rec.Owner}, e.id) {
			return managed.ExternalCreation{}, fail(db, tenancy.ReasonProvisioningFailed, "the credential read back from OpenBao is not the one written; retrying from the ownership check")
		}
		password = data["password"]
		owner = rec.Owner
	}
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseCredentialCreated

	// 6. The role, with a SCRAM verifier; the admin becomes a member.
	if !o.R.Exists {
		if err := e.step(StepRole); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepRole, err)
		}
		verifier, err := scram.Verifier(password)
		if err != nil {
			return managed.ExternalCreation{}, fail(db, tenancy.ReasonProvisioningFailed, err.Error())
		}
		if err := e.pool.CreateRoleWithLimits(ctx, n.role, verifier, o.Limits); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepRole, err)
		}
	} else if !o.R.AdminMember {
		if err := e.pool.GrantRoleToAdmin(ctx, n.role); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepRole, err)
		}
	}
	cat, err := e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return managed.ExternalCreation{}, failFrom(db, StepRole, err)
	}
	if err := e.recordOIDs(ctx, db, owner, cat.RoleOID, 0); err != nil {
		return managed.ExternalCreation{}, err
	}
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseRoleCreated

	// The database, owned by the role; its OID is recorded in the KV
	// record's metadata.
	if !o.DB.Exists {
		if err := e.step(StepDatabase); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepDatabase, err)
		}
		if err := e.pool.CreateDatabaseWith(ctx, n.database, n.role, e.createOpts); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepDatabase, err)
		}
	}
	cat, err = e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return managed.ExternalCreation{}, failFrom(db, StepDatabase, err)
	}
	if !cat.DatabaseExists || cat.Owner != n.role {
		return managed.ExternalCreation{}, fail(db, tenancy.ReasonProvisioningFailed, fmt.Sprintf("database %q is not owned by %q after creating it", n.database, n.role))
	}
	if err := e.recordOIDs(ctx, db, owner, cat.RoleOID, cat.DatabaseOID); err != nil {
		return managed.ExternalCreation{}, err
	}
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseDatabaseCreated
	db.Status.AtProvider.DatabaseOID = int64(cat.DatabaseOID)

	// CONNECT: only the role; other roles' sessions ended; then the
	// database accepts connections (it was created accepting none).
	if cat.PublicConnect || !cat.RoleConnect || !cat.AllowConn {
		if err := e.step(StepConnect); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepConnect, err)
		}
		if err := e.pool.RestrictConnect(ctx, n.database, n.role); err != nil {
			return managed.ExternalCreation{}, failFrom(db, StepConnect, err)
		}
	}

	// 7. Extensions, installed by the owner over a real login as the role,
	// which is also the final proof that the credential works.
	if err := e.installExtensions(ctx, db, n, password); err != nil {
		return managed.ExternalCreation{}, err
	}
	// The hook can also end the reconcile after the last write.
	if err := e.step(StepCreated); err != nil {
		return managed.ExternalCreation{}, failFrom(db, StepCreated, err)
	}
	return managed.ExternalCreation{}, nil
}

// workingPassword returns the password to keep in a repaired record whose
// current version lost it (deleted, or written without one): the newest
// earlier version's password that still logs in as the role, or, when none
// does, the newest earlier version's password (the record is the truth:
// the role gets it back at the next observation). The provider never makes
// up a new password for an existing role (a credential rotation, requested
// by an admin, is the only exception).
func (e *external) workingPassword(ctx context.Context, n names, kv tenancy.KVState) (string, error) {
	newest := ""
	for v := kv.Version - 1; v >= 1 && v >= kv.Version-10; v-- {
		data, err := e.kv.ReadVersion(ctx, n.path, v)
		if err != nil {
			return "", err
		}
		if data["password"] == "" {
			continue
		}
		if newest == "" {
			newest = data["password"]
		}
		c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: data["password"]})
		if err != nil {
			continue
		}
		_ = c.Close(ctx)
		return data["password"], nil
	}
	if newest != "" {
		return newest, nil
	}
	return "", errors.New("the credential record lost its password and no earlier version (up to 10 back) has one: restore it in OpenBao by hand (any version with the role's password), or request a credential rotation")
}

// restorePassword gives the role the password of its credential record
// (as a SCRAM-SHA-256 verifier), never using the password the role has
// now: someone changed it, and the record is the truth. Sessions opened
// with the other password are left alone (they may be the app's own); a
// rotation with terminateSessions ends them.
func (e *external) restorePassword(ctx context.Context, n names, kv tenancy.KVState) error {
	pw := kv.Data["password"]
	if pw == "" || tenancy.PasswordWithheld(pw) {
		return errors.New("the credential record's password was not read; the next observation reads it")
	}
	verifier, err := scram.Verifier(pw)
	if err != nil {
		return err
	}
	return e.pool.SetRolePassword(ctx, n.role, verifier)
}

func (e *external) installExtensions(ctx context.Context, db *v1alpha1.Database, n names, password string) error {
	if err := e.step(StepExtensions); err != nil {
		return failFrom(db, StepExtensions, err)
	}
	c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: password})
	if err != nil {
		return failFrom(db, "login as the role", err)
	}
	defer c.Close(ctx) //nolint:errcheck // best effort
	have, err := c.Extensions(ctx)
	if err != nil {
		return failFrom(db, StepExtensions, err)
	}
	for _, x := range requirementsFirst(tenancy.Missing(db.Spec.ForProvider.Extensions, have), e.exts) {
		if err := c.CreateExtension(ctx, x); err != nil {
			return failFrom(db, StepExtensions+" "+x, err)
		}
	}
	return nil
}

// Update repairs non-destructive drift of what is this Database's own, or
// takes the credential rotation step of the verdict. A repair never sets a
// new password.
func (e *external) Update(ctx context.Context, db *v1alpha1.Database) (managed.ExternalUpdate, error) {
	e.forgetLogin(db)
	n, o, v := e.names, e.obs, e.verdict
	if v.Rotation.Action != tenancy.RotateNone {
		return managed.ExternalUpdate{}, e.rotate(ctx, db)
	}
	if v.Cleanup.ID != "" {
		return managed.ExternalUpdate{}, e.cleanup(ctx, db)
	}
	if len(v.Repairs) == 0 && len(e.dataRoles) > 0 {
		return managed.ExternalUpdate{}, e.applyDataRoles(ctx, db)
	}
	if len(v.Repairs) == 0 || v.Reason == tenancy.ReasonConflict || refusesDelete(v.Reason) || v.Reason == tenancy.ReasonDatabaseVanished || (o.Import && !o.ImportUpdate) {
		return managed.ExternalUpdate{}, nil
	}
	// Every attempt is logged: a repair that does not hold shows up as
	// the same repair again at each poll.
	e.log.Info("Repairing drift", "repairs", tenancy.JoinRepairs(v.Repairs))
	if err := e.step(StepRepair); err != nil {
		return managed.ExternalUpdate{}, failFrom(db, StepRepair, err)
	}
	for _, r := range v.Repairs {
		var err error
		switch r {
		case tenancy.RepairKVRecord:
			// The record's own password is kept: it is the truth, which
			// RepairPassword gives the role when it refuses it.
			pw := o.KV.Data["password"]
			if pw == "" {
				pw, err = e.workingPassword(ctx, n, o.KV)
			}
			if err == nil {
				data := e.wantData(n)
				data["password"] = pw
				_, err = e.kv.Write(ctx, n.path, data, o.KV.Version)
			}
		case tenancy.RepairOwnerMetadata:
			err = e.kv.SetOwner(ctx, n.path, e.ownerMeta(o.R.OID, o.DB.OID))
		case tenancy.RepairAdminMember:
			err = e.pool.GrantRoleToAdmin(ctx, n.role)
		case tenancy.RepairRole:
			err = e.pool.RepairRole(ctx, n.role)
		case tenancy.RepairPassword:
			err = e.restorePassword(ctx, n, o.KV)
		case tenancy.RepairDatabase:
			err = e.pool.RepairDatabase(ctx, n.database, n.role)
		case tenancy.RepairLimits:
			err = e.pool.SetRoleLimits(ctx, n.role, n.database, tenancy.DecideLimits(o.Limits, o.R.Limits))
		case tenancy.RepairOwner:
			err = e.pool.SetDatabaseOwner(ctx, n.database, n.role)
		case tenancy.RepairConnect:
			err = e.pool.RestrictConnect(ctx, n.database, n.role)
		case tenancy.RepairExtensions:
			err = e.installExtensions(ctx, db, n, o.KV.Data["password"])
		}
		if err != nil {
			return managed.ExternalUpdate{}, failFrom(db, "repair: "+string(r), err)
		}
	}
	if len(v.Repairs) > 0 {
		e.record.Event(db, event.Normal("DriftRepaired", "repaired: "+tenancy.JoinRepairs(v.Repairs)))
		if e.confirm != nil {
			e.confirm.Repaired(db.GetUID())
		}
	}
	return managed.ExternalUpdate{}, nil
}

// rotationRequest is what the Database asks of a credential rotation.
func rotationRequest(db *v1alpha1.Database) tenancy.RotationRequest {
	r := tenancy.RotationRequest{MayUpdate: policies(db).ShouldUpdate()}
	if c := db.Spec.CredentialRotation; c != nil {
		r.ID = c.ID
	}
	if c := db.Status.AtProvider.CredentialRotation; c != nil {
		r.StatusID = c.ID
	}
	return r
}

// cleanupRequest is what the Database asks of an access cleanup.
func cleanupRequest(db *v1alpha1.Database) tenancy.CleanupRequest {
	r := tenancy.CleanupRequest{MayUpdate: policies(db).ShouldUpdate()}
	if c := db.Spec.AccessCleanup; c != nil {
		r.ID = c.ID
	}
	if c := db.Status.AtProvider.AccessCleanup; c != nil {
		r.StatusID = c.ID
	}
	return r
}

// completedCleanup is the last completed access cleanup recorded in a
// record's metadata, or nil.
func completedCleanup(owner map[string]string) *v1alpha1.AccessCleanupObservation {
	id := owner[tenancy.MetaCleanupCompletedID]
	if id == "" {
		return nil
	}
	c := &v1alpha1.AccessCleanupObservation{ID: id}
	if t, err := time.Parse(time.RFC3339, owner[tenancy.MetaCleanupCompletedAt]); err == nil {
		c.CompletedAt = &metav1.Time{Time: t}
	}
	return c
}

// maxRemaining is how many entries of what a cleanup left status lists.
const maxRemaining = 20

// cleanup runs the access cleanup of the verdict: the removal (which
// reads the catalog afresh at every step, so an interrupted one just runs
// again), then the completion in the record's metadata, then the report
// in status and an Event that names counts only.
func (e *external) cleanup(ctx context.Context, db *v1alpha1.Database) error {
	n, id := e.names, e.verdict.Cleanup.ID
	db.SetConditions(xpv2.Available().WithMessage(fmt.Sprintf("running the access cleanup %q: removing every access to the database %q other than the login role's and its data roles'", id, n.database)))
	if err := e.step(StepCleanup); err != nil {
		return failFrom(db, StepCleanup, err)
	}
	// What the Database itself grants stays: its data roles keep their
	// access and their sessions (the running app is one of them).
	var keep []string
	for _, r := range db.Spec.ForProvider.DataRoles {
		keep = append(keep, tenancy.DataRoleName(n.role, r.Name))
	}
	rep, err := e.pool.CleanupAccess(ctx, n.database, n.role, keep)
	// Whatever the cleanup did, the data roles' readiness is what the
	// next check of their grants shows, not what was proven before it.
	if e.logins != nil {
		for _, r := range db.Spec.ForProvider.DataRoles {
			e.logins.Forget(memo.DataRoleKey(db.GetUID(), r.Name))
		}
	}
	if err != nil {
		return failFrom(db, StepCleanup+" "+id, err)
	}
	e.recheckDataRoles(ctx, db)
	if err := e.step(StepCleanupRecord); err != nil {
		return failFrom(db, StepCleanupRecord, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if err := e.kv.SetOwner(ctx, n.path, tenancy.CleanupCompletion(id, now.Format(time.RFC3339))); err != nil {
		return failFrom(db, StepCleanupRecord, err)
	}
	remaining := rep.Remaining
	if len(remaining) > maxRemaining {
		remaining = append(slices.Clone(remaining[:maxRemaining]), fmt.Sprintf("and %d more", len(rep.Remaining)-maxRemaining))
	}
	db.Status.AtProvider.AccessCleanup = &v1alpha1.AccessCleanupObservation{
		ID: id, CompletedAt: &metav1.Time{Time: now}, Remaining: remaining,
		Removed: &v1alpha1.AccessCleanupCounts{DatabaseGrants: rep.DatabaseGrants, Memberships: rep.Memberships,
			DefaultPrivileges: rep.DefaultPrivileges, ObjectGrants: rep.ObjectGrants, Sessions: rep.Sessions},
	}
	msg := fmt.Sprintf("access cleanup %q: revoked %d database grant(s), %d membership(s), %d default privilege(s), %d object grant(s); ended %d session(s); %d item(s) left (status.atProvider.accessCleanup.remaining)",
		id, rep.DatabaseGrants, rep.Memberships, rep.DefaultPrivileges, rep.ObjectGrants, rep.Sessions, len(rep.Remaining))
	e.log.Info("Access cleanup completed", "cleanup", id, "databaseGrants", rep.DatabaseGrants, "memberships", rep.Memberships,
		"defaultPrivileges", rep.DefaultPrivileges, "objectGrants", rep.ObjectGrants, "sessions", rep.Sessions, "remaining", len(rep.Remaining))
	if len(rep.Remaining) > 0 {
		e.record.Event(db, event.Warning("AccessCleanupIncomplete", errors.New(msg)))
	} else {
		e.record.Event(db, event.Normal("AccessCleanedUp", msg))
	}
	db.SetConditions(xpv2.Available().WithMessage(msg))
	if e.confirm != nil {
		e.confirm.Repaired(db.GetUID())
	}
	return nil
}

// completedRotation is the last completed rotation recorded in a record's
// metadata, or nil.
func completedRotation(owner map[string]string) *v1alpha1.CredentialRotationObservation {
	id := owner[tenancy.MetaRotationCompletedID]
	if id == "" {
		return nil
	}
	r := &v1alpha1.CredentialRotationObservation{ID: id}
	if t, err := time.Parse(time.RFC3339, owner[tenancy.MetaRotationCompletedAt]); err == nil {
		r.CompletedAt = &metav1.Time{Time: t}
	}
	return r
}

// rotate takes the rotation step of the verdict. Each write is durable
// before the next, so an interruption anywhere resumes without a second
// password and without going back to the old one: the intent (rotation ID
// and the version its password will be) is recorded before the new
// version is written with check-and-set on the current one; from then on
// the decision core finishes the rotation with the current version's
// password (and holds back the repair that would restore the old one):
// the role gets its verifier, the role's sessions are ended when asked,
// a login proves it, and only then is the completion recorded.
func (e *external) rotate(ctx context.Context, db *v1alpha1.Database) error {
	n, o, r := e.names, e.obs, e.verdict.Rotation
	password := o.KV.Data["password"]
	if r.Action == tenancy.RotateStart {
		if err := e.step(StepRotateCredential); err != nil {
			return failFrom(db, StepRotateCredential, err)
		}
		if err := e.kv.SetOwner(ctx, n.path, tenancy.RotationIntent(r.ID, r.Version)); err != nil {
			return failFrom(db, StepRotateCredential, err)
		}
		pw, err := NewPassword()
		if err != nil {
			return failFrom(db, StepRotateCredential, err)
		}
		data := maps.Clone(o.KV.Data)
		data["password"] = pw
		ver, err := e.kv.Write(ctx, n.path, data, o.KV.Version)
		if err != nil {
			return failFrom(db, StepRotateCredential, err)
		}
		if ver != r.Version {
			return fail(db, tenancy.ReasonProvisioningFailed, fmt.Sprintf("the rotated credential was written as version %d of %s, not %d; the next observation decides", ver, n.path, r.Version))
		}
		password = data["password"]
		e.record.Event(db, event.Normal("CredentialRotationStarted", fmt.Sprintf("rotation %q: a new password is version %d of %s", r.ID, r.Version, n.path)))
	}
	if password == "" {
		return fail(db, tenancy.ReasonProvisioningFailed, fmt.Sprintf("version %d of %s has no password; the next observation decides", r.Version, n.path))
	}
	if !o.R.AdminMember {
		// Ending the role's sessions needs its privileges.
		if err := e.pool.GrantRoleToAdmin(ctx, n.role); err != nil {
			return failFrom(db, StepRotateRole, err)
		}
	}
	if err := e.step(StepRotateRole); err != nil {
		return failFrom(db, StepRotateRole, err)
	}
	verifier, err := scram.Verifier(password)
	if err != nil {
		return fail(db, tenancy.ReasonProvisioningFailed, err.Error())
	}
	ended := 0
	if c := db.Spec.CredentialRotation; c == nil || !c.TerminateSessions {
		if err := e.pool.SetRolePassword(ctx, n.role, verifier); err != nil {
			return failFrom(db, StepRotateRole, err)
		}
	} else {
		if err := e.step(StepRotateSessions); err != nil {
			return failFrom(db, StepRotateSessions, err)
		}
		// The new password and the end of the role's sessions in one
		// transaction: a session of the role cannot set its own password
		// in between and keep it.
		if ended, err = e.pool.SetRolePasswordEndingSessions(ctx, n.role, verifier); err != nil {
			if postgres.ClassOf(err) == postgres.ClassPrivileges {
				return fail(db, tenancy.ReasonInsufficientPrivileges, fmt.Sprintf("rotation %q: the role %q has its new password, but the server refused to end its sessions: the admin role needs the privileges of %q (GRANT %q TO <the admin role> WITH INHERIT TRUE) or of pg_signal_backend (GRANT pg_signal_backend TO <the admin role>); retrying: %v", r.ID, n.role, n.role, n.role, err))
			}
			return failFrom(db, StepRotateSessions, err)
		}
	}
	c, err := e.pool.ConnectAs(ctx, n.database, postgres.Credential{Username: n.role, Password: password})
	switch {
	case err == nil:
		_ = c.Close(ctx)
	case postgres.LimitAfterAuthentication(err):
		// Refused after the new password was accepted: proven. The
		// role's sessions (opened before, with the old password) fill its
		// connection limit; terminateSessions ends them.
	default:
		return failFrom(db, "log in with the rotated password", err)
	}
	if err := e.step(StepRotateRecord); err != nil {
		return failFrom(db, StepRotateRecord, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if err := e.kv.SetOwner(ctx, n.path, tenancy.RotationCompletion(r.ID, now.Format(time.RFC3339))); err != nil {
		return failFrom(db, StepRotateRecord, err)
	}
	db.Status.AtProvider.CredentialRotation = &v1alpha1.CredentialRotationObservation{ID: r.ID, CompletedAt: &metav1.Time{Time: now}}
	e.log.Info("Credential rotated", "rotation", r.ID, "version", r.Version, "sessionsEnded", ended)
	e.record.Event(db, event.Normal("CredentialRotated", fmt.Sprintf("rotation %q: the role %q logs in with version %d of %s; %d of its sessions ended", r.ID, n.role, r.Version, n.path, ended)))
	if e.confirm != nil {
		e.confirm.Repaired(db.GetUID())
	}
	return nil
}

// Delete runs only for reclaim policy Delete with Delete in the management
// policies, once the claim is released. It removes only what is provably
// this Database's own: block logins, end sessions, drop the database and
// the role, delete every KV version, and read back absence. Any failure
// keeps the finalizer; the next attempt starts again from the ownership
// check of Observe.
func (e *external) Delete(ctx context.Context, db *v1alpha1.Database) (managed.ExternalDelete, error) {
	e.forgetLogin(db)
	n, v := e.names, e.verdict
	if !e.drop {
		// Never reached (Observe reports nothing to delete); kept so that
		// no other path drops anything.
		return managed.ExternalDelete{}, nil
	}
	db.Status.AtProvider.Phase = v1alpha1.DatabasePhaseDeleting
	db.SetConditions(xpv2.Deleting())
	if refusesDelete(v.Reason) {
		return managed.ExternalDelete{}, fail(db, v.Reason, "cannot delete: "+v.Message)
	}
	if v.RoleOurs && !e.obs.R.AdminCanAdmin {
		// Dropping the role would fail after the database is gone: drop
		// nothing until the admin may drop everything that is ours.
		return managed.ExternalDelete{}, fail(db, tenancy.ReasonInsufficientPrivileges, fmt.Sprintf("cannot delete: the admin role may not drop the role %q (PostgreSQL 16 and later require ADMIN OPTION on it): as a superuser or the role's creator, run GRANT %q TO <the admin role> WITH ADMIN OPTION; nothing was dropped", n.role, n.role))
	}
	if v.RoleOurs && v.KVOurs && !e.obs.Import {
		// Blocking logins ends the login proof: the role's OID must be on
		// record first, so a retry still knows the role is ours.
		var dbOID uint32
		if v.DBOurs {
			dbOID = e.obs.DB.OID
		}
		if err := e.recordOIDs(ctx, db, e.obs.KV.Owner, e.obs.R.OID, dbOID); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	// Ending a role's sessions and dropping what it owns need membership
	// in it (an imported role, or one whose membership was revoked).
	if v.RoleOurs && !e.obs.R.AdminMember {
		if err := e.do(db, StepRole, func() error { return e.pool.GrantRoleToAdmin(ctx, n.role) }); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	// An imported role is proven only by its login, so its logins are not
	// blocked (DROP DATABASE ... WITH (FORCE) still ends the sessions).
	if v.RoleOurs && !e.obs.Import {
		if err := e.do(db, StepBlockLogins, func() error { return e.pool.BlockLogins(ctx, n.role) }); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	if v.DBOurs {
		if err := e.do(db, StepTerminate, func() error { _, err := e.pool.TerminateSessions(ctx, n.database, n.role); return err }); err != nil {
			return managed.ExternalDelete{}, err
		}
		if err := e.do(db, StepDropDatabase, func() error { return e.pool.DropDatabase(ctx, n.database, n.role) }); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	if v.RoleOurs {
		if err := e.do(db, StepDropRole, func() error { return e.pool.DropRole(ctx, n.role) }); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	if (v.KVOurs && !e.obs.Import) || e.roleListOurs {
		// The data roles, after their database (their grants went with
		// it) and before the record that lists them.
		if err := e.dropDataRoles(ctx, db, v.DBOurs); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	if e.obs.Import && e.roleListOurs {
		if err := e.do(db, StepDataRoleDelete, func() error { return e.kv.Delete(ctx, n.roles) }); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	if v.KVOurs {
		if err := e.do(db, StepDeleteKV, func() error { return e.kv.Delete(ctx, n.path) }); err != nil {
			return managed.ExternalDelete{}, err
		}
	}
	// Read back the absence of what was ours.
	cat, err := e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return managed.ExternalDelete{}, failFrom(db, "read back", err)
	}
	if (v.DBOurs && cat.DatabaseExists) || (v.RoleOurs && cat.RoleExists) {
		return managed.ExternalDelete{}, fail(db, tenancy.ReasonProvisioningFailed, "the database or role still exists after dropping it; retrying")
	}
	e.record.Event(db, event.Normal("Deleted", fmt.Sprintf("dropped what this Database owned (database %v, role %v, credential %v)", v.DBOurs, v.RoleOurs, v.KVOurs)))
	return managed.ExternalDelete{}, nil
}

// refusesDelete: with this verdict reason, what is ours cannot be told
// from what is not, so a deletion drops nothing and keeps the finalizer
// until it is fixed.
func refusesDelete(reason string) bool {
	return reason == tenancy.ReasonEndpointChanged || reason == tenancy.ReasonImmutableField
}

func (e *external) do(db *v1alpha1.Database, step string, fn func() error) error {
	if err := e.step(step); err != nil {
		return failFrom(db, step, err)
	}
	if err := fn(); err != nil {
		return failFrom(db, step, err)
	}
	return nil
}

func (e *external) Disconnect(context.Context) error { return nil }

// requirementsFirst orders extensions so that each comes after the ones it
// requires (when known), otherwise keeping the given order.
func requirementsFirst(names []string, info map[string]postgres.Extension) []string {
	out := make([]string, 0, len(names))
	done := map[string]bool{}
	var visit func(n string, depth int)
	visit = func(n string, depth int) {
		if done[n] || depth > len(names) {
			return
		}
		for _, r := range info[n].Requires {
			if slices.Contains(names, r) {
				visit(r, depth+1)
			}
		}
		if !done[n] {
			done[n] = true
			out = append(out, n)
		}
	}
	for _, n := range names {
		visit(n, 0)
	}
	return out
}

// passwords is the shape of every tenant password: 32 characters of
// [A-Za-z0-9] (about 190 bits) from crypto/rand; ASCII only, so SASLprep
// leaves it unchanged.
var passwords = password.Settings{
	CharacterSet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	Length:       32,
}

// NewPassword returns a fresh tenant password (see passwords).
func NewPassword() (string, error) { return passwords.Generate() }
