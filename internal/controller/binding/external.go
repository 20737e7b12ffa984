package binding

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/controller/tenants"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// external binds one DatabaseBinding, for one reconcile: Observe reads and
// decides, and Create, Update and Delete act on that decision.
type external struct {
	log    logging.Logger
	kube   client.Client
	reader client.Reader
	// tenants reads Tenants from a watch-fed cache (tenants.Cache); nil:
	// every read goes to the API server.
	tenants client.Reader
	kv      KV
	opts    options.Options
	spec    tenancy.BindingSpec
	hook    func(step string) error
	uid     types.UID
	// proofs and records decide whether the delivery is read
	// (tenancy.DeliveryCheckDue); nil proofs or records: at every Observe.
	proofs  *memo.Memo[tenancy.DeliveryProof]
	records RecordVersions

	// db is the Database as read by Observe (nil when absent).
	db       *v1alpha1.Database
	decision tenancy.BindingDecision
	delivery tenancy.DeliveryVerdict
	// copyOurs: on deletion, the delivery copy names this binding, or
	// OpenBao could not tell.
	copyOurs bool
	// standing is the verdict Observe decided with; cached: read from
	// the tenants cache, not yet confirmed by the API server.
	standing tenancy.StandingVerdict
	cached   bool
	// creating: the UIDs of the bindings whose Observe decided to create
	// (see finalizer); nil: none are noted.
	creating *sync.Map
	// obs is what Observe decided from.
	obs tenancy.BindingObservation
	// roles are the data role verdicts (observeRoles).
	roles []tenancy.RoleDeliveryVerdict
	// sourceVersion and roleVersions are the record versions this
	// Observe read for the owner's and each data role's delivery (0: not
	// read, the last reading stands).
	sourceVersion int
	roleVersions  map[string]int
	// slots counts what namespaces hold on servers that limit it (nil:
	// the cache alone); slotInstance is the server whose slot this
	// Observe took ("": none).
	slots        *Slots
	slotInstance string
	// nsLabels are the binding's namespace's labels, read once per
	// Observe (nil: not read).
	nsLabels map[string]string
}

func (e *external) copyPath() string {
	return tenancy.DeliveryPath(e.opts.OpenBao.TenantBasePath, e.spec.Namespace, e.spec.TenantName)
}

// Observe reads the Database, its instance and (once bound and Ready) both
// credential records, and decides.
//
// Whether the binding is its Tenant's is read first from the tenants
// cache. A cached verdict may be behind the API server (the Tenant was
// deleted or replaced since the cache last heard of it), so it is kept
// only when it confirms that nothing changes: the binding stands, nothing
// is to be created, updated or deleted, and the status stays as it is.
// Anything else (a claim, a create, a record, a delivery, a release, a
// new phase or message) is decided only after the API server confirms
// the verdict; a different verdict is decided again from the start.
func (e *external) Observe(ctx context.Context, b *v1alpha1.DatabaseBinding) (managed.ExternalObservation, error) {
	obs, err := e.observeConfirmed(ctx, b)
	if e.creating != nil {
		// Only this reconcile's decision counts: what an earlier one
		// noted and never took is dropped.
		if err == nil && !obs.ResourceExists && !meta.WasDeleted(b) && mayCreate(b) {
			e.creating.Store(b.GetUID(), true)
		} else {
			e.creating.Delete(b.GetUID())
		}
	}
	return obs, err
}

// mayCreate reports whether the binding's management policies let the
// managed reconciler create (and so write the create mark first).
func mayCreate(b *v1alpha1.DatabaseBinding) bool {
	p := b.GetManagementPolicies()
	return len(p) == 0 || slices.Contains(p, xpv2.ManagementActionAll) || slices.Contains(p, xpv2.ManagementActionCreate)
}

func (e *external) observeConfirmed(ctx context.Context, b *v1alpha1.DatabaseBinding) (managed.ExternalObservation, error) {
	before := b.Status.DeepCopy()
	obs, err := e.observeOnce(ctx, b, e.tenants != nil)
	if err != nil || !e.cached {
		return obs, err
	}
	if obs.ResourceExists && obs.ResourceUpToDate && sameStatus(before, &b.Status) {
		return obs, nil
	}
	st, err := tenants.Standing(ctx, e.reader, b)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	if st == e.standing {
		e.cached = false
		return obs, nil
	}
	b.Status = *before
	e.db, e.decision, e.delivery, e.copyOurs = nil, tenancy.BindingDecision{}, tenancy.DeliveryVerdict{}, false
	return e.observeOnce(ctx, b, false)
}

// sameStatus reports whether two statuses say the same, whenever their
// conditions last changed.
func sameStatus(a, b *v1alpha1.DatabaseBindingStatus) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	for _, s := range []*v1alpha1.DatabaseBindingStatus{x, y} {
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
	}
	return equality.Semantic.DeepEqual(x, y)
}

// observeOnce observes and decides, reading the Tenant from the cache
// when cached.
func (e *external) observeOnce(ctx context.Context, b *v1alpha1.DatabaseBinding, cached bool) (managed.ExternalObservation, error) {
	o, err := e.observe(ctx, b, cached)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.obs = o
	d := tenancy.DecideBinding(o)
	e.settleSlot(d)
	e.decision = d
	e.showDecision(b, o, d)

	if o.Deleting || d.Action != tenancy.ActionCopyCredential {
		// Only a delivery in sync is remembered.
		e.forgetDelivery()
	}
	if o.Deleting || d.Orphaned {
		return e.observeRelease(ctx, b, o, d)
	}
	return e.observeAction(ctx, b, d)
}

// showDecision writes the decided phase into the binding's status, with
// the Database it records and where that Database is served.
func (e *external) showDecision(b *v1alpha1.DatabaseBinding, o tenancy.BindingObservation, d tenancy.BindingDecision) {
	at := &b.Status.AtProvider
	at.Phase = d.Phase
	if d.Action != tenancy.ActionCompleteRecord {
		// Only a claim naming this Tenant is recorded; a one-sided record
		// is cleared here (removing it grants nothing).
		at.DatabaseName, at.DatabaseUID = d.Record.DatabaseName, d.Record.DatabaseUID
	}
	if d.Record.DatabaseName != "" && e.db != nil {
		at.Instance, at.Database, at.LoginRole = o.Database.Instance, o.Database.Database, o.Database.LoginRole
	} else if !o.Deleting {
		at.Instance, at.Database, at.LoginRole = "", "", ""
	}
}

// observeRelease decides for a binding being deleted, or whose Tenant is
// gone, whether anything is left to release or remove.
func (e *external) observeRelease(ctx context.Context, b *v1alpha1.DatabaseBinding, o tenancy.BindingObservation, d tenancy.BindingDecision) (managed.ExternalObservation, error) {
	// Something is left to do while the Database is to be released or
	// still carries this Tenant's claim protection, or the copy is ours.
	// A deleted binding waiting for its readers keeps its finalizer
	// (Delete reports the wait).
	exists := d.Action == tenancy.ActionRelease || d.Unprotect || (o.Deleting && d.Action == tenancy.ActionWait)
	if d.CheckCopy {
		exists = e.copiesLeft(ctx, b, exists)
	}
	if o.Deleting {
		return managed.ExternalObservation{ResourceExists: exists, ResourceUpToDate: true}, nil
	}
	// Its Tenant is gone: what is left to release is released by
	// Update, as Delete would.
	metrics.Failure("binding", d.Reason)
	setReady(b, d.Reason, d.Message)
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: !exists}, nil
}

// copiesLeft reads the delivery copies of a binding being released. It
// notes whether the owner's copy is this binding's (or OpenBao cannot
// tell), and reports whether anything is left to do: exists says whether
// something already was.
func (e *external) copiesLeft(ctx context.Context, b *v1alpha1.DatabaseBinding, exists bool) bool {
	rec, err := e.kv.Read(ctx, e.copyPath())
	switch {
	case err != nil:
		// OpenBao cannot tell: Delete releases the Database (which
		// needs only Kubernetes) and retries the copy.
		e.log.Debug("cannot read the delivery copy", "error", err)
		e.copyOurs = true
	case rec != nil && tenancy.CopyOwnedBy(rec.Owner, e.spec):
		e.copyOurs = true
	}
	// A data role's copy left behind keeps the binding until
	// Delete removes it, even once the owner's copy is gone.
	for _, p := range e.roleCopyPaths(b) {
		if exists || e.copyOurs {
			break
		}
		rec, err := e.kv.Read(ctx, p)
		exists = err != nil || (rec != nil && tenancy.CopyOwnedBy(rec.Owner, e.spec))
	}
	return exists || e.copyOurs
}

// observeAction reports what the decision for a binding that stands asks
// of Create, Update or nothing, and reads the delivery when it is due.
func (e *external) observeAction(ctx context.Context, b *v1alpha1.DatabaseBinding, d tenancy.BindingDecision) (managed.ExternalObservation, error) {
	switch d.Action {
	case tenancy.ActionCreateDynamic, tenancy.ActionWriteClaim:
		setReady(b, d.Reason, d.Message)
		return managed.ExternalObservation{ResourceExists: false}, nil
	case tenancy.ActionCompleteRecord:
		setReady(b, d.Reason, d.Message)
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: false}, nil
	case tenancy.ActionCopyCredential:
		return e.observeDelivery(ctx, b)
	default:
		if d.Action == tenancy.ActionRefuse {
			metrics.Failure("binding", d.Reason)
		}
		setReady(b, d.Reason, d.Message)
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
}

// observe reads what the decision needs.
func (e *external) observe(ctx context.Context, b *v1alpha1.DatabaseBinding, cached bool) (tenancy.BindingObservation, error) {
	o := tenancy.BindingObservation{
		Spec:         e.spec,
		Deleting:     meta.WasDeleted(b),
		Recorded:     tenancy.BindingRecord{DatabaseName: b.Status.AtProvider.DatabaseName, DatabaseUID: b.Status.AtProvider.DatabaseUID},
		RecordedCopy: b.Status.AtProvider.Credential.Path,
		Phase:        b.Status.AtProvider.Phase,
	}
	if o.Deleting {
		// Read first: while an ExternalSecret reads the copy nothing else
		// is needed, and nothing is done.
		var err error
		if o.Readers, err = e.readers(ctx, b.GetNamespace(), append(e.roleCopyPaths(b), e.copyPath(), o.RecordedCopy)...); err != nil || len(o.Readers) > 0 {
			return o, err
		}
	}
	// Whether the binding is its Tenant's: read from the cache or the API
	// server, never from the binding. Only "it stands" is taken from the
	// cache (and confirmed before anything is acted on, see Observe): any
	// other verdict, and every deletion, is read from the API server.
	st, err := e.readStanding(ctx, b, cached && !o.Deleting)
	if err != nil {
		return o, err
	}
	o.Standing, e.standing = st, st
	if st.Standing == tenancy.StandingGone && !o.Deleting {
		// Its Tenant is gone (deleted before the garbage collector deletes
		// this binding and its ExternalSecret): released exactly as a
		// deletion would be, so after the ExternalSecrets that read the
		// copy are gone, and nothing else is needed until then.
		if o.Readers, err = e.readers(ctx, b.GetNamespace(), append(e.roleCopyPaths(b), e.copyPath(), o.RecordedCopy)...); err != nil || len(o.Readers) > 0 {
			return o, err
		}
	}
	if err := e.readDatabase(ctx, &o); err != nil {
		return o, err
	}
	instance, err := e.servingInstance(ctx, &o)
	if err != nil {
		return o, err
	}
	if instance != "" && !o.Deleting {
		if err := e.observeInstance(ctx, &o, instance); err != nil {
			return o, err
		}
	}
	return o, nil
}

// readStanding reads whether the binding is its Tenant's. When cached, the
// tenants cache is asked first and only its "it stands" is kept (e.cached
// stays true); any other verdict, or none cached, is read from the API
// server.
func (e *external) readStanding(ctx context.Context, b *v1alpha1.DatabaseBinding, cached bool) (tenancy.StandingVerdict, error) {
	var st tenancy.StandingVerdict
	var err error
	e.cached = cached
	if e.cached {
		st, err = tenants.Standing(ctx, e.tenants, b)
		if errors.Is(err, tenants.ErrNotCached) || (err == nil && st.Standing != tenancy.StandingTenants) {
			e.cached, err = false, nil
		}
	}
	if !e.cached && err == nil {
		st, err = tenants.Standing(ctx, e.reader, b)
	}
	return st, err
}

// readDatabase reads the binding's Database, when it exists, into e.db and
// o.Database.
func (e *external) readDatabase(ctx context.Context, o *tenancy.BindingObservation) error {
	db := &v1alpha1.Database{}
	err := e.kube.Get(ctx, types.NamespacedName{Name: e.spec.DatabaseName()}, db)
	switch {
	case kerrors.IsNotFound(err):
	case err != nil:
		return errors.Errorf("cannot read Database %s: %w", e.spec.DatabaseName(), err)
	default:
		e.db = db
		o.Database, err = e.observeDatabase(ctx, db)
		if err != nil {
			return err
		}
	}
	return nil
}

// servingInstance decides the server the binding is served by: the one it
// names, its Database's, or else its namespace's one default server (read
// into o.Default); "" when there is none yet.
func (e *external) servingInstance(ctx context.Context, o *tenancy.BindingObservation) (string, error) {
	instance := e.spec.Instance
	if (e.spec.Static() || instance == "") && e.db != nil {
		instance = o.Database.Instance
	}
	if !e.spec.Static() && instance == "" && e.db == nil && !o.Deleting {
		// Names no server and has no Database yet: its namespace's one
		// default server, if there is exactly one.
		var err error
		if o.Default, err = e.chooseDefault(ctx); err != nil {
			return instance, err
		}
		if len(o.Default.Serving) == 1 && len(o.Default.Invalid) == 0 {
			instance = o.Default.Serving[0]
		}
	}
	return instance, nil
}

// observeInstance reads the ClusterProviderConfig of the server instance
// into o.Instance and, when the binding may take a slot on it, what its
// namespace holds there.
func (e *external) observeInstance(ctx context.Context, o *tenancy.BindingObservation, instance string) error {
	cfg := &v1alpha1.ClusterProviderConfig{}
	err := e.kube.Get(ctx, types.NamespacedName{Name: instance}, cfg)
	switch {
	case kerrors.IsNotFound(err):
	case err != nil:
		return errors.Errorf("cannot read ClusterProviderConfig %s: %w", instance, err)
	default:
		o.Instance = tenancy.ObservedInstance{
			Present: true, Deleting: meta.WasDeleted(cfg), Ready: cfg.GetCondition(xpv2.TypeReady),
			DefaultReclaimPolicy: cfg.Spec.DefaultReclaimPolicy,
		}
		if mayTake(*o) {
			if o.Instance.Namespace, err = e.namespaceUse(ctx, cfg); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *external) observeDatabase(ctx context.Context, db *v1alpha1.Database) (tenancy.ObservedDatabase, error) {
	d := tenancy.ObservedDatabase{
		Present: true, Name: db.GetName(), UID: string(db.GetUID()), ResourceVersion: db.GetResourceVersion(),
		ClaimRef: db.Spec.ClaimRef, Deleting: meta.WasDeleted(db), Ready: db.GetCondition(xpv2.TypeReady),
		ReclaimPolicy: db.Spec.ReclaimPolicy, Database: db.Spec.ForProvider.Database,
		RecordPath: db.Status.AtProvider.Credential.Path, Binding: db.Status.Binding,
		Protected: controllerutil.ContainsFinalizer(db, tenancy.ClaimProtectionFinalizer),
	}
	d.LoginRole = d.Database
	if r := db.Spec.ForProvider.LoginRole; r != nil {
		d.LoginRole = *r
	}
	if r := db.Spec.ProviderConfigReference; r != nil {
		d.Instance = r.Name
	}
	c := db.Spec.ClaimRef
	if c == nil || c.UID == "" || (c.Namespace == e.spec.Namespace && c.UID == e.spec.TenantUID) {
		return d, nil
	}
	// Is the Tenant that holds the claim still there? A binding of its UID
	// in its namespace, not being deleted, that is that Tenant's says so
	// (or one that may yet be: it is not taken over meanwhile).
	live, err := tenants.Claimancy(ctx, e.kube, e.reader, c, tenancy.ReleasedClaim(db.Status.Binding, c))
	if err != nil {
		// The cause names the other claim's namespace and Tenant: it is
		// logged for admins, not told to this binding's namespace.
		e.log.Debug("cannot tell whether the claim of a Database is held", "database", db.GetName(), "error", err)
		return d, errors.Errorf("cannot tell whether the Tenant that holds the claim of Database %s still uses it; retrying", db.GetName())
	}
	d.ClaimantLive = live != tenancy.ClaimNone
	return d, nil
}

// knownEndpoint is what the provider knows of where an imported Database
// is reached: its database name, and the endpoint of the server config it
// names (the one the Database controller proved its credential against).
// The delivery copy takes from it what the imported record lacks.
func (e *external) knownEndpoint(ctx context.Context) (map[string]string, error) {
	known := map[string]string{"database": e.db.Spec.ForProvider.Database}
	ref := e.db.GetProviderConfigReference()
	if ref == nil || ref.Name == "" {
		return known, nil
	}
	cfg := &v1alpha1.ClusterProviderConfig{}
	if err := e.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, cfg); err != nil {
		if kerrors.IsNotFound(err) {
			return known, nil
		}
		return nil, errors.Errorf("cannot read ClusterProviderConfig %s: %w", ref.Name, err)
	}
	ep := cfg.Spec.Endpoint
	known["host"], known["hostaddr"], known["sslmode"] = ep.Host, ep.Hostaddr, string(ep.SSLMode)
	if ep.Port > 0 {
		known["port"] = strconv.Itoa(int(ep.Port))
	}
	return known, nil
}

// observeDelivery reads the Database's record and the delivery copy of a
// bound, Ready Database, and decides the copy.
func (e *external) observeDelivery(ctx context.Context, b *v1alpha1.DatabaseBinding) (managed.ExternalObservation, error) {
	// The record's path comes from the Database's spec, never from its
	// status (which anyone with status rights could point elsewhere).
	src, imported := tenancy.DatabaseRecordPath(e.opts.OpenBao.DatabaseBasePath, e.db.GetName(), e.db.Spec.ForProvider.CredentialPath)
	o := tenancy.DeliveryObservation{
		Spec: e.spec, DatabaseName: e.db.GetName(), DatabaseUID: string(e.db.GetUID()),
		SourcePath: src, CopyPath: e.copyPath(), Import: imported,
	}
	now := time.Now()
	cur := tenancy.DeliveryProof{DatabaseUID: o.DatabaseUID, SourcePath: src, CopyPath: o.CopyPath}
	if e.remembered(cur, now) {
		metrics.DeliveryRemembered()
		e.delivery = tenancy.DeliveryVerdict{InSync: true}
		e.delivered(b)
		return e.withRoles(ctx, b, true)
	}
	e.forgetDelivery()
	var err error
	if imported {
		if o.Known, err = e.knownEndpoint(ctx); err != nil {
			return managed.ExternalObservation{}, err
		}
	}
	if o.Source, err = e.read(ctx, src); err != nil {
		return e.kvFailed(b, "read the Database's credential record", err)
	}
	if o.Copy, err = e.read(ctx, o.CopyPath); err != nil {
		return e.kvFailed(b, "read the delivery copy", err)
	}
	metrics.DeliveryRead()
	e.sourceVersion = o.Source.Version
	v := tenancy.DecideDelivery(o)
	e.delivery = v
	if v.InSync && e.proofs != nil && e.records != nil && e.opts.LoginCheckInterval > 0 {
		cur.SourceVersion = o.Source.Version
		cur.Due = tenancy.NextLoginDue(now, e.opts.LoginCheckInterval, e.proofs.Spread())
		e.proofs.Put(e.uid, cur, now)
	}
	switch {
	case v.InSync:
		e.delivered(b)
		return e.withRoles(ctx, b, true)
	case v.Write:
		obs, err := e.withRoles(ctx, b, false)
		setReady(b, tenancy.ReasonDelivering, fmt.Sprintf("copying the credential of Database %s (version %d) to %s", o.DatabaseName, o.Source.Version, o.CopyPath))
		return obs, err
	default:
		metrics.Failure("binding", v.Reason)
		setReady(b, v.Reason, v.Message)
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
}

// withRoles observes the data roles of a binding whose own delivery is in
// sync (upToDate) or about to be written.
func (e *external) withRoles(ctx context.Context, b *v1alpha1.DatabaseBinding, upToDate bool) (managed.ExternalObservation, error) {
	ok, err := e.observeRoles(ctx, b)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	e.reportExtensions(b)
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: upToDate && ok}, nil
}

// reportExtensions reports, on a binding otherwise Ready, the extensions
// its Tenant asks for that a static binding's Database lacks: the admin
// installs them; the credential is delivered all the same.
func (e *external) reportExtensions(b *v1alpha1.DatabaseBinding) {
	if e.db == nil || b.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue {
		return
	}
	if reason, msg := tenancy.StaticExtensionsProblem(e.spec, e.db.GetName(), e.db.Status.AtProvider.Extensions); reason != "" {
		metrics.Failure("binding", reason)
		setReady(b, reason, msg)
	}
}

// remembered reports whether the last reading of the delivery in sync
// still stands (tenancy.DeliveryCheckDue).
func (e *external) remembered(cur tenancy.DeliveryProof, now time.Time) bool {
	if e.proofs == nil || e.records == nil || e.opts.LoginCheckInterval <= 0 {
		return false
	}
	ver, ok := e.records.RecordVersion(types.UID(cur.DatabaseUID), now)
	return tenancy.DeliveryCheckDue(tenancy.DeliveryCheck{
		Last: e.proofs.Get(e.uid), Now: cur, RecordVersion: ver, RecordProven: ok, Time: now,
	}) == ""
}

// forgetDelivery makes the next Observe read the record and the copy.
func (e *external) forgetDelivery() {
	if e.proofs != nil {
		e.proofs.Forget(e.uid)
	}
}

func (e *external) read(ctx context.Context, path string) (tenancy.BindingKV, error) {
	rec, err := e.kv.Read(ctx, path)
	if err != nil || rec == nil {
		return tenancy.BindingKV{}, err
	}
	return tenancy.BindingKV{Present: true, Data: rec.Data, Owner: rec.Owner, Version: rec.Version}, nil
}

// kvFailed reports an OpenBao failure as CredentialProjectionFailed and
// returns it, so the reconcile is retried.
func (e *external) kvFailed(b *v1alpha1.DatabaseBinding, what string, err error) (managed.ExternalObservation, error) {
	metrics.Failure("binding", tenancy.ReasonCredentialProjectionFailed)
	msg := fmt.Sprintf("cannot %s: %v", what, err)
	setReady(b, tenancy.ReasonCredentialProjectionFailed, msg)
	return managed.ExternalObservation{}, errors.New(msg)
}

// delivered reports the binding Ready with its delivery copy: the copy
// holds the bound Database's current credential.
func (e *external) delivered(b *v1alpha1.DatabaseBinding) {
	e.setCredential(b)
	b.Status.AtProvider.Phase = v1alpha1.BindingPhaseReady
	b.SetConditions(xpv2.Available())
}

func (e *external) setCredential(b *v1alpha1.DatabaseBinding) {
	b.Status.AtProvider.Credential = versioned(e.credentialAt(e.copyPath()), e.sourceVersion, b.Status.AtProvider.Credential)
}

// versioned gives c the record version read now, or, when none was read
// (the last reading stands), the version last shown for the same copy.
func versioned(c v1alpha1.CredentialObservation, read int, last v1alpha1.CredentialObservation) v1alpha1.CredentialObservation {
	c.Version = int64(read)
	if read == 0 && last.Path == c.Path {
		c.Version = last.Version
	}
	return c
}

// credentialAt locates the delivery copy at p as the namespace reads it.
func (e *external) credentialAt(p string) v1alpha1.CredentialObservation {
	addr := e.opts.OpenBao.ConsumerAddress
	if addr == "" {
		addr = e.opts.OpenBao.Address
	}
	return v1alpha1.CredentialObservation{Path: p, OpenBaoURL: openbao.ConsumerURL(addr, e.opts.OpenBao.KVMount, p)}
}

// setReady sets Ready=False with reason and message (never a credential).
func setReady(b *v1alpha1.DatabaseBinding, reason, msg string) {
	b.SetConditions(xpv2.Condition{
		Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ConditionReason(reason),
		Message: msg, LastTransitionTime: metav1.Now(), ObservedGeneration: b.GetGeneration(),
	})
}

// Create provisions the Database of a dynamic binding with its claim
// already set, or writes the claim of a static one with the
// resourceVersion Observe read. Nothing else is written before the claim
// is confirmed.
func (e *external) Create(ctx context.Context, b *v1alpha1.DatabaseBinding) (managed.ExternalCreation, error) {
	d := e.decision
	switch d.Action {
	case tenancy.ActionCreateDynamic:
		err := e.kube.Create(ctx, d.Create)
		if !kerrors.IsAlreadyExists(err) {
			if err != nil {
				return managed.ExternalCreation{}, errors.Errorf("cannot create Database %s: %w", d.Create.GetName(), err)
			}
			return managed.ExternalCreation{}, nil
		}
		// A retry: the Database exists; it is ours only if its claim names
		// this Tenant.
		db := &v1alpha1.Database{}
		if err := e.reader.Get(ctx, types.NamespacedName{Name: d.Create.GetName()}, db); err != nil {
			return managed.ExternalCreation{}, errors.Errorf("cannot read Database %s: %w", d.Create.GetName(), err)
		}
		if c := db.Spec.ClaimRef; c != nil && *c == e.spec.Claim() {
			return managed.ExternalCreation{}, nil
		}
		msg := fmt.Sprintf("Database %s exists but its spec.claimRef does not name this Tenant: it is not taken over", d.Create.GetName())
		setReady(b, tenancy.ReasonConflict, msg)
		return managed.ExternalCreation{}, errors.New(msg)
	case tenancy.ActionWriteClaim:
		if e.db == nil || e.db.GetResourceVersion() != d.ResourceVersion {
			return managed.ExternalCreation{}, errors.New("the Database changed since it was read")
		}
		db := e.db.DeepCopy()
		claim := *d.Claim
		db.Spec.ClaimRef = &claim
		// The claim and its protection are written together.
		controllerutil.AddFinalizer(db, tenancy.ClaimProtectionFinalizer)
		// The update carries the resourceVersion read: if another binder
		// claimed the Database in between, this write loses with a
		// conflict, and the next reconcile re-reads and re-decides.
		if err := e.kube.Update(ctx, db); err != nil {
			return managed.ExternalCreation{}, errors.Errorf("cannot write the claim of Database %s: %w", db.GetName(), err)
		}
		return managed.ExternalCreation{}, nil
	}
	return managed.ExternalCreation{}, errors.Errorf("nothing to create (%s)", d.Action)
}

// Update completes the binding's record of a confirmed claim, copies the
// bound Database's credential to the delivery path, or releases the
// Database of a binding whose Tenant is gone.
func (e *external) Update(ctx context.Context, b *v1alpha1.DatabaseBinding) (managed.ExternalUpdate, error) {
	d := e.decision
	if d.Orphaned {
		_, err := e.Delete(ctx, b)
		return managed.ExternalUpdate{}, err
	}
	switch d.Action {
	case tenancy.ActionCompleteRecord:
		if err := e.protect(ctx); err != nil {
			return managed.ExternalUpdate{}, err
		}
		if h := e.hook; h != nil {
			if err := h(StepRecordBinding); err != nil {
				return managed.ExternalUpdate{}, err
			}
		}
		at := &b.Status.AtProvider
		at.DatabaseName, at.DatabaseUID = d.Record.DatabaseName, d.Record.DatabaseUID
		// The next Observe decides from this record. When that is a wait
		// (the Database is not Ready yet), it is reported in this
		// reconcile's status write rather than in one more after the next
		// Observe (each write of a composed binding re-renders its Tenant).
		o := e.obs
		o.Recorded = d.Record
		if n := tenancy.DecideBinding(o); n.Action == tenancy.ActionWait && n.Record == d.Record {
			at.Phase = n.Phase
			setReady(b, n.Reason, n.Message)
		}
		return managed.ExternalUpdate{}, nil
	case tenancy.ActionCopyCredential:
		return managed.ExternalUpdate{}, e.copyCredential(ctx, b)
	}
	return managed.ExternalUpdate{}, nil
}

// copyCredential copies the bound Database's credential to the delivery
// path, then the data roles' copies, and shows the binding Ready once every
// copy holds what Observe decided.
func (e *external) copyCredential(ctx context.Context, b *v1alpha1.DatabaseBinding) error {
	if err := e.protect(ctx); err != nil {
		return err
	}
	v := e.delivery
	if !v.Write {
		err := e.updateRoles(ctx, b)
		if err == nil && v.InSync && e.rolesDelivered() {
			// Every copy now holds what Observe decided: Ready in this
			// reconcile's status write, not a poll interval later.
			e.delivered(b)
			e.reportExtensions(b)
		}
		return err
	}
	p := e.copyPath()
	if v.Claim {
		if err := e.kv.ClaimPath(ctx, p, v.Owner); err != nil {
			if errors.Is(err, openbao.ErrCASMismatch) {
				err = errors.Errorf("the delivery path %s was taken by another writer since it was read", p)
			}
			return e.projectionFailed(b, err)
		}
	}
	if h := e.hook; h != nil {
		if err := h(StepCopyCredential); err != nil {
			return err
		}
	}
	if _, err := e.kv.Write(ctx, p, v.Data, v.CAS); err != nil {
		if errors.Is(err, openbao.ErrCASMismatch) {
			err = errors.Errorf("the delivery copy %s changed since it was read", p)
		}
		return e.projectionFailed(b, err)
	}
	if h := e.hook; h != nil {
		if err := h(StepCopyOwner); err != nil {
			return err
		}
	}
	if err := e.kv.SetOwner(ctx, p, v.Owner); err != nil {
		return e.projectionFailed(b, err)
	}
	// The copy now holds exactly what Observe decided it should: the
	// binding is Ready in this reconcile's status write, rather than
	// a Delivering write first and a Ready one after the next Observe
	// (each write of a composed binding re-renders its Tenant).
	e.delivered(b)
	err := e.updateRoles(ctx, b)
	e.reportExtensions(b)
	return err
}

func (e *external) projectionFailed(b *v1alpha1.DatabaseBinding, err error) error {
	metrics.Failure("binding", tenancy.ReasonCredentialProjectionFailed)
	msg := fmt.Sprintf("cannot copy the credential: %v", err)
	setReady(b, tenancy.ReasonCredentialProjectionFailed, msg)
	return errors.New(msg)
}

// Delete releases the Database (Retain: records it Released, which needs
// only the Kubernetes API; Delete: deletes the Database, whose own
// finalizer drops what it owns), then deletes the delivery copy if it
// names this binding. An error keeps the binding's finalizer.
func (e *external) Delete(ctx context.Context, b *v1alpha1.DatabaseBinding) (managed.ExternalDelete, error) {
	d := e.decision
	if d.Action == tenancy.ActionWait {
		// Nothing is released yet; the error keeps the finalizer, shows
		// the wait in the Synced condition and retries with backoff.
		return managed.ExternalDelete{}, errors.New(d.Message)
	}
	var errs []error
	switch d.Release {
	case v1alpha1.ReclaimRetain:
		if err := e.recordReleased(ctx, *d.Released); err != nil {
			errs = append(errs, err)
		}
	case v1alpha1.ReclaimDelete:
		uid, rv := e.db.GetUID(), e.db.GetResourceVersion()
		// Preconditions: only the Database as read, with this Tenant's
		// claim, is deleted.
		err := e.kube.Delete(ctx, e.db, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !kerrors.IsNotFound(err) {
			errs = append(errs, errors.Errorf("cannot delete Database %s: %w", e.db.GetName(), err))
		}
	}
	// Released (now or by an earlier pass whose protection removal
	// failed): the Database no longer needs protecting for this Tenant.
	if len(errs) == 0 && d.Phase == v1alpha1.BindingPhaseReleased && e.db != nil {
		if err := e.unprotect(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if e.copyOurs {
		if err := e.deleteCopy(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range e.roleCopyPaths(b) {
		if err := e.deleteCopyAt(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return managed.ExternalDelete{}, errors.Join(errs...)
}

// externalSecrets is the kind ESO projects Secrets from.
var externalSecrets = schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecretList"}

// readers lists, from the API server, the ExternalSecrets of namespace ns
// that read one of paths (the binding's delivery copy). Where the
// ExternalSecret kind is not served, none can.
func (e *external) readers(ctx context.Context, ns string, paths ...string) ([]string, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(externalSecrets)
	if err := e.reader.List(ctx, l, client.InNamespace(ns)); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, errors.Errorf("cannot list the ExternalSecrets of namespace %s to check that none still reads this binding's credential; nothing is released until it can: %w", ns, err)
	}
	var names []string
	for _, es := range l.Items {
		if readsAny(es.Object, paths) {
			names = append(names, es.GetName())
		}
	}
	return names, nil
}

// readsAny reports whether the ExternalSecret es reads one of paths (the
// keys of spec.dataFrom[].extract and spec.data[].remoteRef). Empty paths
// match nothing.
func readsAny(es map[string]any, paths []string) bool {
	var keys []string
	from, _, _ := unstructured.NestedSlice(es, "spec", "dataFrom")
	for _, f := range from {
		if m, ok := f.(map[string]any); ok {
			k, _, _ := unstructured.NestedString(m, "extract", "key")
			keys = append(keys, k)
		}
	}
	data, _, _ := unstructured.NestedSlice(es, "spec", "data")
	for _, f := range data {
		if m, ok := f.(map[string]any); ok {
			k, _, _ := unstructured.NestedString(m, "remoteRef", "key")
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if k != "" && slices.Contains(paths, k) {
			return true
		}
	}
	return false
}

// recordReleased records the Database's binding status as Released, re-read
// on every conflict, as long as its claim still names this Tenant.
func (e *external) recordReleased(ctx context.Context, st v1alpha1.BindingStatus) error {
	name := e.db.GetName()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		db := &v1alpha1.Database{}
		if err := e.reader.Get(ctx, types.NamespacedName{Name: name}, db); err != nil {
			return err
		}
		if c := db.Spec.ClaimRef; c == nil || *c != e.spec.Claim() {
			return nil
		}
		db.Status.Binding = st
		return e.kube.Status().Update(ctx, db)
	})
	if err != nil && !kerrors.IsNotFound(err) {
		return errors.Errorf("cannot record Database %s as Released: %w", name, err)
	}
	return nil
}

// protect adds the claim protection to the bound Database when it lacks it
// (a claim written before it existed, or by an admin's preset that this
// binder completed), unless the Database is already being deleted.
func (e *external) protect(ctx context.Context) error {
	if e.db == nil || meta.WasDeleted(e.db) || controllerutil.ContainsFinalizer(e.db, tenancy.ClaimProtectionFinalizer) {
		return nil
	}
	db := e.db.DeepCopy()
	controllerutil.AddFinalizer(db, tenancy.ClaimProtectionFinalizer)
	if err := e.kube.Update(ctx, db); err != nil {
		return errors.Errorf("cannot protect Database %s while it is bound: %w", db.GetName(), err)
	}
	return nil
}

// unprotect removes the claim protection once the Database is released, as
// long as its claim still names this Tenant (re-read on every conflict).
func (e *external) unprotect(ctx context.Context) error {
	name := e.db.GetName()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		db := &v1alpha1.Database{}
		if err := e.reader.Get(ctx, types.NamespacedName{Name: name}, db); err != nil {
			return err
		}
		if c := db.Spec.ClaimRef; c == nil || *c != e.spec.Claim() || !controllerutil.ContainsFinalizer(db, tenancy.ClaimProtectionFinalizer) {
			return nil
		}
		controllerutil.RemoveFinalizer(db, tenancy.ClaimProtectionFinalizer)
		return e.kube.Update(ctx, db)
	})
	if err != nil && !kerrors.IsNotFound(err) {
		return errors.Errorf("cannot lift the claim protection of Database %s: %w", name, err)
	}
	return nil
}

// deleteCopy deletes the delivery copy (every version) if its metadata
// names this binding.
func (e *external) deleteCopy(ctx context.Context) error {
	p := e.copyPath()
	rec, err := e.kv.Read(ctx, p)
	if err != nil {
		return errors.Errorf("cannot read the delivery copy to delete it: %w", err)
	}
	if rec == nil || !tenancy.CopyOwnedBy(rec.Owner, e.spec) {
		return nil
	}
	if err := e.kv.Delete(ctx, p); err != nil {
		return errors.Errorf("cannot delete the delivery copy: %w", err)
	}
	return nil
}

// Disconnect does nothing: the clients are shared.
func (e *external) Disconnect(context.Context) error { return nil }
