package metrics

import (
	"context"
	"sort"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// The state gauges: what an admin must act on, counted from the
// provider's cache. Their labels are a config's name (admin-owned, few), a
// kind and a Ready reason (fixed sets); never a database, role or
// namespace.
var (
	configReadyDesc = prometheus.NewDesc("provider_postgresql_tenant_config_ready",
		"1 when the ClusterProviderConfig (a registered server) is Ready, 0 otherwise; one series per config.",
		[]string{"config"}, nil)
	notReadyDesc = prometheus.NewDesc("provider_postgresql_tenant_not_ready",
		"Databases and DatabaseBindings whose Ready condition is not True, by kind and the condition's reason (Unknown when there is none yet).",
		[]string{"kind", "reason"}, nil)
	releasedDesc = prometheus.NewDesc("provider_postgresql_tenant_released_databases",
		"Databases in the Released phase: their Tenant is gone and an admin decides whether to rebind, keep or delete them.",
		nil, nil)
	overdueDesc = prometheus.NewDesc("provider_postgresql_tenant_credentials_overdue",
		"Data role credentials whose rotation by the credential policy's maxAge is more than an hour late (status.atProvider.dataRoles[].nextRotationAt): their rotation is failing.",
		nil, nil)
)

// OverdueAfter is how late a rotation by age may be before its credential
// counts as overdue: longer than a rotation waits for a previous login's
// grace (ten minutes by default) and a few poll intervals.
const OverdueAfter = time.Hour

// NotReadyKey is one series of the not-Ready gauge.
type NotReadyKey struct {
	Kind, Reason string
}

// Snapshot is the state the gauges show, taken at one moment.
type Snapshot struct {
	// ConfigReady is, per ClusterProviderConfig name, whether it is Ready.
	ConfigReady map[string]bool
	// NotReady counts the Databases and DatabaseBindings not Ready.
	NotReady map[NotReadyKey]int
	// Released counts the Released Databases.
	Released int
	// Overdue counts the data role credentials whose rotation by age is
	// more than OverdueAfter late.
	Overdue int
}

// unknownReason stands for a Ready condition without a reason (a resource
// not looked at yet).
const unknownReason = "Unknown"

// TakeSnapshot counts what the gauges show from the configs, Databases and
// DatabaseBindings at now (pure: the caller lists them).
func TakeSnapshot(now time.Time, configs []v1alpha1.ClusterProviderConfig, dbs []v1alpha1.Database, bindings []v1alpha1.DatabaseBinding) Snapshot {
	s := Snapshot{ConfigReady: map[string]bool{}, NotReady: map[NotReadyKey]int{}}
	for i := range configs {
		s.ConfigReady[configs[i].GetName()] = configs[i].GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue
	}
	notReady := func(kind string, c xpv2.Condition) {
		if c.Status == corev1.ConditionTrue {
			return
		}
		r := string(c.Reason)
		if r == "" {
			r = unknownReason
		}
		s.NotReady[NotReadyKey{Kind: kind, Reason: r}]++
	}
	for i := range dbs {
		notReady(v1alpha1.DatabaseKind, dbs[i].GetCondition(xpv2.TypeReady))
		if dbs[i].Status.Binding.Phase == v1alpha1.BindingReleased {
			s.Released++
		}
		for _, r := range dbs[i].Status.AtProvider.DataRoles {
			if r.NextRotationAt != nil && now.Sub(r.NextRotationAt.Time) > OverdueAfter {
				s.Overdue++
			}
		}
	}
	for i := range bindings {
		notReady(v1alpha1.DatabaseBindingKind, bindings[i].GetCondition(xpv2.TypeReady))
	}
	return s
}

// State exports the last Snapshot as gauges. Until the first one is taken
// it exports nothing, so a replica that has not looked yet cannot claim
// that nothing needs attention.
type State struct {
	mu    sync.Mutex
	snap  Snapshot
	taken bool
}

// StateGauges is the provider's State, registered with the metrics
// registry.
var StateGauges = &State{}

// Set replaces the snapshot the gauges show.
func (s *State) Set(snap Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap, s.taken = snap, true
}

// Describe implements prometheus.Collector.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	ch <- configReadyDesc
	ch <- notReadyDesc
	ch <- releasedDesc
	ch <- overdueDesc
}

// Collect implements prometheus.Collector.
func (s *State) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.taken {
		return
	}
	names := make([]string, 0, len(s.snap.ConfigReady))
	for n := range s.snap.ConfigReady {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := 0.0
		if s.snap.ConfigReady[n] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(configReadyDesc, prometheus.GaugeValue, v, n)
	}
	for k, n := range s.snap.NotReady {
		ch <- prometheus.MustNewConstMetric(notReadyDesc, prometheus.GaugeValue, float64(n), k.Kind, k.Reason)
	}
	ch <- prometheus.MustNewConstMetric(releasedDesc, prometheus.GaugeValue, float64(s.snap.Released))
	ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, float64(s.snap.Overdue))
}

// StateRecorder takes a Snapshot from the cache every Interval. It runs on
// every replica, leader or not: each exports the same state, so the
// gauges do not vanish while the Lease changes hands.
type StateRecorder struct {
	Cache    client.Reader
	Interval time.Duration
	State    *State
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (r *StateRecorder) NeedLeaderElection() bool { return false }

// Start records until ctx is done.
func (r *StateRecorder) Start(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		// An error (the cache not synced yet, or stopping) keeps the last
		// snapshot until the next tick.
		_ = r.record(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (r *StateRecorder) record(ctx context.Context) error {
	cfgs, dbs, bs := &v1alpha1.ClusterProviderConfigList{}, &v1alpha1.DatabaseList{}, &v1alpha1.DatabaseBindingList{}
	for _, l := range []client.ObjectList{cfgs, dbs, bs} {
		if err := r.Cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return err
		}
	}
	r.State.Set(TakeSnapshot(time.Now(), cfgs.Items, dbs.Items, bs.Items))
	return nil
}
