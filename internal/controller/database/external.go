package database

import (
	"context"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Where each concern of a Database lives, as an observe/apply pair:
//
//	owner.go       the owner's record, role, database and login (observe)
//	provision.go   the owner's credential, role, database, CONNECT (Create)
//	repair.go      drift of what is the Database's own (Update)
//	extensions.go  the requested extensions: checked before writes, installed
//	options.go     encoding and locale: checked before writes, reported
//	dataroles*.go  the data roles: observed, then a table of actions
//	rotation.go    the credential rotation an admin requests
//	cleanup.go     the access cleanup an admin requests, other access
//	sizes.go       the database's size, from the config's refresh
//	report.go      status and conditions from the observation
//	delete.go      what Delete drops, provably the Database's own
//
// A new concern gets its own file: a read in observe (one field of
// observation), a decision in internal/tenancy, and an action Update or
// Create takes from the verdict.

// external acts on one Database's server and OpenBao record, for one
// reconcile. It holds clients and settings; what Observe finds is one
// observation value that Create, Update and Delete take.
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
	// cfgCredentials is the config's spec.credentialPolicy: the default
	// of every Database's.
	cfgCredentials *v1alpha1.CredentialPolicy
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
	// optionPolicy is the config's spec.databaseOptions.
	optionPolicy *v1alpha1.DatabaseOptionsPolicy
	// sizes are the config's measured database sizes; cfgUID its UID.
	sizes  *memo.Sizes
	cfgUID types.UID

	// seen is what the last Observe found. The managed reconciler calls
	// Observe and then Create, Update or Delete on this client with the
	// Database alone, so the observation is carried here between the
	// calls; nothing else is.
	seen *observation
}

// observation is what one Observe read and decided: the names, the owner's
// observation and the verdict on it, and each concern's reading. Create,
// Update and Delete act on it and read again only what their own writes
// change.
type observation struct {
	names names
	// owner is the owner's side (catalog, record, login) as the decision
	// core sees it; verdict is its decision, the data roles' folded in.
	owner   tenancy.Observation
	verdict tenancy.Verdict
	// exts is what the server said about the requested extensions, when
	// they were checked before a write.
	exts map[string]postgres.Extension
	// createOpts are the options a new database is created with, once
	// checked.
	createOpts postgres.CreateOptions
	// roles is what lists the data roles; dataRoles the data roles read,
	// when the owner is Ready.
	roles     roleList
	dataRoles []dataRole
	// access is what the catalog shows of access by roles other than the
	// owner and the data roles (the OtherAccess condition).
	access tenancy.OtherAccessVerdict
}

// errNotObserved: Create, Update or Delete without an Observe before it.
const errNotObserved = "the Database was not observed in this reconcile"

// Observe reads the catalog (one query), the owner's record and login (see
// observeOwner), what is checked before any write, the data roles and
// other access, then writes status from what it found.
func (e *external) Observe(ctx context.Context, db *v1alpha1.Database) (managed.ExternalObservation, error) {
	e.seen = nil
	o, err := e.observe(ctx, db)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.seen = o
	e.reportDataRoles(db, o.dataRoles)
	if !meta.WasDeleted(db) {
		e.reportOptions(ctx, db, o)
		e.reportSize(db, o)
	}
	e.report(db, o)
	return e.existence(db, o.verdict), nil
}

// observe reads each concern once, in the order the decisions need them.
func (e *external) observe(ctx context.Context, db *v1alpha1.Database) (*observation, error) {
	n, err := e.resolve(db)
	if err != nil {
		return nil, err
	}
	cat, err := e.pool.Observe(ctx, n.database, n.role)
	if err != nil {
		return nil, failFrom(db, "observe", err)
	}
	o := &observation{names: n}
	if o.owner, o.verdict, err = e.observeOwner(ctx, db, n, cat); err != nil {
		return nil, err
	}
	if err := e.checkBeforeWrites(ctx, db, o); err != nil {
		return nil, err
	}
	if o.roles, err = e.readRoleList(ctx, n, o.owner); err != nil {
		return nil, failFrom(db, "read the data roles' list", err)
	}
	if err := e.observeDataRolesOf(ctx, db, o); err != nil {
		return nil, err
	}
	o.access = e.otherAccess(o, cat)
	return o, nil
}

// checkBeforeWrites asks the server, when the verdict is to write, whether
// the requested extensions and the database options can be had: a refusal
// is decided before anything is written.
func (e *external) checkBeforeWrites(ctx context.Context, db *v1alpha1.Database, o *observation) error {
	if tenancy.NeedsExtensionCheck(o.owner, o.verdict) {
		// A failed query is DependencyUnavailable, never "unsupported".
		problems, info, err := e.checkExtensions(ctx, o.owner.Requested, o.owner.Installed)
		if err != nil {
			return fail(db, tenancy.ReasonDependencyUnavailable, "cannot check pg_available_extensions for the requested extensions: "+err.Error())
		}
		o.exts, o.owner.PreWrite.ExtensionProblems = info, problems
		o.verdict = tenancy.Decide(o.owner)
	}
	if tenancy.NeedsOptionsCheck(o.owner, o.verdict) {
		o.owner.PreWrite.OptionsReason, o.owner.PreWrite.OptionsMessage, o.createOpts = e.checkOptions(ctx, db)
		o.verdict = tenancy.Decide(o.owner)
	}
	return nil
}

// existence is what the managed reconciler is told. While deleting, the
// Database exists as long as anything provably its own is left, and only
// that: a foreign object is never deleted. When the endpoint or the names
// changed, nothing can be proven either way: it exists, so that Delete
// refuses and the finalizer stays.
func (e *external) existence(db *v1alpha1.Database, v tenancy.Verdict) managed.ExternalObservation {
	obs := managed.ExternalObservation{ResourceExists: v.Exists, ResourceUpToDate: v.UpToDate}
	if meta.WasDeleted(db) {
		obs.ResourceExists = e.drop && (v.KVOurs || v.RoleOurs || v.DBOurs || refusesDelete(v.Reason))
	}
	return obs
}

// Create provisions in the documented order (provision.go).
func (e *external) Create(ctx context.Context, db *v1alpha1.Database) (managed.ExternalCreation, error) {
	if e.seen == nil {
		return managed.ExternalCreation{}, errors.New(errNotObserved)
	}
	e.forgetLogin(db, e.seen.roles)
	return managed.ExternalCreation{}, e.create(ctx, db, e.seen)
}

// Update takes the one action of the verdict: a rotation, an access
// cleanup, the data roles' actions, or the repairs of drift.
func (e *external) Update(ctx context.Context, db *v1alpha1.Database) (managed.ExternalUpdate, error) {
	if e.seen == nil {
		return managed.ExternalUpdate{}, errors.New(errNotObserved)
	}
	o := e.seen
	e.forgetLogin(db, o.roles)
	v := o.verdict
	switch {
	case v.Rotation.Action != tenancy.RotateNone:
		return managed.ExternalUpdate{}, e.rotate(ctx, db, o)
	case v.Cleanup.ID != "":
		return managed.ExternalUpdate{}, e.cleanup(ctx, db, o)
	case len(v.Repairs) == 0 && len(o.dataRoles) > 0:
		return managed.ExternalUpdate{}, e.applyDataRoles(ctx, db, o)
	}
	return managed.ExternalUpdate{}, e.repair(ctx, db, o)
}

// Delete drops what is provably this Database's own (delete.go).
func (e *external) Delete(ctx context.Context, db *v1alpha1.Database) (managed.ExternalDelete, error) {
	if e.seen == nil {
		return managed.ExternalDelete{}, errors.New(errNotObserved)
	}
	e.forgetLogin(db, e.seen.roles)
	return managed.ExternalDelete{}, e.delete(ctx, db, e.seen)
}

func (e *external) Disconnect(context.Context) error { return nil }
