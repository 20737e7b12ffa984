package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// startProvider starts the provider (testenv.StartProvider) as the
// benchmark runs it: its log in logFile, the given poll interval, rate
// (0: the provider's default) and extra flags, leader election on as in a
// cluster.
func startProvider(ctx context.Context, b *benchEnv, bin, logFile string, poll time.Duration, rate int, pprof bool, extra []string) (*testenv.Provider, error) {
	var args []string
	if rate > 0 {
		args = append(args, "--max-reconcile-rate="+strconv.Itoa(rate))
	}
	return testenv.StartProvider(ctx, b.Env, testenv.ProviderOptions{
		Bin: bin, LogFile: logFile, Poll: poll, Pprof: pprof, LeaderElection: true, Args: append(args, extra...),
	})
}

// applyConfig creates the admin Secret and the ClusterProviderConfig from
// examples/provider, pointed at the local server (as hack/devenv does), and
// waits until the config is Ready.
func applyConfig(ctx context.Context, b *benchEnv, p *testenv.Provider) error {
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "provider"))
	if err != nil {
		return err
	}
	if err := b.Kube.EnsureNamespace(ctx, testenv.ProviderNamespace); err != nil {
		return err
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].GetKind() == "Secret" && objs[j].GetKind() != "Secret" })
	for _, o := range objs {
		switch o.GetKind() {
		case "DeploymentRuntimeConfig", "ManagedResourceActivationPolicy":
			continue // how Crossplane runs and activates the provider in a cluster; here it is a process
		case "Secret":
			sd := map[string]any{"username": b.Postgres.AdminUser, "password": b.Postgres.AdminPassword}
			if err := unstructured.SetNestedMap(o.Object, sd, "stringData"); err != nil {
				return err
			}
		case v1alpha1.ClusterProviderConfigKind:
			ep := map[string]any{"host": b.Postgres.Host, "hostaddr": b.Postgres.Hostaddr, "port": int64(b.Postgres.Port)}
			if err := unstructured.SetNestedMap(o.Object, ep, "spec", "endpoint"); err != nil {
				return err
			}
		}
		if err := b.kube.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cpc := &v1alpha1.ClusterProviderConfig{}
		if err := b.kube.Get(ctx, client.ObjectKey{Name: "shared"}, cpc); err == nil && cpc.Status.Phase == v1alpha1.ConfigPhaseReady {
			return nil
		}
		if err := p.Exited(); err != nil {
			return err
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("clusterproviderconfig/shared not Ready within 2 minutes; provider log: %s", p.LogFile)
}

// databaseName is the i-th benchmark Database's name (also its PostgreSQL
// database and role name).
func databaseName(i int) string { return fmt.Sprintf("t%04d", i) }

// createDatabases creates n Databases like examples/database/database.yaml
// (pg_trgm, the ClusterProviderConfig "shared") at once, from 16 goroutines.
func createDatabases(ctx context.Context, b *benchEnv, n int) error {
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "database", "database.yaml"))
	if err != nil {
		return err
	}
	if len(objs) != 1 || objs[0].GetKind() != v1alpha1.DatabaseKind {
		return errors.New("examples/database/database.yaml must hold exactly one Database")
	}
	tmpl := objs[0]
	// The example is reserved for one Tenant; the benchmark's are not.
	unstructured.RemoveNestedField(tmpl.Object, "spec", "claimRef")
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				o := tmpl.DeepCopy()
				o.SetName(databaseName(i))
				if err := unstructured.SetNestedField(o.Object, databaseName(i), "spec", "forProvider", "database"); err != nil {
					errs <- err
					continue
				}
				if err := b.kube.Create(ctx, o); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// waitAllReady watches the Databases until all n are Ready=True and
// returns when that was first seen; seen records when each one was first
// seen Ready. It watches rather than lists in a loop: listing every 200 ms
// cost the apiserver as much CPU as the provider's own writes and made the
// provider look slower than it is.
func waitAllReady(ctx context.Context, b *benchEnv, p *testenv.Provider, n int, timeout time.Duration, seen map[string]time.Time) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	notReady := map[string]string{}
	note := func(d *v1alpha1.Database) {
		c := d.GetCondition(xpv2.TypeReady)
		if c.Status == corev1.ConditionTrue {
			delete(notReady, d.Name)
			if _, ok := seen[d.Name]; !ok {
				seen[d.Name] = time.Now()
			}
			return
		}
		if _, ok := seen[d.Name]; !ok {
			notReady[d.Name] = string(c.Reason)
		}
	}
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	// List, then watch from the list's version; when the watch ends or
	// reports an error (the apiserver may close it), list and watch again.
	for len(seen) < n {
		if err := waitWatch(ctx, b, p, n, seen, notReady, note, tick); err != nil {
			return time.Time{}, fmt.Errorf("%w; provider log: %s", err, p.LogFile)
		}
		if len(seen) < n {
			fmt.Printf("      (the watch ended at %d/%d Ready; listing again)\n", len(seen), n)
			_ = sleep(ctx, 200*time.Millisecond) // ctx is checked by the next waitWatch
		}
	}
	last := time.Time{}
	for _, t := range seen {
		if t.After(last) {
			last = t
		}
	}
	return last, nil
}

// waitWatch lists the Databases and watches them from that version until
// all n are seen Ready (nil), the watch ends or fails (nil: the caller lists
// again), or ctx ends (an error).
func waitWatch(ctx context.Context, b *benchEnv, p *testenv.Provider, n int, seen map[string]time.Time, notReady map[string]string, note func(*v1alpha1.Database), tick *time.Ticker) error {
	late := func() error {
		return fmt.Errorf("only %d/%d Databases Ready in time (not ready by reason: %v)", len(seen), n, countReasons(notReady))
	}
	l := &v1alpha1.DatabaseList{}
	if err := b.kube.List(ctx, l); err != nil {
		if ctx.Err() != nil {
			return late()
		}
		return nil
	}
	for i := range l.Items {
		note(&l.Items[i])
	}
	w, err := b.kube.Watch(ctx, &v1alpha1.DatabaseList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
	if err != nil {
		if ctx.Err() != nil {
			return late()
		}
		return nil
	}
	defer w.Stop()
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil
			}
			if d, ok := ev.Object.(*v1alpha1.Database); ok {
				note(d)
			}
		case <-tick.C:
			if err := p.Exited(); err != nil {
				return err
			}
			fmt.Printf("      %d/%d Ready (not ready: %v)\n", len(seen), n, countReasons(notReady))
			if len(notReady) > 0 && len(notReady) <= stragglers {
				// The last few: what their status says, so that one that
				// hangs can be told from one that is slow.
				fmt.Println(describeNotReady(ctx, b))
			}
		case <-ctx.Done():
			return late()
		}
	}
	return nil
}

func countReasons(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, r := range m {
		out[r]++
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// stragglers is how many Databases not Ready yet are described at each
// progress line.
const stragglers = 5

// describeNotReady describes up to stragglers Databases that are not Ready:
// age, phase, both conditions and when they last changed.
func describeNotReady(ctx context.Context, b *benchEnv) string {
	l := &v1alpha1.DatabaseList{}
	if err := b.kube.List(ctx, l); err != nil {
		return err.Error()
	}
	var out []string
	for i := range l.Items {
		d := &l.Items[i]
		r, s := d.GetCondition(xpv2.TypeReady), d.GetCondition(xpv2.TypeSynced)
		if r.Status != corev1.ConditionTrue && len(out) < stragglers {
			out = append(out, fmt.Sprintf("        %s (age %s, phase %s): Ready=%s %s %q (since %s); Synced=%s %s %q (since %s)",
				d.Name, time.Since(d.CreationTimestamp.Time).Round(time.Second), d.Status.AtProvider.Phase,
				r.Status, r.Reason, r.Message, r.LastTransitionTime.Format(time.TimeOnly),
				s.Status, s.Reason, s.Message, s.LastTransitionTime.Format(time.TimeOnly)))
		}
	}
	return strings.Join(out, "\n")
}
