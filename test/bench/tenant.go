package main

// Tenant mode (-tenants): the full stack an app team's Tenant goes through —
// Crossplane core with the Configuration's functions, the provider as a
// process, PostgreSQL, OpenBao and the External Secrets Operator — timed
// from the Tenant's create to a login with the Secret ESO wrote, one hop at
// a time from watch events; then N Tenants at once against a floor of the
// same external work done sequentially (tenantfloor.go).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// tenantCfg is the Tenant mode's part of the configuration.
type tenantCfg struct {
	enabled bool
	// runs is the number of Tenants timed one at a time.
	runs int
	// ns are the bulk sizes.
	ns []int
	// floor runs the Tenant floor for each bulk size.
	floor bool
	// poll is the provider's --poll in Tenant runs (its default).
	poll time.Duration
	// idle is the idle window after the largest wave (0: none);
	// idleSettle the wait before it.
	idle, idleSettle time.Duration
	// apiAudit gives kube-apiserver an audit log, for requests by client.
	apiAudit bool
	// esoArgs are more flags for ESO.
	esoArgs []string
}

// stackOptions is the full stack with the Tenant runs' settings.
func (c cfg) stackOptions() testenv.Options {
	o := fullStack
	o.KubeAudit = c.tenants.apiAudit
	o.ESOArgs = c.tenants.esoArgs
	return o
}

// The events of one Tenant, in the order they happen.
type tenantEvent int

const (
	evCreated        tenantEvent = iota // the bench sent the create
	evBinding                           // its DatabaseBinding exists (core rendered the Tenant)
	evDatabase                          // its Database exists (the binding controller provisioned it)
	evDatabaseReady                     // the Database is Ready (the Database controller created it and proved the login)
	evBound                             // the binding is Ready (the delivery copy is written)
	evExternalSecret                    // its ExternalSecret exists (core rendered the bound binding)
	evSecret                            // its Secret exists (ESO read the copy)
	evLogin                             // a login with the Secret's values works
	evTenantReady                       // the Tenant is Ready (core saw ESO's SecretSynced)
	nEvents
)

// hops are the intervals reported, each from the previous event.
var hops = []struct {
	name     string
	from, to tenantEvent
}{
	{"core render: create → DatabaseBinding exists", evCreated, evBinding},
	{"binding: → Database exists", evBinding, evDatabase},
	{"provisioning: → Database Ready", evDatabase, evDatabaseReady},
	{"delivery copy: → DatabaseBinding Ready", evDatabaseReady, evBound},
	{"core render: → ExternalSecret exists", evBound, evExternalSecret},
	{"ESO sync: → Secret exists", evExternalSecret, evSecret},
	{"login: → login with the Secret works", evSecret, evLogin},
}

// tenantNamespace and tenantName name the i-th benchmark Tenant: one
// Tenant per app namespace, as app teams have them.
func tenantNamespace(i int) string { return fmt.Sprintf("bench-%04d", i) }
func tenantName(i int) string      { return fmt.Sprintf("app%04d", i) }

// tracker records when each event of each Tenant was first seen, from
// watches on every kind involved. Tenants are keyed by namespace.
type tracker struct {
	mu    sync.Mutex
	times map[string]*[nEvents]time.Time
	// secrets get the namespaces whose Secret just appeared, with its data
	// (for the login).
	secrets chan secretSeen
	// trace, when set, gets one line per watch event of a registered
	// Tenant (the -logs directory's tenant-trace.log for the latency run,
	// tenant-trace-n<N>.log for N at once).
	trace io.Writer
}

type secretSeen struct {
	ns   string
	data map[string]string
}

func newTracker() *tracker {
	return &tracker{times: map[string]*[nEvents]time.Time{}, secrets: make(chan secretSeen, 4096)}
}

// expect registers a Tenant before it is created; events of unregistered
// namespaces are ignored.
func (t *tracker) expect(ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.times[ns] = &[nEvents]time.Time{}
}

// set records ev for ns at at unless it was seen before; it reports
// whether this was the first time.
func (t *tracker) set(ns string, ev tenantEvent, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.times[ns]
	if r == nil || !r[ev].IsZero() {
		return false
	}
	r[ev] = at
	return true
}

func (t *tracker) get(ns string) [nEvents]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.times[ns]; r != nil {
		return *r
	}
	return [nEvents]time.Time{}
}

// count is how many Tenants have seen ev.
func (t *tracker) count(ev tenantEvent) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, r := range t.times {
		if !r[ev].IsZero() {
			n++
		}
	}
	return n
}

// condTrue reports whether u has condition typ with status True.
func condTrue(u *unstructured.Unstructured, typ string) bool {
	s, _, _ := tenantkit.Condition(u, typ)
	return s == "True"
}

// traceEvent writes one line for an event of a registered Tenant: the time
// since its create, the kind, name, resourceVersion, Ready condition and
// phase (no data).
func (t *tracker) traceEvent(now time.Time, ns, kind string, u *unstructured.Unstructured) {
	if t.trace == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.times[ns]
	if r == nil {
		return
	}
	st, reason, _ := tenantkit.Condition(u, "Ready")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if phase == "" {
		phase, _, _ = unstructured.NestedString(u.Object, "status", "atProvider", "phase")
	}
	// The field manager that wrote last (by managedFields time).
	var last metav1.ManagedFieldsEntry
	for _, m := range u.GetManagedFields() {
		if m.Time != nil && (last.Time == nil || !m.Time.Before(last.Time)) {
			last = m
		}
	}
	by := last.Manager + " " + string(last.Operation)
	if last.Subresource != "" {
		by += " " + last.Subresource
	}
	_, _ = fmt.Fprintf(t.trace, "%s +%5dms %-16s %s rv=%s ready=%s/%s phase=%s last=%s\n", ns, now.Sub(r[evCreated]).Milliseconds(), kind, u.GetName(), u.GetResourceVersion(), st, reason, phase, by)
}

// note is the watches' callback.
func (t *tracker) note(kind string, u *unstructured.Unstructured) {
	now := time.Now()
	ns := u.GetNamespace()
	if kind == v1alpha1.DatabaseKind {
		ns, _, _ = unstructured.NestedString(u.Object, "spec", "claimRef", "namespace")
	}
	t.traceEvent(now, ns, kind, u)
	switch kind {
	case "Tenant":
		if tenantkit.Phase(u) == "Ready" && condTrue(u, "Ready") {
			t.set(ns, evTenantReady, now)
		}
	case v1alpha1.DatabaseBindingKind:
		t.set(ns, evBinding, now)
		if condTrue(u, "Ready") {
			t.set(ns, evBound, now)
		}
	case v1alpha1.DatabaseKind:
		t.set(ns, evDatabase, now)
		if condTrue(u, "Ready") {
			t.set(ns, evDatabaseReady, now)
		}
	case "ExternalSecret":
		t.set(ns, evExternalSecret, now)
	case "Secret":
		if !strings.HasPrefix(ns, "bench-") || !strings.HasSuffix(u.GetName(), "-postgresql") {
			return
		}
		if t.set(ns, evSecret, now) {
			enc, _, _ := unstructured.NestedStringMap(u.Object, "data")
			data := make(map[string]string, len(enc))
			for k, v := range enc {
				b, err := base64.StdEncoding.DecodeString(v)
				if err == nil {
					data[k] = string(b)
				}
			}
			select {
			case t.secrets <- secretSeen{ns: ns, data: data}:
			default:
			}
		}
	}
}

// watchKinds lists and watches every kind a Tenant goes through until ctx
// ends, feeding the tracker; it returns once every watch has started.
func watchKinds(ctx context.Context, kube client.WithWatch, t *tracker) {
	kinds := [][2]string{
		{tenantkit.TenantAPI, "Tenant"},
		{v1alpha1.SchemeGroupVersion.String(), v1alpha1.DatabaseBindingKind},
		{v1alpha1.SchemeGroupVersion.String(), v1alpha1.DatabaseKind},
		{"external-secrets.io/v1", "ExternalSecret"},
		{"v1", "Secret"},
	}
	var started sync.WaitGroup
	for _, k := range kinds {
		started.Add(1)
		go watchKind(ctx, kube, k[0], k[1], &started, func(u *unstructured.Unstructured) { t.note(k[1], u) })
	}
	started.Wait()
}

// watchKind lists, then watches from the list's version, and again when
// the watch ends, until ctx ends.
func watchKind(ctx context.Context, kube client.WithWatch, apiVersion, kind string, started *sync.WaitGroup, note func(*unstructured.Unstructured)) {
	once := sync.OnceFunc(started.Done)
	defer once()
	for ctx.Err() == nil {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(kind + "List")
		if err := kube.List(ctx, l); err != nil {
			_ = sleep(ctx, 200*time.Millisecond)
			continue
		}
		for i := range l.Items {
			note(&l.Items[i])
		}
		wl := &unstructured.UnstructuredList{}
		wl.SetAPIVersion(apiVersion)
		wl.SetKind(kind + "List")
		w, err := kube.Watch(ctx, wl, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})
		if err != nil {
			_ = sleep(ctx, 200*time.Millisecond)
			continue
		}
		once()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted {
				note(u)
			}
		}
		w.Stop()
	}
}

// logins logs in with each Secret the tracker reports and records when the
// login worked (it retries for 30 s: the role exists once the Database is
// Ready, so the first attempt should work).
func logins(ctx context.Context, b *benchEnv, t *tracker) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-t.secrets:
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				if err := login(ctx, b, s.data); err == nil {
					t.set(s.ns, evLogin, time.Now())
					break
				}
				if sleep(ctx, 50*time.Millisecond) != nil {
					return
				}
			}
		}
	}
}

// login connects as the tenant with the Secret's values (host, port,
// database, username, password, sslmode verify-full against the test CA)
// and checks who it is.
func login(ctx context.Context, b *benchEnv, d map[string]string) error {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=%s user=%s sslmode=%s sslrootcert=%s connect_timeout=5",
		d["host"], d["port"], d["database"], d["username"], d["sslmode"], b.CA.CertFile))
	if err != nil {
		return err
	}
	cfg.Password = d["password"]
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(ctx) //nolint:errcheck // a probe connection
	var user string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		return err
	}
	if user != d["username"] {
		return fmt.Errorf("logged in as %q, not as the Secret's user", user)
	}
	return nil
}

// tenantStack is a running provider with the platform registered and the
// watches on.
type tenantStack struct {
	b     *benchEnv
	p     *testenv.Provider
	t     *tracker
	tmpl  *unstructured.Unstructured
	trace *os.File
}

// stop stops the provider and closes the trace.
func (s *tenantStack) stop() {
	s.p.Stop()
	if s.trace != nil {
		_ = s.trace.Close() // a log
	}
}

// startTenantStack starts the provider with its default flags (plus
// -provider-flags), registers the platform (tenantkit.Platform: the admin
// Secret, the ClusterProviderConfigs, the ClusterSecretStore), waits until
// the instance is Ready and the controllers run, and starts the watches and
// the login worker. Stop the provider when done.
func startTenantStack(ctx context.Context, c cfg, b *benchEnv, bin, logFile, traceFile string) (*tenantStack, error) {
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "tenant", "tenant.yaml"))
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 || objs[0].GetKind() != "Tenant" {
		return nil, errors.New("examples/tenant/tenant.yaml must hold exactly one Tenant")
	}
	p, err := startProvider(ctx, b, bin, logFile, c.tenants.poll, 0, c.pprof > 0, c.extra)
	if err != nil {
		return nil, err
	}
	s := &tenantStack{b: b, p: p, t: newTracker(), tmpl: objs[0]}
	fail := func(err error) (*tenantStack, error) { s.stop(); return nil, err }
	trace, err := os.Create(traceFile) //nolint:gosec // the run's own log directory
	if err != nil {
		return fail(err)
	}
	s.t.trace, s.trace = trace, trace
	if err := tenantkit.Platform(ctx, b.Env); err != nil {
		return fail(err)
	}
	if err := testenv.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		cpc := &v1alpha1.ClusterProviderConfig{}
		if err := b.kube.Get(ctx, client.ObjectKey{Name: tenantkit.Instance}, cpc); err == nil && cpc.Status.Phase == v1alpha1.ConfigPhaseReady {
			return nil
		}
		if err := p.Exited(); err != nil {
			return testenv.Permanent(err)
		}
		return testenv.ErrNotYet
	}); err != nil {
		return fail(fmt.Errorf("clusterproviderconfig/%s not Ready: %w; provider log: %s", tenantkit.Instance, err, p.LogFile))
	}
	if err := waitControllerStarted(ctx, p); err != nil {
		return fail(err)
	}
	watchKinds(ctx, b.kube, s.t)
	go logins(ctx, b, s.t)
	return s, nil
}

// prepare makes the app namespaces of Tenants [from, to) with the reader
// service account ESO logs in as (what an app team has before it asks for
// a database), from 16 goroutines.
func (s *tenantStack) prepare(ctx context.Context, from, to int) error {
	return parallel(from, to, func(i int) error {
		ns := tenantNamespace(i)
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testenv.TenantReaderServiceAccount}},
		} {
			// The bench's unthrottled client: 1000 namespaces at the
			// default client's 5 requests/s would take minutes.
			if err := s.b.kube.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		return nil
	})
}

// create creates Tenant i like examples/tenant/tenant.yaml and records the
// time the create was sent.
func (s *tenantStack) create(ctx context.Context, i int) error {
	o := s.tmpl.DeepCopy()
	o.SetNamespace(tenantNamespace(i))
	o.SetName(tenantName(i))
	s.t.expect(o.GetNamespace())
	s.t.set(o.GetNamespace(), evCreated, time.Now())
	return s.b.kube.Create(ctx, o)
}

// parallel runs fn for [from, to) from 16 goroutines and returns the first
// error.
func parallel(from, to int, fn func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, to-from)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// waitEvent waits until ev was seen for every namespace of [from, to).
func (s *tenantStack) waitEvent(ctx context.Context, from, to int, ev tenantEvent, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	report := time.Now().Add(15 * time.Second)
	for {
		missing := 0
		for i := from; i < to; i++ {
			if s.t.get(tenantNamespace(i))[ev].IsZero() {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if err := s.p.Exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d Tenants not there in %s; first one missing:\n%s", missing, to-from, timeout, s.describeFirstMissing(ctx, from, to, ev))
		}
		if time.Now().After(report) && to-from > 1 {
			fmt.Printf("      %d/%d Secrets, %d Databases Ready, %d bindings Ready\n", s.t.count(evSecret), to-from, s.t.count(evDatabaseReady), s.t.count(evBound))
			report = time.Now().Add(15 * time.Second)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func (s *tenantStack) describeFirstMissing(ctx context.Context, from, to int, ev tenantEvent) string {
	for i := from; i < to; i++ {
		if s.t.get(tenantNamespace(i))[ev].IsZero() {
			return tenantkit.Describe(ctx, s.b.Env, tenantkit.TenantAPI, tenantNamespace(i), tenantName(i))
		}
	}
	return ""
}

// latencyResult is the Tenant latency: one Tenant at a time.
type latencyResult struct {
	// Cold is the first Tenant of a fresh stack, not among Runs.
	Cold [nEvents]time.Time
	Runs [][nEvents]time.Time
	// Reconciles per Tenant by controller, over the runs.
	Reconciles map[string]float64
}

// runTenantLatency times c.tenants.runs Tenants, one at a time on an
// otherwise idle stack: each is created once the previous one logged in
// and a pause has passed.
func runTenantLatency(ctx context.Context, c cfg, b *benchEnv, bin, logDir string) (*latencyResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := startTenantStack(ctx, c, b, bin, filepath.Join(logDir, "provider-tenant-latency.log"), filepath.Join(logDir, "tenant-trace.log"))
	if err != nil {
		return nil, err
	}
	defer s.stop()
	n := c.tenants.runs
	if err := s.prepare(ctx, 0, n+1); err != nil {
		return nil, err
	}
	r := &latencyResult{}
	var rec0 map[string]float64
	for i := 0; i <= n; i++ {
		if i == 1 {
			rec0 = reconcilesByController(s.p.Metrics)
		}
		// Idle: nothing left over from the previous Tenant.
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
		if err := s.create(ctx, i); err != nil {
			return nil, err
		}
		if err := s.waitEvent(ctx, i, i+1, evLogin, 2*time.Minute); err != nil {
			return nil, err
		}
		// The Tenant's own Ready comes after the Secret; wait for it too
		// (briefly), so the next run starts on an idle system.
		_ = s.waitEvent(ctx, i, i+1, evTenantReady, 30*time.Second)
		t := s.t.get(tenantNamespace(i))
		fmt.Printf("    tenant %d: %s\n", i, hopLine(t))
		if i == 0 {
			r.Cold = t
		} else {
			r.Runs = append(r.Runs, t)
		}
	}
	r.Reconciles = map[string]float64{}
	for k, v := range reconcilesByController(s.p.Metrics) {
		r.Reconciles[k] = (v - rec0[k]) / float64(n)
	}
	return r, s.p.Exited()
}

// hopLine is one Tenant's hops, for the progress output.
func hopLine(t [nEvents]time.Time) string {
	parts := []string{fmt.Sprintf("total %s", since(t, evCreated, evLogin))}
	for _, h := range hops {
		parts = append(parts, since(t, h.from, h.to))
	}
	parts = append(parts, "Tenant Ready "+since(t, evCreated, evTenantReady))
	return strings.Join(parts, " | ")
}

func since(t [nEvents]time.Time, from, to tenantEvent) string {
	if t[from].IsZero() || t[to].IsZero() {
		return "–"
	}
	return fmt.Sprintf("%d ms", t[to].Sub(t[from]).Milliseconds())
}

// bulkResult is N Tenants created at once.
type bulkResult struct {
	N int
	// Each is when each Tenant's Secret was first seen, from t0, sorted;
	// Ready is the last.
	Each  []time.Duration
	Ready time.Duration
	// TenantReady is when the last Tenant was Ready (core), from t0.
	TenantReady time.Duration
	// Hops are each hop's mean over the Tenants.
	Hops       []time.Duration
	Reconciles map[string]float64
	// APIRequests is the apiserver's requests per Tenant by verb and
	// resource (apiserver_request_total), until all Secrets existed.
	APIRequests map[string]float64
	// Renders is the composition function's renders per Tenant until all
	// Secrets existed (its debug log); RendersOwn each Tenant's renders
	// until its own Secret existed, by namespace.
	Renders    float64
	RendersOwn map[string]int
	// RendersParsed is the renders read with their time from the log.
	RendersParsed int
	// Clients is the apiserver's requests per Tenant by client, until all
	// Secrets existed (its audit log; empty without -api-audit).
	Clients apiCounts
	// Bao is OpenBao's requests until all Secrets existed (its audit
	// device), Syncs ESO's reconciles of ExternalSecrets.
	Bao    baoCounts
	BaoErr error
	Syncs  float64
	CPU    cpuShare
	HWM    int64
	// LoginFailures counts Secrets that did not log in (checked after).
	LoginFailures int
	// Idle is the idle window after the wave (-tenants-idle, the largest
	// wave only).
	Idle *idleResult
}

// RendersOwnMean is the mean over the Tenants of their renders until their
// own Secret existed.
func (r *bulkResult) RendersOwnMean() float64 {
	if r.N == 0 {
		return 0
	}
	t := 0
	for _, v := range r.RendersOwn {
		t += v
	}
	return float64(t) / float64(r.N)
}

// runTenantBulk creates n Tenants at once (16 goroutines, unthrottled
// client) and waits until every Secret exists; then it checks that every
// Secret logs in (untimed).
func runTenantBulk(ctx context.Context, c cfg, b *benchEnv, bin, logDir string, n int, idle bool) (*bulkResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := startTenantStack(ctx, c, b, bin, filepath.Join(logDir, fmt.Sprintf("provider-tenants-n%d.log", n)), filepath.Join(logDir, fmt.Sprintf("tenant-trace-n%d.log", n)))
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if err := s.prepare(ctx, 0, n); err != nil {
		return nil, err
	}
	// The namespaces' creation settles before t0.
	if err := sleep(ctx, 2*time.Second); err != nil {
		return nil, err
	}
	r := &bulkResult{N: n}
	bao := startAudit(ctx, b)
	esoAddr := b.ESO.MetricsAddr
	fnLog := filepath.Join(b.Dir, "function.log")
	rec0 := reconcilesByController(s.p.Metrics)
	api0 := apiserverRequests(ctx, b)
	aud0 := fileSize(b.Kube.AuditLog)
	fn0 := fileSize(fnLog)
	syncs0 := esoSyncs(esoAddr)
	renders0 := functionRenders(b)
	cpu0 := sampleCPU()
	t0 := time.Now()
	var profiled <-chan error
	if c.pprof > 0 {
		profiled = profile(ctx, s.p.Pprof, logDir, fmt.Sprintf("tenants-n%d", n), c.pprof)
	}
	if err := parallel(0, n, func(i int) error { return s.create(ctx, i) }); err != nil {
		return nil, err
	}
	if err := s.waitEvent(ctx, 0, n, evSecret, 5*time.Minute+2*time.Duration(n)*time.Second); err != nil {
		return nil, fmt.Errorf("%w; provider log: %s", err, s.p.LogFile)
	}
	var last time.Time
	for i := 0; i < n; i++ {
		at := s.t.get(tenantNamespace(i))[evSecret]
		r.Each = append(r.Each, at.Sub(t0))
		if at.After(last) {
			last = at
		}
	}
	sort.Slice(r.Each, func(i, j int) bool { return r.Each[i] < r.Each[j] })
	r.Ready = last.Sub(t0)
	r.CPU = sampleCPU().sub(cpu0)
	r.Renders = float64(functionRenders(b)-renders0) / float64(n)
	aud1, fn1 := fileSize(b.Kube.AuditLog), fileSize(fnLog)
	r.Syncs = esoSyncs(esoAddr) - syncs0
	bao.mark()
	r.Bao, r.BaoErr = bao.stop()
	if b.Kube.AuditLog != "" {
		a := auditWindow(b.Kube.AuditLog, aud0, aud1)
		r.Clients = apiCounts{ByClient: scale(a.ByClient, float64(n)), ByClientRequest: scale(a.ByClientRequest, float64(n))}
	}
	until := map[string]time.Time{}
	for i := 0; i < n; i++ {
		until[tenantNamespace(i)] = s.t.get(tenantNamespace(i))[evSecret]
	}
	lines, _ := readRange(fnLog, fn0, fn1)
	parsed := parseRenders(lines)
	r.RendersParsed = len(parsed)
	r.RendersOwn = rendersUntil(parsed, until)
	r.APIRequests = map[string]float64{}
	for k, v := range apiserverRequests(ctx, b) {
		if d := (v - api0[k]) / float64(n); d > 0 {
			r.APIRequests[k] = d
		}
	}
	if ps, err := readProc(s.p.Pid()); err == nil {
		r.HWM = ps.HWM
	}
	r.Reconciles = map[string]float64{}
	for k, v := range reconcilesByController(s.p.Metrics) {
		r.Reconciles[k] = (v - rec0[k]) / float64(n)
	}
	if err := s.waitEvent(ctx, 0, n, evTenantReady, 2*time.Minute); err != nil {
		fmt.Printf("    (not every Tenant Ready in core's view: %v)\n", err)
	}
	var lastReady time.Time
	r.Hops = make([]time.Duration, len(hops))
	for i := 0; i < n; i++ {
		t := s.t.get(tenantNamespace(i))
		if t[evTenantReady].After(lastReady) {
			lastReady = t[evTenantReady]
		}
		for j, h := range hops[:len(hops)-1] { // no timed login in bulk
			if !t[h.from].IsZero() && !t[h.to].IsZero() {
				r.Hops[j] += t[h.to].Sub(t[h.from]) / time.Duration(n)
			}
		}
	}
	if !lastReady.IsZero() {
		r.TenantReady = lastReady.Sub(t0)
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			return nil, fmt.Errorf("profiling the provider: %w", err)
		}
	}
	// Every Secret logs in (after the timing, so it does not weigh on it).
	var mu sync.Mutex
	_ = parallel(0, n, func(i int) error {
		sec, err := tenantkit.Get(ctx, b.kube, "v1", "Secret", tenantNamespace(i), tenantkit.SecretName(tenantName(i)))
		ok := err == nil
		if ok {
			enc, _, _ := unstructured.NestedStringMap(sec.Object, "data")
			d := map[string]string{}
			for k, v := range enc {
				raw, _ := base64.StdEncoding.DecodeString(v)
				d[k] = string(raw)
			}
			ok = login(ctx, b, d) == nil
		}
		if !ok {
			mu.Lock()
			r.LoginFailures++
			mu.Unlock()
		}
		return nil
	})
	if idle {
		if r.Idle, err = runIdle(ctx, c, s, n); err != nil {
			return nil, fmt.Errorf("idle Tenants: %w", err)
		}
	}
	return r, s.p.Exited()
}

// apiserverRequests is the apiserver's apiserver_request_total by "VERB
// resource" (zero values when it cannot be read).
func apiserverRequests(ctx context.Context, b *benchEnv) map[string]float64 {
	out := map[string]float64{}
	raw, err := b.Kube.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(l, "apiserver_request_total{") {
			continue
		}
		var v float64
		_, _ = fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%g", &v)
		res := label(l, "resource")
		if sub := label(l, "subresource"); sub != "" {
			res += "/" + sub
		}
		out[label(l, "verb")+" "+res] += v
	}
	return out
}

// topRequests is the n largest of m, "VERB resource x.x", and the total.
func topRequests(m map[string]float64, n int) string { return top(m, n, 1) }

// sortedByValue is m's keys, the largest value first (ties by key).
func sortedByValue(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

func numCPU() int { return runtime.NumCPU() }

// reconcilesByController is controller_runtime_reconcile_total of every
// managed-resource controller of the provider, by controller kind
// (database, databasebinding, ...).
func reconcilesByController(addr string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback, short
	if err != nil {
		return out
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	var buf strings.Builder
	_, _ = bufioCopy(&buf, resp)
	for _, l := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(l, "controller_runtime_reconcile_total{") {
			continue
		}
		ctrl := label(l, "controller")
		if !strings.HasPrefix(ctrl, "managed/") {
			continue
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(ctrl, "managed/"), ".")
		var v float64
		_, _ = fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%g", &v)
		out[kind] += v
		out[kind+" "+label(l, "result")] += v
	}
	return out
}

func bufioCopy(w *strings.Builder, resp *http.Response) (int64, error) {
	var n int64
	b := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(b)
		w.Write(b[:k])
		n += int64(k)
		if err != nil {
			return n, nil //nolint:nilerr // EOF or a broken scrape: what was read counts
		}
	}
}

// runTenants runs the Tenant mode and returns its part of the report.
func runTenants(ctx context.Context, c cfg, bin, logDir string) (string, error) {
	var lat *latencyResult
	if c.tenants.runs > 0 {
		fmt.Printf("==> Tenant latency: %d Tenants one at a time (after one cold Tenant), provider flags: defaults%s, --poll=%s (fresh components)\n", c.tenants.runs, extraLabel(c.extra), c.tenants.poll)
		var err error
		if lat, err = withEnv(ctx, c.stackOptions(), func(b *benchEnv) (*latencyResult, error) { return runTenantLatency(ctx, c, b, bin, logDir) }); err != nil {
			return "", fmt.Errorf("tenant latency: %w", err)
		}
	}
	floors := map[int]*tenantFloorResult{}
	var bulks []*bulkResult
	// The idle window follows the largest wave (the last one of that size).
	idleAt := -1
	for i, n := range c.tenants.ns {
		if c.tenants.idle > 0 && (idleAt < 0 || n >= c.tenants.ns[idleAt]) {
			idleAt = i
		}
	}
	for i, n := range c.tenants.ns {
		if c.tenants.floor {
			fmt.Printf("==> Tenant floor, N=%d (fresh components)\n", n)
			roles, err := exampleDataRoles()
			if err != nil {
				return tenantTables(c, lat, floors, bulks), err
			}
			f, err := withEnv(ctx, dbStack, func(b *benchEnv) (*tenantFloorResult, error) { return runTenantFloor(ctx, b, n, roles) })
			if err != nil {
				return tenantTables(c, lat, floors, bulks), fmt.Errorf("tenant floor N=%d: %w", n, err)
			}
			floors[n] = f
			fmt.Printf("    floor %s (%.1f ms/tenant)\n", f.Total.Round(time.Millisecond), ms(f.Total)/float64(n))
		}
		fmt.Printf("==> %d Tenants at once, provider flags: defaults%s (fresh components)\n", n, extraLabel(c.extra))
		r, err := withEnv(ctx, c.stackOptions(), func(b *benchEnv) (*bulkResult, error) { return runTenantBulk(ctx, c, b, bin, logDir, n, i == idleAt) })
		if err != nil {
			return tenantTables(c, lat, floors, bulks), fmt.Errorf("tenants N=%d: %w", n, err)
		}
		line := fmt.Sprintf("    all Secrets after %s", r.Ready.Round(time.Millisecond))
		if f := floors[n]; f != nil {
			line += fmt.Sprintf(" = %.2f× the floor", r.Ready.Seconds()/f.Total.Seconds())
		}
		fmt.Println(line)
		bulks = append(bulks, r)
	}
	return tenantTables(c, lat, floors, bulks), nil
}

func extraLabel(extra []string) string {
	if len(extra) == 0 {
		return ""
	}
	return " plus " + strings.Join(extra, " ")
}

// pct is the nearest-rank percentile q (0..1) of sorted d.
func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	if i < 0 {
		i = 0
	}
	return d[i]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// spread is the durations from → to over the runs, sorted.
func spread(runs [][nEvents]time.Time, from, to tenantEvent) []time.Duration {
	var d []time.Duration
	for _, t := range runs {
		if !t[from].IsZero() && !t[to].IsZero() {
			d = append(d, t[to].Sub(t[from]))
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d
}

func tenantTables(c cfg, lat *latencyResult, floors map[int]*tenantFloorResult, bulks []*bulkResult) string {
	var w strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&w, "Tenant runs measured %s on %s (%d CPUs, %s), provider flags: defaults%s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.NumCPU(), runtime.Version(), extraLabel(c.extra))
	if lat != nil {
		latencyTable(&w, c, lat)
	}
	tenantTargets(&w, floors, bulks)
	tenantBulkTables(&w, floors, bulks)
	idleTable(&w, bulks)
	return w.String()
}

func latencyTable(w *strings.Builder, c cfg, lat *latencyResult) {
	fmt.Fprintf(w, "Tenant latency: %d Tenants one at a time on an otherwise idle stack (--poll=%s), create → login with the Secret\n\n", len(lat.Runs), c.tenants.poll)
	fmt.Fprintf(w, "| hop | p50 | p99 | min | max | first Tenant (cold) |\n|---|---|---|---|---|---|\n")
	row := func(name string, from, to tenantEvent) {
		d := spread(lat.Runs, from, to)
		cold := "–"
		if !lat.Cold[from].IsZero() && !lat.Cold[to].IsZero() {
			cold = secs(lat.Cold[to].Sub(lat.Cold[from]))
		}
		if len(d) == 0 {
			fmt.Fprintf(w, "| %s | – | – | – | – | %s |\n", name, cold)
			return
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", name, secs(pct(d, 0.5)), secs(pct(d, 0.99)), secs(d[0]), secs(d[len(d)-1]), cold)
	}
	row("**total: create → login works**", evCreated, evLogin)
	for _, h := range hops {
		row(h.name, h.from, h.to)
	}
	row("(Tenant Ready in core's view, from create)", evCreated, evTenantReady)
	fmt.Fprintf(w, "\nReconciles per Tenant: %s\n\n", perController(lat.Reconciles))
}

func tenantBulkTables(w *strings.Builder, floors map[int]*tenantFloorResult, bulks []*bulkResult) {

	if len(floors) > 0 {
		fmt.Fprintf(w, "Tenant floor (sequential, one tenant after another: a Database's create work plus the binding's delivery copy)\n\n")
		steps := append(append([]string{}, floorSteps...), tenantFloorSteps...)
		fmt.Fprintf(w, "| N | floor total | per tenant | %s | CPU s (all components; machine busy) |\n|---|---|---|%s---|\n",
			strings.Join(steps, " | "), strings.Repeat("---|", len(steps)))
		for _, n := range sortedKeys(floors) {
			f := floors[n]
			fmt.Fprintf(w, "| %d | %.2f s | %.1f ms |", n, f.Total.Seconds(), ms(f.Total)/float64(n))
			for _, s := range steps {
				fmt.Fprintf(w, " %.1f ms (%.0f%%) |", ms(f.Steps[s])/float64(n), 100*f.Steps[s].Seconds()/f.Total.Seconds())
			}
			fmt.Fprintf(w, " %s |\n", cpuCell(f.CPU, f.Total))
		}
		fmt.Fprintln(w)
		for _, n := range sortedKeys(floors) {
			f := floors[n]
			if f.DataRoles == 0 {
				continue
			}
			var one time.Duration
			var parts []string
			for _, st := range dataRoleSteps {
				one += f.Steps[st]
				parts = append(parts, fmt.Sprintf("%s %.1f ms", st, ms(f.Steps[st])/float64(n*f.DataRoles)))
			}
			fmt.Fprintf(w, "- N=%d floor, one data role (of %d per Tenant): %.1f ms (%s); the owner's part: %.1f ms\n", n, f.DataRoles,
				ms(one)/float64(n*f.DataRoles), strings.Join(parts, ", "), (ms(f.Total)-ms(one))/float64(n))
		}
		fmt.Fprintln(w)
	}
	if len(bulks) > 0 {
		fmt.Fprintf(w, "N Tenants created at once (16 goroutines, unthrottled client), until every Secret exists\n\n")
		fmt.Fprintf(w, "| N | all Secrets | ratio to floor | first / 10%% / 50%% / 90%% Secret | all Tenants Ready (core) | reconciles per Tenant | provider peak RSS | CPU s (all components; machine busy) |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range bulks {
			ratio := "–"
			if f := floors[r.N]; f != nil {
				ratio = fmt.Sprintf("%.2f×", r.Ready.Seconds()/f.Total.Seconds())
			}
			fmt.Fprintf(w, "| %d | %.2f s | %s | %s | %.2f s | %s | %.0f MiB | %s |\n", r.N, r.Ready.Seconds(), ratio, quantiles(r.Each),
				r.TenantReady.Seconds(), perController(r.Reconciles), mib(r.HWM), cpuCell(r.CPU, r.Ready))
		}
		fmt.Fprintln(w)
		for _, r := range bulks {
			var parts []string
			for j, h := range hops[:len(hops)-1] {
				parts = append(parts, fmt.Sprintf("%s %.2f s", strings.SplitN(h.name, ":", 2)[0], r.Hops[j].Seconds()))
			}
			fmt.Fprintf(w, "- N=%d, mean per Tenant: %s; Secrets that did not log in: %d\n", r.N, strings.Join(parts, ", "), r.LoginFailures)
			fmt.Fprintf(w, "- N=%d, apiserver requests per Tenant until all Secrets existed (all clients): %s\n", r.N, topRequests(r.APIRequests, 10))
			if len(r.Clients.ByClient) > 0 {
				fmt.Fprintf(w, "- N=%d, apiserver requests per Tenant until all Secrets existed, by client: %s\n", r.N, topRequests(r.Clients.ByClient, 10))
				fmt.Fprintf(w, "- N=%d, apiserver requests per Tenant until all Secrets existed, by client and request: %s\n", r.N, topRequests(r.Clients.ByClientRequest, 12))
			}
			fmt.Fprintf(w, "- N=%d, renders per Tenant until all Secrets existed (the composition function's): %.1f; until its own Secret existed: %s\n", r.N, r.Renders, spreadInts(r.RendersOwn, r.N))
			fmt.Fprintf(w, "- N=%d, first Secret after %.2f s; CPU-s by component: %s\n", r.N, r.Each[0].Seconds(), cpuGroups(r.CPU))
			bao := "–"
			if r.BaoErr == nil {
				bao = fmt.Sprintf("%.2f per Tenant (%s)", float64(r.Bao.Requests)/float64(r.N), top(scale(intsToFloats(r.Bao.ByOp), float64(r.N)), 6, 2))
				if r.Syncs > 0 {
					bao += fmt.Sprintf(", %.2f per ESO reconcile", float64(r.Bao.Requests)/r.Syncs)
				}
			}
			fmt.Fprintf(w, "- N=%d, until all Secrets existed: ESO reconciles %.2f per Tenant, ESO CPU %.3f s per reconcile; OpenBao requests %s\n", r.N, r.Syncs/float64(r.N), esoPerSync(r.CPU, r.Syncs), bao)
		}
		fmt.Fprintln(w)
	}
}

// functionRenders counts the renders in the composition function's debug
// log (one line each) so far.
func functionRenders(b *benchEnv) int {
	data, err := os.ReadFile(filepath.Join(b.Dir, "function.log"))
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\trendered\t")
}

// perController is "kind total (n result, ...)" per controller.
func perController(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 && !strings.Contains(k, " ") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var rs []string
		for _, res := range []string{"success", "requeue", "requeue_after", "error"} {
			if v := m[k+" "+res]; v > 0 {
				rs = append(rs, fmt.Sprintf("%.1f %s", v, res))
			}
		}
		parts = append(parts, fmt.Sprintf("%s %.1f (%s)", k, m[k], strings.Join(rs, ", ")))
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}
