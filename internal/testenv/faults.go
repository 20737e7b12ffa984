package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Fault targets: what Faults can kill, restart, pause and resume.
const (
	// TargetAPIServer is envtest's kube-apiserver.
	TargetAPIServer = "kube-apiserver"
	// TargetEtcd is envtest's etcd.
	TargetEtcd = "etcd"
	// TargetPostgres is the suite's PostgreSQL server: its postmaster and
	// every process it forked (backends, background workers).
	TargetPostgres = "postgresql"
	// TargetOpenBao is the OpenBao server.
	TargetOpenBao = "openbao"
	// TargetESO is the External Secrets Operator's controller process.
	TargetESO = "eso"
	// TargetCrossplane is Crossplane core's process (not its RBAC manager).
	TargetCrossplane = "crossplane"
	// TargetFunction is the composition function's Pod (its
	// package-runtime container), with Options.Node and NodeConfiguration.
	TargetFunction = "function"
	// TargetProvider is the provider's Pod (its package-runtime
	// container), with Options.Node.
	TargetProvider = "provider"
)

// allTargets is every target, in the order Targets lists them.
var allTargets = []string{TargetAPIServer, TargetEtcd, TargetPostgres, TargetOpenBao, TargetESO, TargetCrossplane, TargetFunction, TargetProvider}

// faultsTable is the nftables table CutNetwork adds to the node's private
// network namespace (and RestoreNetwork removes).
const faultsTable = "ppt_faults"

// Faults injects faults into a running environment, for a chaos soak: it
// kills, restarts, pauses and resumes its components, seals OpenBao and
// cuts the node's Pod network. It finds every process through the
// harness's own handles (the processes it started, the Pods' containers
// as the node's containerd reports them, and envtest's etcd and
// kube-apiserver among this process's children) and their descendants;
// it never signals anything else, and it changes the network of the
// node's private namespace only.
//
// A killed or restarted host process is started again by the harness as
// its supervisor would, with the same command line, configuration and
// data; from then on the harness owns it (Env.Stop stops it). A killed
// Pod container is restarted by the kubelet as on any node: the first
// time at once, each later time after its crash-loop back-off (10 s,
// doubling up to 5 min, forgotten after 10 min of running).
//
// Close it when done: it resumes what is paused and restores the network.
// The methods may be called from several goroutines, but one fault at a
// time per target, and not Healthy while a Kill or Restart runs (they
// replace the harness's process handles). When ctx ends before a killed
// target serves again, the target has been started but may not serve
// yet (OpenBao may still be sealed: Unseal); Healthy tells.
type Faults struct {
	e *Env
	// fn is the Function whose Pod TargetFunction is ("" without one).
	fn      string
	targets []string
	// ctl are etcd and the kube-apiserver, by target.
	ctl map[string]*ctlProc

	mu sync.Mutex
	// paused are the processes Pause stopped, by target.
	paused map[string][]procRef
	// cut: CutNetwork's table is in place.
	cut bool
	// tasks caches the PIDs of the Pods' containers, by container ID.
	tasks map[string]procRef
}

// NewFaults returns the faults of a started environment: its targets are
// the components it runs (Targets).
func NewFaults(ctx context.Context, e *Env) (*Faults, error) {
	if e == nil {
		return nil, errors.New("NewFaults: no environment")
	}
	f := &Faults{e: e, ctl: map[string]*ctlProc{}, paused: map[string][]procRef{}, tasks: map[string]procRef{}}
	if e.Kube != nil {
		for _, t := range []string{TargetAPIServer, TargetEtcd} {
			c, err := newCtlProc(e, t)
			if err != nil {
				return nil, err
			}
			f.ctl[t] = c
		}
		f.targets = append(f.targets, TargetAPIServer, TargetEtcd)
	}
	if e.Postgres != nil {
		f.targets = append(f.targets, TargetPostgres)
	}
	if e.OpenBao != nil {
		f.targets = append(f.targets, TargetOpenBao)
	}
	if e.ESO != nil {
		f.targets = append(f.targets, TargetESO)
	}
	if e.Crossplane != nil {
		f.targets = append(f.targets, TargetCrossplane)
	}
	if e.Node != nil && e.Crossplane != nil {
		// The function runs as a Pod only when the Configuration was
		// installed on the node (Options.NodeConfiguration): then its
		// Function object has an active revision.
		for _, fn := range TenantFunctions {
			if fn.Source == "" {
				continue
			}
			if _, err := activeRevisionOf(ctx, e.Kube.Client, "FunctionRevision", fn.Name); err == nil {
				f.fn = fn.Name
				f.targets = append(f.targets, TargetFunction)
				break
			}
		}
		if e.Crossplane.ProviderRevision != "" {
			f.targets = append(f.targets, TargetProvider)
		}
	}
	return f, nil
}

// Targets lists what this environment can fault, in a fixed order.
func (f *Faults) Targets() []string { return slices.Clone(f.targets) }

// check returns an error unless target is one of f's.
func (f *Faults) check(target string) error {
	if slices.Contains(f.targets, target) {
		return nil
	}
	if !slices.Contains(allTargets, target) {
		return fmt.Errorf("unknown fault target %q (known: %s)", target, strings.Join(allTargets, ", "))
	}
	var why string
	switch target {
	case TargetProvider:
		why = "the provider runs as a Pod only with Options.Node and Crossplane (the provider's Pod of InstallProviderPod)"
	case TargetFunction:
		why = "the function runs as a Pod only with Options.Node, Crossplane and NodeConfiguration"
	case TargetAPIServer, TargetEtcd:
		why = "it runs only with Options.Kube"
	case TargetPostgres:
		why = "it runs only with Options.Postgres"
	case TargetOpenBao:
		why = "it runs only with Options.OpenBao"
	case TargetESO:
		why = "it runs only with Options.ESO"
	case TargetCrossplane:
		why = "it runs only with Options.Crossplane"
	}
	return fmt.Errorf("fault target %q is not in this environment: %s (targets: %s)", target, why, strings.Join(f.targets, ", "))
}

func isPod(target string) bool { return target == TargetProvider || target == TargetFunction }

// Kill SIGKILLs every process of the target (for a Pod: its container's;
// for PostgreSQL: the postmaster and all its children; the processes are
// stopped first, so that none forks meanwhile) and brings it back the way
// its real supervisor would: a Pod's container is restarted by the
// kubelet, and Kill waits until a new container of it runs and the Pod is
// Ready; a host process is started again by the harness with the same
// command line and data (PostgreSQL recovers from the crash; OpenBao
// starts sealed and is unsealed with the key the harness kept; etcd and
// the kube-apiserver keep envtest's arguments and etcd its data
// directory). It returns once the target serves again, or with ctx's
// error. What Pause stopped of the target goes with it.
func (f *Faults) Kill(ctx context.Context, target string) error {
	if err := f.check(target); err != nil {
		return err
	}
	if isPod(target) {
		return f.stopPod(ctx, target, false)
	}
	return f.stopHost(ctx, target, false)
}

// Restart stops the target gracefully, as a rolling restart would, then
// brings it back as Kill does. For a Pod, its container's main process
// gets SIGTERM and, after the Pod's termination grace period, every
// process of the container SIGKILL; the kubelet restarts it in place. For
// a host process: SIGTERM, and SIGKILL after 20 s (envtest's stop
// timeout); PostgreSQL gets SIGINT (fast shutdown), as the official
// postgres image's STOPSIGNAL has it: SIGTERM (smart shutdown) waits for
// every client to disconnect, which a connection pool never does. The
// kube-apiserver, on SIGTERM, stops listening and drains its short
// requests at once but then waits for the connections that hold watches
// (up to its 60 s request timeout): while clients watch it, it gets the
// SIGKILL after 20 s, as a static Pod's does after its grace period. etcd
// takes a few seconds to close its clients' streams. A paused target is
// resumed first.
func (f *Faults) Restart(ctx context.Context, target string) error {
	if err := f.check(target); err != nil {
		return err
	}
	if isPod(target) {
		return f.stopPod(ctx, target, true)
	}
	return f.stopHost(ctx, target, true)
}

// Pause SIGSTOPs every process of the target: the host process and its
// descendants (for PostgreSQL: the postmaster and all its children), or
// every process of a Pod's container (its processes keep running as far
// as the kubelet knows: a liveness probe, if the Pod has one, may restart
// the container). Connections to it hang, as in a network outage. Resume
// (or Close) continues them. Pausing a paused target stops what it forked
// since.
func (f *Faults) Pause(target string) error {
	if err := f.check(target); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid, err := f.pid(ctx, target)
	if err != nil {
		return err
	}
	refs, err := stopTree(pid)
	f.mu.Lock()
	f.paused[target] = append(f.paused[target], refs...)
	f.mu.Unlock()
	if err != nil {
		return errors.Join(fmt.Errorf("pausing %s: %w", target, err), f.Resume(target))
	}
	waitStopped(refs, 2*time.Second)
	return nil
}

// Resume SIGCONTs what Pause stopped of the target; nothing when it is not
// paused.
func (f *Faults) Resume(target string) error {
	if err := f.check(target); err != nil {
		return err
	}
	return resumeRefs(f.takePaused(target))
}

// takePaused forgets, and returns, what Pause stopped of target.
func (f *Faults) takePaused(target string) []procRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	refs := f.paused[target]
	delete(f.paused, target)
	return refs
}

// resumeRefs SIGCONTs refs, the last stopped first.
func resumeRefs(refs []procRef) error {
	var errs []error
	for i := len(refs) - 1; i >= 0; i-- {
		if err := refs[i].signal(syscall.SIGCONT); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Seal seals OpenBao (sys/seal, with the harness's root token): every
// request but the seal status fails until Unseal.
func (f *Faults) Seal(ctx context.Context) error {
	if err := f.check(TargetOpenBao); err != nil {
		return err
	}
	b := f.e.OpenBao
	c, err := b.Client(b.RootToken)
	if err != nil {
		return err
	}
	if err := c.Sys().SealWithContext(ctx); err != nil {
		return fmt.Errorf("sealing openbao: %w", err)
	}
	st, err := c.Sys().SealStatusWithContext(ctx)
	if err != nil {
		return err
	}
	if !st.Sealed {
		return errors.New("openbao is not sealed after sys/seal")
	}
	return nil
}

// Unseal unseals OpenBao with the key the harness kept and waits until it
// is active again.
func (f *Faults) Unseal(ctx context.Context) error {
	if err := f.check(TargetOpenBao); err != nil {
		return err
	}
	return unsealOpenBao(ctx, f.e.OpenBao)
}

// unsealOpenBao unseals b and waits until it is active and answers its
// root token.
func unsealOpenBao(ctx context.Context, b *OpenBao) error {
	c, err := b.Client("")
	if err != nil {
		return err
	}
	st, err := c.Sys().SealStatusWithContext(ctx)
	if err != nil {
		return err
	}
	if st.Sealed {
		if _, err := c.Sys().UnsealWithContext(ctx, b.unseal); err != nil {
			return fmt.Errorf("unsealing openbao: %w", err)
		}
	}
	return WaitFor(ctx, 0, func(ctx context.Context) error { return openBaoActive(ctx, b) })
}

// openBaoActive is an error unless OpenBao is unsealed, active, and lists
// its mounts for the root token.
func openBaoActive(ctx context.Context, b *OpenBao) error {
	c, err := b.Client(b.RootToken)
	if err != nil {
		return err
	}
	h, err := c.Sys().HealthWithContext(ctx)
	if err != nil {
		return err
	}
	if !h.Initialized || h.Sealed || h.Standby {
		return fmt.Errorf("openbao: initialized %v, sealed %v, standby %v", h.Initialized, h.Sealed, h.Standby)
	}
	_, err = c.Sys().ListMountsWithContext(ctx)
	return err
}

// CutNetwork cuts the node's Pod network: an nftables table in the node's
// private network namespace drops every packet that comes in from the
// Pods' bridge (cni0) or goes out on it, before connection tracking, so
// that the Pods reach nothing (the kube-apiserver, PostgreSQL, OpenBao,
// the node's DNS) and nothing reaches them (core's calls to the function,
// the kubelet's probes), established connections included. The host's
// network is never touched: it refuses outside the namespace NodeMain
// made. Only with Options.Node; RestoreNetwork (or Close) undoes it.
func (f *Faults) CutNetwork() error {
	if err := f.nodeNetwork(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := nft(cutRuleset()); err != nil {
		return err
	}
	f.cut = true
	return nil
}

// RestoreNetwork removes what CutNetwork added; nothing when the network
// is not cut.
func (f *Faults) RestoreNetwork() error {
	if err := f.nodeNetwork(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := nft(restoreRuleset()); err != nil {
		return err
	}
	f.cut = false
	return nil
}

func (f *Faults) nodeNetwork() error {
	if f.e.Node == nil {
		return errors.New("the Pod network can be cut only with Options.Node: there are no Pods without it")
	}
	// The rules go into this process's network namespace: it must be the
	// node's private one.
	if err := privateNetns(); err != nil {
		return fmt.Errorf("not changing the network of this namespace: %w", err)
	}
	return nil
}

// cutRuleset is the nft script of CutNetwork: it replaces faultsTable (an
// add then a delete make the delete succeed when there is none), all in
// one transaction.
func cutRuleset() string {
	return restoreRuleset() + fmt.Sprintf(`table inet %[1]s {
	chain from-pods {
		type filter hook prerouting priority -300; policy accept;
		iifname "cni0" drop
	}
	chain to-pods {
		type filter hook postrouting priority -300; policy accept;
		oifname "cni0" drop
	}
}
`, faultsTable)
}

// restoreRuleset is the nft script of RestoreNetwork: it removes
// faultsTable whether or not it is there.
func restoreRuleset() string {
	return fmt.Sprintf("add table inet %[1]s\ndelete table inet %[1]s\n", faultsTable)
}

// nft runs an nft script in this process's network namespace.
func nft(script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w\n%s", err, out)
	}
	return nil
}

// Healthy waits until every target serves: the kube-apiserver's /readyz
// and etcd's /health answer OK, PostgreSQL accepts a superuser connection,
// OpenBao is unsealed and active, ESO's and Crossplane core's processes
// run (not stopped) and answer (ESO's metrics, core's /readyz), and the
// provider's and function's Pods are Ready with their container running
// (not stopped). It fails at once while a fault of f holds (a pause, a
// cut network), and otherwise with the last failure when ctx ends.
func (f *Faults) Healthy(ctx context.Context) error {
	if held := f.held(); held != "" {
		return errors.New(held + ": end it first")
	}
	for {
		err := f.healthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy (%w): %w", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// held says which faults of f hold ("" when none).
func (f *Faults) held() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var h []string
	for _, t := range allTargets {
		if len(f.paused[t]) > 0 {
			h = append(h, t+" is paused")
		}
	}
	if f.cut {
		h = append(h, "the Pod network is cut")
	}
	return strings.Join(h, ", ")
}

// healthy checks every target once, all at once.
func (f *Faults) healthy(ctx context.Context) error {
	errs := make([]error, len(f.targets))
	var wg sync.WaitGroup
	for i, t := range f.targets {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := f.serves(cctx, t); err != nil {
				errs[i] = fmt.Errorf("%s: %w", t, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serves is an error unless target serves.
func (f *Faults) serves(ctx context.Context, target string) error {
	if !isPod(target) {
		pid, err := f.hostPid(target)
		if err != nil {
			return err
		}
		if err := notStopped(pid); err != nil {
			return err
		}
	}
	switch target {
	case TargetAPIServer, TargetEtcd:
		return f.ctl[target].ready(ctx)
	case TargetPostgres:
		c, err := f.e.Postgres.SuperConn(ctx, "postgres")
		if err != nil {
			return err
		}
		return c.Close(ctx)
	case TargetOpenBao:
		return openBaoActive(ctx, f.e.OpenBao)
	case TargetESO:
		return httpOK(ctx, "http://"+f.e.ESO.MetricsAddr+"/metrics")
	case TargetCrossplane:
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", f.e.Crossplane.healthPort))
	case TargetProvider, TargetFunction:
		pod, st, err := f.pod(ctx, target)
		if err != nil {
			return err
		}
		if err := runningReady(pod, nil); err != nil {
			return err
		}
		if !st.Ready || st.State.Running == nil {
			return fmt.Errorf("pod %s: its container is not running and ready", pod.Name)
		}
		pid, err := f.taskPid(ctx, st)
		if err != nil {
			return err
		}
		return notStopped(pid)
	}
	return fmt.Errorf("unknown fault target %q", target)
}

// Close resumes everything Pause stopped and restores the network. It may
// be called more than once.
func (f *Faults) Close() {
	f.mu.Lock()
	var all []procRef
	for _, t := range allTargets {
		all = append(all, f.paused[t]...)
	}
	clear(f.paused)
	cut := f.cut
	f.mu.Unlock()
	_ = resumeRefs(all)
	if cut {
		_ = f.RestoreNetwork()
	}
}

// pid returns the main process of target: a host process's, or the
// container init of a Pod's.
func (f *Faults) pid(ctx context.Context, target string) (int, error) {
	if !isPod(target) {
		return f.hostPid(target)
	}
	_, st, err := f.pod(ctx, target)
	if err != nil {
		return 0, err
	}
	return f.taskPid(ctx, st)
}

// hostPid returns a host target's process, from the harness's handle.
func (f *Faults) hostPid(target string) (int, error) {
	var p *process
	switch target {
	case TargetAPIServer, TargetEtcd:
		return f.ctl[target].current()
	case TargetPostgres:
		p = f.e.Postgres.proc
	case TargetOpenBao:
		p = f.e.OpenBao.proc
	case TargetESO:
		p = f.e.ESO.proc
	case TargetCrossplane:
		p = f.e.Crossplane.proc
	default:
		return 0, fmt.Errorf("%s is no host process", target)
	}
	if p == nil || p.exited() {
		return 0, fmt.Errorf("%s is not running", target)
	}
	return p.cmd.Process.Pid, nil
}

// stopHost kills (graceful: stops) a host target and starts it again.
func (f *Faults) stopHost(ctx context.Context, target string, graceful bool) error {
	pid, err := f.hostPid(target)
	if err != nil {
		return err
	}
	paused := f.takePaused(target)
	var gone []procRef
	if graceful {
		if err := resumeRefs(paused); err != nil {
			return err
		}
		// What it has forked, to kill if it outlives a stop that ended
		// with SIGKILL.
		gone = treeRefs(pid)
		switch target {
		case TargetPostgres:
			f.e.Postgres.Stop()
		case TargetOpenBao:
			f.e.OpenBao.Stop()
		case TargetESO:
			f.e.ESO.Stop()
		case TargetCrossplane:
			f.e.Crossplane.proc.stop(syscall.SIGTERM)
		case TargetAPIServer, TargetEtcd:
			f.ctl[target].stop()
		}
		for _, r := range gone {
			_ = r.signal(syscall.SIGKILL)
		}
	} else {
		refs, err := stopTree(pid)
		for _, r := range refs {
			if kerr := r.signal(syscall.SIGKILL); kerr != nil && err == nil {
				err = kerr
			}
		}
		if err != nil {
			// Whatever could not be killed is stopped: Close resumes it.
			f.mu.Lock()
			f.paused[target] = append(f.paused[target], append(paused, refs...)...)
			f.mu.Unlock()
			return fmt.Errorf("killing %s: %w", target, err)
		}
		gone = refs
	}
	// Stopped processes that left the tree meanwhile continue.
	_ = resumeRefs(paused)
	// As a supervisor would, start it again whatever ctx says: killed
	// processes are gone within moments.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	err = waitGone(gctx, gone)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	return f.startHost(ctx, target)
}

// startHost starts a host target again, as it was started, and waits
// until it serves.
func (f *Faults) startHost(ctx context.Context, target string) error {
	switch target {
	case TargetPostgres:
		return f.e.Postgres.Start(ctx)
	case TargetOpenBao:
		b := f.e.OpenBao
		if err := b.start(ctx); err != nil {
			return err
		}
		if err := unsealOpenBao(ctx, b); err != nil {
			return fmt.Errorf("%w\n%s", err, Tail(b.logFile, 20))
		}
		return nil
	case TargetESO:
		e := f.e.ESO
		if err := e.Start(); err != nil {
			return err
		}
		return WaitFor(ctx, 0, func(ctx context.Context) error {
			if e.proc.exited() {
				return Permanent(errors.New("external-secrets exited:\n" + Tail(e.logFile, 20)))
			}
			return httpOK(ctx, "http://"+e.MetricsAddr+"/metrics")
		})
	case TargetCrossplane:
		return f.e.Crossplane.startCore(ctx)
	case TargetAPIServer, TargetEtcd:
		return f.ctl[target].start(ctx)
	}
	return fmt.Errorf("%s is no host process", target)
}

// pod returns target's Pod and the status of its package-runtime
// container.
func (f *Faults) pod(ctx context.Context, target string) (*corev1.Pod, corev1.ContainerStatus, error) {
	x, c := f.e.Crossplane, f.e.Kube.Client
	var pod *corev1.Pod
	var err error
	if target == TargetProvider {
		pod, err = x.ProviderPod(ctx, c)
	} else {
		pod, err = x.FunctionPod(ctx, c, f.fn)
	}
	if err != nil {
		return nil, corev1.ContainerStatus{}, err
	}
	sts := pod.Status.ContainerStatuses
	for _, s := range sts {
		if s.Name == runtimeContainerName || len(sts) == 1 {
			return pod, s, nil
		}
	}
	return nil, corev1.ContainerStatus{}, fmt.Errorf("pod %s has no status of its %s container", pod.Name, runtimeContainerName)
}

// taskPid returns the PID of a running container's init process, from
// the node's containerd (cached by container ID while that process
// lives).
func (f *Faults) taskPid(ctx context.Context, st corev1.ContainerStatus) (int, error) {
	if st.State.Running == nil || st.ContainerID == "" {
		return 0, fmt.Errorf("container %s is not running", st.Name)
	}
	id := strings.TrimPrefix(st.ContainerID, "containerd://")
	f.mu.Lock()
	r, ok := f.tasks[id]
	f.mu.Unlock()
	if ok && r.alive() {
		return r.PID, nil
	}
	pid, err := f.e.Node.TaskPid(ctx, id)
	if err != nil {
		return 0, err
	}
	info, ok := readProcInfo(pid)
	if !ok {
		return 0, fmt.Errorf("container %s: its process %d is gone", id, pid)
	}
	f.mu.Lock()
	f.tasks[id] = procRef{PID: pid, Start: info.Start}
	f.mu.Unlock()
	return pid, nil
}

// stopPod kills (graceful: stops) a Pod's container and waits until the
// kubelet has restarted it and the Pod is Ready.
func (f *Faults) stopPod(ctx context.Context, target string, graceful bool) error {
	pod, st, err := f.pod(ctx, target)
	if err != nil {
		return err
	}
	pid, err := f.taskPid(ctx, st)
	if err != nil {
		return err
	}
	paused := f.takePaused(target)
	if graceful {
		if err := resumeRefs(paused); err != nil {
			return err
		}
		grace := 30 * time.Second
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		// As the kubelet stops a container: SIGTERM to its init process,
		// SIGKILL to all of it after the grace period.
		refs := treeRefs(pid)
		if len(refs) == 0 {
			return fmt.Errorf("%s: container process %d is gone", target, pid)
		}
		if err := refs[0].signal(syscall.SIGTERM); err != nil {
			return err
		}
		gctx, cancel := context.WithTimeout(ctx, grace)
		err := waitGone(gctx, refs[:1])
		cancel()
		if err != nil {
			refs = treeRefs(pid)
			for _, r := range refs {
				_ = r.signal(syscall.SIGKILL)
			}
		}
	} else {
		refs, err := stopTree(pid)
		for _, r := range refs {
			if kerr := r.signal(syscall.SIGKILL); kerr != nil && err == nil {
				err = kerr
			}
		}
		if err != nil {
			f.mu.Lock()
			f.paused[target] = append(f.paused[target], append(paused, refs...)...)
			f.mu.Unlock()
			return fmt.Errorf("killing %s: %w", target, err)
		}
	}
	_ = resumeRefs(paused)
	return f.waitRestarted(ctx, target, st.ContainerID)
}

// waitRestarted waits until target's Pod runs a container other than old
// and is Ready.
func (f *Faults) waitRestarted(ctx context.Context, target, old string) error {
	var last error
	for {
		pod, st, err := f.pod(ctx, target)
		switch {
		case err != nil:
			last = err
		case st.ContainerID == old:
			last = fmt.Errorf("pod %s: container %s has not been restarted yet (state %+v)", pod.Name, old, st.State)
		case !st.Ready || st.State.Running == nil:
			last = fmt.Errorf("pod %s: its new container is not running and ready yet (restarts %d, state %+v)", pod.Name, st.RestartCount, st.State)
		default:
			if last = runningReady(pod, nil); last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not come back (%w): %w", target, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ctlProc is envtest's etcd or kube-apiserver, until a fault ends it; then
// the process the harness started in its place, with envtest's command
// line and environment (Kube.Stop stops it). envtest itself cannot start
// either again as it was: its Stop removes etcd's temporary data
// directory (and the apiserver's certificates, outside a node), and its
// Start makes new ones and picks a new peer port.
type ctlProc struct {
	target    string
	argv, env []string
	// orig is envtest's process.
	orig procRef
	// slot is the Kube's field for the harness's process.
	slot **process
	log  string
	// ready is an error until the component serves.
	ready func(context.Context) error
}

func newCtlProc(e *Env, target string) (*ctlProc, error) {
	k := e.Kube
	c := &ctlProc{target: target, log: filepath.Join(e.Dir, target+".log")}
	var path, flag string
	switch target {
	case TargetAPIServer:
		api := k.env.ControlPlane.GetAPIServer()
		path, flag, c.slot = api.Path, "--secure-port="+api.SecureServing.Port, &k.apiserverProc
		rc := k.Clientset.Discovery().RESTClient()
		c.ready = func(ctx context.Context) error {
			b, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("/readyz: %w: %s", err, b)
			}
			return nil
		}
	case TargetEtcd:
		etcd := k.env.ControlPlane.Etcd
		if etcd == nil || etcd.URL == nil {
			return nil, errors.New("envtest runs no etcd of its own")
		}
		url := etcd.URL.String()
		path, flag, c.slot = etcd.Path, "--listen-client-urls="+url, &k.etcdProc
		c.ready = func(ctx context.Context) error { return httpOK(ctx, url+"/health") }
	}
	if p := *c.slot; p != nil {
		// An earlier Faults replaced envtest's process.
		c.argv, c.env = p.cmd.Args, p.cmd.Env
		return c, nil
	}
	ref, argv, env, err := findChild(path, flag)
	if err != nil {
		return nil, fmt.Errorf("envtest's %s: %w", target, err)
	}
	c.orig, c.argv, c.env = ref, argv, env
	return c, nil
}

// current returns the running process's PID.
func (c *ctlProc) current() (int, error) {
	if p := *c.slot; p != nil {
		if p.exited() {
			return 0, fmt.Errorf("%s exited (%w); its log %s ends:\n%s", c.target, exitError(p), c.log, Tail(c.log, 20))
		}
		return p.cmd.Process.Pid, nil
	}
	if !c.orig.alive() {
		return 0, fmt.Errorf("envtest's %s (PID %d) has exited", c.target, c.orig.PID)
	}
	return c.orig.PID, nil
}

// stop stops the process as envtest does: SIGTERM, SIGKILL after 20 s.
func (c *ctlProc) stop() {
	if p := *c.slot; p != nil {
		p.stop(syscall.SIGTERM)
		return
	}
	if c.orig.signal(syscall.SIGTERM) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if waitGone(ctx, []procRef{c.orig}) != nil {
		_ = c.orig.signal(syscall.SIGKILL)
	}
}

// start starts the process again with envtest's command line and
// environment, in its own process group as envtest starts it, its output
// appended to c.log, and waits until it serves.
func (c *ctlProc) start(ctx context.Context) error {
	cmd := exec.Command(c.argv[0], c.argv[1:]...) //nolint:gosec,noctx // envtest's binary and arguments, as it started them; runs until Kube.Stop
	cmd.Env = c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := startProcess(c.target, c.log, cmd)
	if err != nil {
		return err
	}
	*c.slot = p
	return WaitFor(ctx, 0, func(ctx context.Context) error {
		if p.exited() {
			return Permanent(fmt.Errorf("%s exited (%w); its log %s ends:\n%s", c.target, exitError(p), c.log, Tail(c.log, 20)))
		}
		return c.ready(ctx)
	})
}

// exitError is how an exited process ended.
func exitError(p *process) error {
	if p.err == nil {
		return errors.New("exit status 0")
	}
	return p.err
}

// findChild finds the child of this process that runs path with flag among
// its arguments, and returns it with its command line and environment.
func findChild(path, flag string) (procRef, []string, []string, error) {
	self := os.Getpid()
	for pid, info := range procTable() {
		if info.PPID != self || info.State == 'Z' {
			continue
		}
		argv := readNulList(fmt.Sprintf("/proc/%d/cmdline", pid))
		if len(argv) == 0 || argv[0] != path || !slices.Contains(argv[1:], flag) {
			continue
		}
		env := readNulList(fmt.Sprintf("/proc/%d/environ", pid))
		if env == nil {
			env = os.Environ()
		}
		return procRef{PID: pid, Start: info.Start}, argv, env, nil
	}
	return procRef{}, nil, nil, fmt.Errorf("no child process of this one runs %s %s", path, flag)
}

// readNulList reads a NUL-separated list (/proc/<pid>/cmdline, environ).
func readNulList(file string) []string {
	b, err := os.ReadFile(file) //nolint:gosec // procfs, of this process's own child
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// httpOK is an error unless a GET of url answers 200.
func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// procRef names a process by PID and start time: a PID the kernel has
// given to another process since is never signalled.
type procRef struct {
	PID int
	// Start is /proc/<pid>/stat's starttime (clock ticks after boot).
	Start uint64
}

// readProcInfo reads /proc/<pid>/stat; false when the process is gone.
func readProcInfo(pid int) (ProcStat, bool) {
	return ReadProcStat(fmt.Sprintf("/proc/%d/stat", pid))
}

// procTable reads every process's /proc/<pid>/stat.
func procTable() map[int]ProcStat {
	t := map[int]ProcStat{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if i, ok := readProcInfo(pid); ok {
			t[pid] = i
		}
	}
	return t
}

// descendants returns root's descendants in t, each after its parent.
func descendants(t map[int]ProcStat, root int) []int {
	children := map[int][]int{}
	for pid, i := range t {
		if i.PPID != pid {
			children[i.PPID] = append(children[i.PPID], pid)
		}
	}
	for _, c := range children {
		slices.Sort(c)
	}
	var out []int
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// alive reports whether the process still runs (and is no zombie).
func (r procRef) alive() bool {
	i, ok := readProcInfo(r.PID)
	return ok && i.Start == r.Start && i.State != 'Z'
}

// signal sends sig to the process if it is still the one r names; a
// process that is gone is no error.
func (r procRef) signal(sig syscall.Signal) error {
	i, ok := readProcInfo(r.PID)
	if !ok || i.Start != r.Start {
		return nil
	}
	if err := syscall.Kill(r.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to process %d: %w", sig, r.PID, err)
	}
	return nil
}

// treeRefs returns root and its descendants as they are now, root first
// (none when root is gone).
func treeRefs(root int) []procRef {
	t := procTable()
	i, ok := t[root]
	if !ok {
		return nil
	}
	refs := []procRef{{PID: root, Start: i.Start}}
	for _, pid := range descendants(t, root) {
		refs = append(refs, procRef{PID: pid, Start: t[pid].Start})
	}
	return refs
}

// stopTree SIGSTOPs root, then its descendants, again until a pass finds
// none it has not stopped (a stopped process forks no more), and returns
// what it stopped, root first, parents before children, also on error.
func stopTree(root int) ([]procRef, error) {
	i, ok := readProcInfo(root)
	if !ok {
		return nil, fmt.Errorf("process %d is gone", root)
	}
	r := procRef{PID: root, Start: i.Start}
	if err := syscall.Kill(root, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("SIGSTOP to process %d: %w", root, err)
	}
	refs := []procRef{r}
	seen := map[int]bool{root: true}
	for range 50 {
		t := procTable()
		added := false
		for _, pid := range descendants(t, root) {
			if seen[pid] {
				continue
			}
			seen[pid] = true
			c := procRef{PID: pid, Start: t[pid].Start}
			if err := c.signal(syscall.SIGSTOP); err != nil {
				return refs, err
			}
			refs = append(refs, c)
			added = true
		}
		if !added {
			return refs, nil
		}
	}
	return refs, fmt.Errorf("process %d kept forking while being stopped", root)
}

// waitStopped waits up to d until every process of refs is stopped or
// gone (a process in uninterruptible sleep stops when it leaves it).
func waitStopped(refs []procRef, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, r := range refs {
		for time.Now().Before(deadline) {
			i, ok := readProcInfo(r.PID)
			if !ok || i.Start != r.Start || i.State == 'T' || i.State == 't' || i.State == 'Z' {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitGone waits until no process of refs runs (a zombie is gone).
func waitGone(ctx context.Context, refs []procRef) error {
	return WaitFor(ctx, 0, func(context.Context) error {
		for _, r := range refs {
			if r.alive() {
				return fmt.Errorf("process %d still runs", r.PID)
			}
		}
		return nil
	})
}

// notStopped is an error while the process is stopped (SIGSTOP) or gone.
func notStopped(pid int) error {
	i, ok := readProcInfo(pid)
	switch {
	case !ok || i.State == 'Z':
		return fmt.Errorf("process %d is gone", pid)
	case i.State == 'T' || i.State == 't':
		return fmt.Errorf("process %d is stopped", pid)
	}
	return nil
}
