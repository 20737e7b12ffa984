package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// config is what a run does.
type config struct {
	Seed int64
	// Duration is how long cycles start: each cycle changes the workload,
	// injects one fault or two at once, and waits for convergence.
	Duration time.Duration
	// MaxWave and MaxLive bound the Tenants created at once and alive.
	MaxWave, MaxLive int
	// MaxFault bounds how long one fault lasts (a pause, a seal, a cut).
	MaxFault time.Duration
	// Settle is how long after a fault ends everything must converge.
	Settle time.Duration
	// Kinds are the fault kinds drawn from (kinds.go).
	Kinds []string
	// Namespaces is how many app namespaces the Tenants spread over.
	Namespaces int
	// MinCycles cycles start whatever the time; then, with Cover, cycles
	// go on after Duration until the run has made every kind of change
	// (Tenants created, deleted, rotated, released and rebound) and
	// injected a fault, for at most MaxCycles cycles (0: no bound). So a
	// short run with a fixed seed proves on a loaded machine what it does
	// on an idle one, only later.
	MinCycles, MaxCycles int
	Cover                bool
}

func defaultConfig() config {
	return config{
		Seed: 1, Duration: 30 * time.Minute, MaxWave: 40, MaxLive: 200,
		MaxFault: 20 * time.Second, Settle: 5 * time.Minute, Kinds: allKinds(), Namespaces: 4,
	}
}

// tenant is one Tenant the soak made, as the soak knows it.
type tenant struct {
	NS, Name string
	// DataRole: it asks for a readOnly data role "ro" too.
	DataRole bool
	// Database is its Database object's name, once known.
	Database string
	// Rotations is how many rotations of its Database were asked, and
	// Synced how many of them its Secret was seen logging in after.
	Rotations, Synced int
	// Row: a row was written with its Secret once it was Ready.
	Row bool
	// Deleted: its deletion was asked (reclaim Delete: its database, role
	// and record go with it).
	Deleted bool
	// DBName is its database (and owner role) name on the server.
	DBName string
	// Instance is the server registration it names: DeleteInstance
	// (reclaim Delete) or Instance (reclaim Retain: deleting it releases
	// its Database, which only a rebind hands out again).
	Instance string
	// Static: it names its Database (spec.databaseRef), as a Tenant a
	// Released Database was rebound to does.
	Static bool
}

func (t *tenant) key() string { return t.NS + "/" + t.Name }

// secret is the Secret its app reads.
func (t *tenant) secret() string {
	if t.Static {
		return tenantkit.StaticSecretName(t.Name)
	}
	return tenantkit.InstanceSecretName(t.Instance, t.Name)
}

// soak is one run.
type soak struct {
	e    *testenv.Env
	f    *testenv.Faults
	c    config
	say  func(string, ...any)
	rnd  *rand.Rand
	kube client.Client
	seq  int
	live map[string]*tenant
	gone []*tenant
	// rebinds are the Released Databases on their way to a new Tenant.
	rebinds []*rebind
	// panics are the panic lines reported already.
	panics map[string]bool
	report *Report
}

func newSoak(e *testenv.Env, f *testenv.Faults, c config, say func(string, ...any)) (*soak, error) {
	for _, k := range c.Kinds {
		if _, ok := kinds[k]; !ok {
			return nil, fmt.Errorf("unknown fault kind %q (known: %s)", k, strings.Join(allKinds(), ","))
		}
	}
	cfg := *e.Kube.Config
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := client.New(&cfg, client.Options{Scheme: e.Kube.Client.Scheme()})
	if err != nil {
		return nil, err
	}
	return &soak{
		e: e, f: f, c: c, say: say, kube: kube,
		rnd:    rand.New(rand.NewPCG(uint64(c.Seed), uint64(c.Seed)^0x5eed)), //nolint:gosec // a reproducible choice, not a secret
		live:   map[string]*tenant{},
		panics: map[string]bool{},
		report: newReport(c),
	}, nil
}

// soakGrace is the data roles' grace in the soak.
const soakGrace = 5 * time.Second

// Run soaks until the duration is over, then checks the invariants.
func (s *soak) Run(ctx context.Context) (*Report, error) {
	t0 := time.Now()
	for ns := range s.c.Namespaces {
		if err := s.e.Kube.EnsureServiceAccount(ctx, nsName(ns), testenv.TenantReaderServiceAccount); err != nil {
			return nil, err
		}
	}
	// The data roles' previous logins keep their password for seconds, not
	// minutes, so that the soak sees them ended (and checks that none is
	// left logging in past its grace).
	cpc := &unstructured.Unstructured{}
	cpc.SetAPIVersion(tenantkit.TenantAPI)
	cpc.SetKind("ClusterProviderConfig")
	cpc.SetName(tenantkit.DeleteInstance)
	grace := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"credentialPolicy":{"gracePeriod":"`+soakGrace.String()+`"}}}`))
	if err := retryAPI(ctx, func(ctx context.Context) error { return s.kube.Patch(ctx, cpc, grace) }); err != nil {
		return nil, fmt.Errorf("set the data roles' grace: %w", err)
	}
	// A first wave, undisturbed: the rows written now must outlive every
	// fault that follows.
	if err := s.createWave(ctx, min(s.c.MaxWave, s.c.MaxLive)); err != nil {
		return nil, err
	}
	if _, err := s.converge(ctx, "start"); err != nil {
		return nil, err
	}
	for cycle := 1; s.more(cycle, t0) && ctx.Err() == nil; cycle++ {
		if err := s.cycle(ctx, cycle); err != nil {
			return nil, err
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s.report.Elapsed = time.Since(t0).Round(time.Second).String()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s.report, nil
}

// more reports whether cycle is to start: while Duration lasts, then
// until the run has covered what Cover asks, within MaxCycles.
func (s *soak) more(cycle int, t0 time.Time) bool {
	if s.c.MaxCycles > 0 && cycle > s.c.MaxCycles {
		return false
	}
	if cycle <= s.c.MinCycles || time.Since(t0) < s.c.Duration {
		return true
	}
	return s.c.Cover && len(s.report.uncovered()) > 0
}

// cycle changes the workload, then injects one fault (or two at once, one
// cycle in four) while the change is under way, ends it, and measures how
// long until everything converged.
func (s *soak) cycle(ctx context.Context, n int) error {
	if err := s.workload(ctx); err != nil {
		return err
	}
	picked := []string{s.c.Kinds[s.rnd.IntN(len(s.c.Kinds))]}
	if len(s.c.Kinds) > 1 && s.rnd.IntN(4) == 0 {
		for {
			k := s.c.Kinds[s.rnd.IntN(len(s.c.Kinds))]
			if k != picked[0] && kinds[k].target != kinds[picked[0]].target {
				picked = append(picked, k)
				break
			}
		}
	}
	hold := time.Duration(2+s.rnd.IntN(max(int(s.c.MaxFault/time.Second)-1, 1))) * time.Second
	label := strings.Join(picked, "+")
	s.say("cycle %d: %s for %s with %d live Tenants", n, label, hold, len(s.live))
	var undo []func(context.Context) error
	for _, k := range picked {
		u, err := kinds[k].start(ctx, s.f)
		if err != nil {
			s.report.violation("cycle %d: the fault %s could not be made: %v", n, k, err)
			continue
		}
		s.report.injected(k)
		undo = append(undo, u)
	}
	select {
	case <-ctx.Done():
	case <-time.After(hold):
	}
	for _, u := range undo {
		if err := u(context.WithoutCancel(ctx)); err != nil {
			s.report.violation("cycle %d: ending %s: %v", n, label, err)
		}
	}
	took, err := s.converge(ctx, label)
	if err != nil {
		return err
	}
	s.report.converged(picked, took)
	return s.checkPanics()
}

// workload makes one change: a wave of new Tenants while there is room,
// else deletions or rotations.
func (s *soak) workload(ctx context.Context) error {
	if err := s.advanceRebinds(ctx); err != nil {
		return err
	}
	room := s.c.MaxLive - len(s.live)
	deletable := len(s.candidates(func(t *tenant) bool { return t.Instance == tenantkit.DeleteInstance }))
	switch r := s.rnd.IntN(10); {
	case room > 0 && r < 4:
		return s.createWave(ctx, 1+s.rnd.IntN(min(room, s.c.MaxWave)))
	case r == 4 && len(s.candidates(rebindable)) > 0:
		return s.releaseSome(ctx, 1+s.rnd.IntN(2))
	case r >= 7 && len(s.live) > 0:
		return s.rotateSome(ctx, 1+s.rnd.IntN(min(len(s.live), 3)))
	case deletable > 0:
		return s.deleteSome(ctx, 1+s.rnd.IntN(max(deletable/4, 1)))
	}
	return s.createWave(ctx, 1+s.rnd.IntN(max(min(room, s.c.MaxWave), 1)))
}

func nsName(i int) string { return fmt.Sprintf("soak-%d", i) }

func (s *soak) createWave(ctx context.Context, k int) error {
	for range k {
		s.seq++
		t := &tenant{NS: nsName(s.seq % s.c.Namespaces), Name: fmt.Sprintf("soak-%d", s.seq), DataRole: s.seq%3 == 0, Instance: tenantkit.DeleteInstance}
		t.DBName = strings.ReplaceAll(t.Name, "-", "_")
		// One in four on the Retain registration, without data roles:
		// those are the ones released and rebound.
		if s.seq%4 == 1 && !t.DataRole {
			t.Instance = tenantkit.Instance
		}
		spec := "{instanceRef: " + t.Instance + "}"
		if t.DataRole {
			spec = "{instanceRef: " + t.Instance + ", dataRoles: [{name: ro, access: readOnly}]}"
		}
		u := tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Tenant\nmetadata: {name: %s, namespace: %s}\nspec: %s\n", tenantkit.TenantAPI, t.Name, t.NS, spec))
		if err := retryAPI(ctx, func(ctx context.Context) error { return s.kube.Create(ctx, u) }); err != nil {
			return fmt.Errorf("create Tenant %s: %w", t.key(), err)
		}
		s.live[t.key()] = t
		s.report.Ops.Created++
	}
	return nil
}

// candidates are the live Tenants whose Database is known and that ok
// accepts, in a fixed order (so the seed decides).
func (s *soak) candidates(ok func(*tenant) bool) []*tenant {
	var ts []*tenant
	for _, t := range s.live {
		if t.Database != "" && ok(t) {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b *tenant) int { return strings.Compare(a.key(), b.key()) })
	return ts
}

// pick draws k of the candidates ok accepts.
func (s *soak) pick(k int, ok func(*tenant) bool) []*tenant {
	ts := s.candidates(ok)
	s.rnd.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	return ts[:min(k, len(ts))]
}

func anyTenant(*tenant) bool { return true }

// deleteTenant asks for a Tenant's deletion.
func (s *soak) deleteTenant(ctx context.Context, t *tenant) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(tenantkit.TenantAPI)
	u.SetKind("Tenant")
	u.SetNamespace(t.NS)
	u.SetName(t.Name)
	if err := retryAPI(ctx, func(ctx context.Context) error { return client.IgnoreNotFound(s.kube.Delete(ctx, u)) }); err != nil {
		return fmt.Errorf("delete Tenant %s: %w", t.key(), err)
	}
	return nil
}

// deleteSome deletes k Tenants of the Delete registration: their
// database, roles and record go with them.
func (s *soak) deleteSome(ctx context.Context, k int) error {
	for _, t := range s.pick(k, func(t *tenant) bool { return t.Instance == tenantkit.DeleteInstance }) {
		if err := s.deleteTenant(ctx, t); err != nil {
			return err
		}
		t.Deleted = true
		delete(s.live, t.key())
		s.gone = append(s.gone, t)
		s.report.Ops.Deleted++
	}
	return nil
}

// rotateSome asks the Databases of k Tenants for a new password (the
// admin's spec.credentialRotation, with a new id).
func (s *soak) rotateSome(ctx context.Context, k int) error {
	for _, t := range s.pick(k, anyTenant) {
		id := fmt.Sprintf("soak-%d", t.Rotations+1)
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"credentialRotation":{"id":"`+id+`"}}}`))
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(tenantkit.TenantAPI)
		u.SetKind("Database")
		u.SetName(t.Database)
		if err := retryAPI(ctx, func(ctx context.Context) error { return s.kube.Patch(ctx, u, patch) }); err != nil {
			return fmt.Errorf("rotate Database %s: %w", t.Database, err)
		}
		t.Rotations++
		s.report.Ops.Rotated++
	}
	return nil
}

// retryAPI retries a write while the API server is away (a fault may be
// on it): for up to two minutes.
func retryAPI(ctx context.Context, f func(context.Context) error) error {
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = f(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) {
			return err
		}
	}
	return err
}

// transient: an error of an API server, etcd or network that is away.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	m := err.Error()
	for _, s := range []string{"connection refused", "EOF", "timeout", "etcdserver", "the server is currently unable", "Timeout", "connection reset", "http2", "no route to host", "TLS handshake"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
