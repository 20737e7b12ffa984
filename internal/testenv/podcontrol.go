package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runtimeContainerName is the container core's Deployment runtime runs the
// package's image in.
const runtimeContainerName = "package-runtime"

// restartAnnotation, on the Pod template of the runtime config, is bumped
// at each ProviderPodControl.Restart: core copies it into its Deployment,
// which then makes a new Pod even when nothing else changed.
const restartAnnotation = "testenv.ppt.local/restart"

// ProviderPodControl drives the provider's Pod, which core's Deployment
// runtime made (Options.Node, InstallProviderPod), through what an admin
// edits: the DeploymentRuntimeConfig the Provider uses. Core rolls its
// Deployment after each edit. It also copies the output of every run of
// the Pod's container (the kubelet's log files, which go with their Pod)
// into LogFile as it is written.
type ProviderPodControl struct {
	// LogFile gets every line every provider container run wrote, in the
	// kubelet's log format; in the run's directory, so that the checks of
	// the run's logs read it.
	LogFile string

	env  *Env
	name string // the DeploymentRuntimeConfig's
	args []string
	// base is the package-runtime container's env in the runtime config
	// as the Provider was installed with it.
	base     []any
	restarts int
	// coreEnv names the variables core adds to the container's.
	coreEnv map[string]bool
	// current is the container run Restart last waited for.
	current corev1.ContainerStatus
	podUID  string

	mu      sync.Mutex
	offsets map[string]int64
	out     *os.File
	stop    chan struct{}
	done    chan struct{}
}

// ProviderPodOptions changes the runtime config the provider is installed
// with (Options.NodeProvider).
type ProviderPodOptions struct {
	// Args are more flags for the package-runtime container, after the
	// runtime config's.
	Args []string
	// Recreate makes core's Deployment replace the Pod by deleting the old
	// one first, never running two at once (the Deployment's Recreate
	// strategy): for a provider run without leader election.
	Recreate bool
}

// applyTo changes the runtime config rc as o says.
func (o *ProviderPodOptions) applyTo(rc *unstructured.Unstructured) error {
	if o == nil {
		return nil
	}
	path := []string{"spec", "deploymentTemplate", "spec", "template", "spec", "containers"}
	ctrs, _, _ := unstructured.NestedSlice(rc.Object, path...)
	i := slices.IndexFunc(ctrs, func(c any) bool { m, _ := c.(map[string]any); return m["name"] == runtimeContainerName })
	if i < 0 {
		return fmt.Errorf("the runtime config has no %s container", runtimeContainerName)
	}
	ctr, _ := ctrs[i].(map[string]any)
	args, _ := ctr["args"].([]any)
	for _, a := range o.Args {
		args = append(args, a)
	}
	ctr["args"] = args
	ctrs[i] = ctr
	if err := unstructured.SetNestedSlice(rc.Object, ctrs, path...); err != nil {
		return err
	}
	if o.Recreate {
		return unstructured.SetNestedField(rc.Object, map[string]any{"type": "Recreate"}, "spec", "deploymentTemplate", "spec", "strategy")
	}
	return nil
}

// NewProviderPodControl starts copying the provider Pod's logs and waits
// until the only provider Pod is Ready, with the flags of
// Options.NodeProvider. Close it when done.
func NewProviderPodControl(ctx context.Context, e *Env) (*ProviderPodControl, error) {
	if e.Node == nil || e.Crossplane == nil || e.Crossplane.ProviderRevision == "" {
		return nil, errors.New("the provider's Pod needs Options.Node and Crossplane (InstallProviderPod)")
	}
	rc, err := NodeRuntimeConfig()
	if err != nil {
		return nil, err
	}
	p := &ProviderPodControl{
		LogFile: filepath.Join(e.Dir, "provider.log"),
		env:     e, name: rc.GetName(),
		offsets: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	if o := e.Crossplane.providerPod; o != nil {
		p.args = o.Args
	}
	ctrs, _, _ := unstructured.NestedSlice(rc.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	for _, c := range ctrs {
		if m, _ := c.(map[string]any); m["name"] == runtimeContainerName {
			p.base, _ = m["env"].([]any)
		}
	}
	if p.out, err = os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, err
	}
	go p.tail()
	if err := p.waitOnly(ctx, nil); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close stops copying the logs, after copying what is there.
func (p *ProviderPodControl) Close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.done
	p.SyncLogs()
	_ = p.out.Close()
}

// Restart makes core's Deployment replace the provider's Pod by one whose
// package-runtime container has env (NAME=value) on top of the runtime
// config's, and one replica; it returns once that Pod is the only provider
// Pod and is Running and Ready. Restart without env removes what an
// earlier one added.
func (p *ProviderPodControl) Restart(ctx context.Context, env ...string) error {
	var extra []any
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is no NAME=value", kv)
		}
		extra = append(extra, map[string]any{"name": k, "value": v})
	}
	p.restarts++
	if err := p.edit(ctx, func(drc *unstructured.Unstructured, ctr map[string]any) error {
		ctr["env"] = append(slices.Clone(p.base), extra...)
		unstructured.RemoveNestedField(drc.Object, "spec", "deploymentTemplate", "spec", "replicas")
		return unstructured.SetNestedField(drc.Object, strconv.Itoa(p.restarts), "spec", "deploymentTemplate", "spec", "template", "metadata", "annotations", restartAnnotation)
	}); err != nil {
		return err
	}
	return p.waitOnly(ctx, env)
}

// Stop scales core's Deployment to zero replicas through the runtime
// config and waits until no provider Pod is left.
func (p *ProviderPodControl) Stop(ctx context.Context) error {
	if err := p.edit(ctx, func(drc *unstructured.Unstructured, _ map[string]any) error {
		return unstructured.SetNestedField(drc.Object, int64(0), "spec", "deploymentTemplate", "spec", "replicas")
	}); err != nil {
		return err
	}
	return WaitFor(ctx, 3*time.Minute, func(ctx context.Context) error {
		pods, err := p.pods(ctx)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("%d provider Pods left", len(pods))
		}
		return nil
	})
}

// Running reports whether a provider Pod is Running and Ready.
func (p *ProviderPodControl) Running(ctx context.Context) bool {
	return runningReady(p.env.Crossplane.ProviderPod(ctx, p.env.Kube.Client)) == nil
}

// Pod returns the provider's Pod and the status of its package-runtime
// container.
func (p *ProviderPodControl) Pod(ctx context.Context) (*corev1.Pod, corev1.ContainerStatus, error) {
	pod, err := p.env.Crossplane.ProviderPod(ctx, p.env.Kube.Client)
	if err != nil {
		return nil, corev1.ContainerStatus{}, err
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == runtimeContainerName {
			return pod, s, nil
		}
	}
	return nil, corev1.ContainerStatus{}, fmt.Errorf("pod %s has no status of its %s container", pod.Name, runtimeContainerName)
}

// Pid returns the PID of the provider container's process, from the
// node's containerd.
func (p *ProviderPodControl) Pid(ctx context.Context) (int, error) {
	_, st, err := p.Pod(ctx)
	if err != nil {
		return 0, err
	}
	return p.env.Node.TaskPid(ctx, strings.TrimPrefix(st.ContainerID, "containerd://"))
}

// WaitKilled waits until the container run Restart started has ended by
// SIGKILL (exit code 137, a fault step) in the same Pod: the kubelet then
// restarts it.
func (p *ProviderPodControl) WaitKilled(ctx context.Context) error {
	var last error
	for {
		pod, st, err := p.Pod(ctx)
		switch {
		case err != nil:
			last = err
		case string(pod.UID) != p.podUID:
			return fmt.Errorf("the provider's Pod was replaced (%s): want its container to exit and restart in place", pod.Name)
		default:
			term := st.LastTerminationState.Terminated
			if st.State.Terminated != nil {
				term = st.State.Terminated
			}
			if term != nil && term.ContainerID == p.current.ContainerID {
				if term.ExitCode != 137 {
					return fmt.Errorf("the provider's container exited, but not by SIGKILL: exit code %d (%s)", term.ExitCode, term.Reason)
				}
				return nil
			}
			last = fmt.Errorf("the provider's container %s still runs (restarts %d)", p.current.ContainerID, st.RestartCount)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the provider was never killed: the fault step was not reached (%w)", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Scrape reads the provider's metrics endpoint, at the Pod's address on
// the metrics port core declares (8080).
func (p *ProviderPodControl) Scrape(ctx context.Context) (string, error) {
	pod, _, err := p.Pod(ctx)
	if err != nil {
		return "", err
	}
	return scrape(ctx, net.JoinHostPort(pod.Status.PodIP, "8080"))
}

// edit changes the runtime config (and its package-runtime container),
// retrying on conflicts.
func (p *ProviderPodControl) edit(ctx context.Context, change func(drc *unstructured.Unstructured, ctr map[string]any) error) error {
	return WaitFor(ctx, time.Minute, func(ctx context.Context) error {
		drc := &unstructured.Unstructured{}
		drc.SetAPIVersion("pkg.crossplane.io/v1beta1")
		drc.SetKind("DeploymentRuntimeConfig")
		if err := p.env.Kube.Client.Get(ctx, client.ObjectKey{Name: p.name}, drc); err != nil {
			return err
		}
		path := []string{"spec", "deploymentTemplate", "spec", "template", "spec", "containers"}
		ctrs, _, _ := unstructured.NestedSlice(drc.Object, path...)
		i := slices.IndexFunc(ctrs, func(c any) bool { m, _ := c.(map[string]any); return m["name"] == runtimeContainerName })
		if i < 0 {
			return Permanent(fmt.Errorf("DeploymentRuntimeConfig %s has no %s container", p.name, runtimeContainerName))
		}
		ctr, _ := ctrs[i].(map[string]any)
		if err := change(drc, ctr); err != nil {
			return Permanent(err)
		}
		ctrs[i] = ctr
		if err := unstructured.SetNestedSlice(drc.Object, ctrs, path...); err != nil {
			return Permanent(err)
		}
		// unguarded-update: the WaitFor around it reads, changes and writes again on any error, a conflict included (the edit is already a retried read-then-update)
		return p.env.Kube.Client.Update(ctx, drc)
	})
}

// pods lists the provider revision's Pods, those being deleted included.
func (p *ProviderPodControl) pods(ctx context.Context) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	err := p.env.Kube.Client.List(ctx, l, client.InNamespace(CrossplaneNamespace), client.MatchingLabels{"pkg.crossplane.io/revision": p.env.Crossplane.ProviderRevision})
	return l.Items, err
}

// waitOnly waits until exactly one provider Pod exists, of the latest
// restart, Running and Ready, whose package-runtime container has the
// runtime config's env plus env and the harness's flags, and records its
// container run.
func (p *ProviderPodControl) waitOnly(ctx context.Context, env []string) error {
	var base []corev1.EnvVar
	if err := fromUnstructuredSlice(p.base, &base); err != nil {
		return err
	}
	want := slices.Clone(base)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		want = append(want, corev1.EnvVar{Name: k, Value: v})
	}
	err := WaitFor(ctx, 3*time.Minute, func(ctx context.Context) error {
		if err := p.env.Node.exited(); err != nil {
			return err
		}
		pods, err := p.pods(ctx)
		if err != nil {
			return err
		}
		if len(pods) != 1 {
			return fmt.Errorf("%d provider Pods, want one", len(pods))
		}
		pod := &pods[0]
		if pod.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s is being deleted", pod.Name)
		}
		if want := restartOf(p.restarts); pod.Annotations[restartAnnotation] != want {
			return fmt.Errorf("pod %s is of restart %q, want %q", pod.Name, pod.Annotations[restartAnnotation], want)
		}
		if err := runningReady(pod, nil); err != nil {
			return err
		}
		for _, c := range pod.Spec.Containers {
			if c.Name != runtimeContainerName {
				continue
			}
			if p.coreEnv == nil {
				// Core adds its own variables to the runtime config's;
				// the first Pod has no extra ones.
				p.coreEnv = map[string]bool{}
				for _, e := range c.Env {
					if !slices.ContainsFunc(base, func(b corev1.EnvVar) bool { return b.Name == e.Name }) {
						p.coreEnv[e.Name] = true
					}
				}
			}
			got := slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool { return p.coreEnv[e.Name] })
			if !envEqual(got, want) {
				return Permanent(fmt.Errorf("pod %s: the container's env (core's %v aside) is not the runtime config's plus %q", pod.Name, p.coreEnv, env))
			}
			for _, a := range p.args {
				if !slices.Contains(c.Args, a) {
					return Permanent(fmt.Errorf("pod %s: the container's args %q lack %s", pod.Name, c.Args, a))
				}
			}
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == runtimeContainerName {
				if !s.Ready || s.State.Running == nil {
					return fmt.Errorf("pod %s: its container is not running and ready", pod.Name)
				}
				p.current, p.podUID = s, string(pod.UID)
				p.current.ContainerID = firstContainer(s)
				return nil
			}
		}
		return fmt.Errorf("pod %s has no status of its %s container", pod.Name, runtimeContainerName)
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, p.describe(context.WithoutCancel(ctx)))
	}
	return nil
}

// describe says, for an error message, what the runtime config and core's
// Deployment say, what core reported on the provider revision, and what
// the Pods are doing.
func (p *ProviderPodControl) describe(ctx context.Context) string {
	var b strings.Builder
	x := p.env.Crossplane
	drc := &unstructured.Unstructured{}
	drc.SetAPIVersion("pkg.crossplane.io/v1beta1")
	drc.SetKind("DeploymentRuntimeConfig")
	if err := p.env.Kube.Client.Get(ctx, client.ObjectKey{Name: p.name}, drc); err == nil {
		tmpl, _, _ := unstructured.NestedMap(drc.Object, "spec", "deploymentTemplate", "spec")
		delete(tmpl, "template")
		ann, _, _ := unstructured.NestedMap(drc.Object, "spec", "deploymentTemplate", "spec", "template", "metadata")
		fmt.Fprintf(&b, "DeploymentRuntimeConfig %s: deployment spec %v, pod metadata %v\n", p.name, tmpl, ann)
	}
	deps := &appsv1.DeploymentList{}
	if err := p.env.Kube.Client.List(ctx, deps, client.InNamespace(CrossplaneNamespace)); err == nil {
		for _, d := range deps.Items {
			fmt.Fprintf(&b, "Deployment %s: generation %d observed %d, strategy %s, replicas %v, pod annotations %v\n",
				d.Name, d.Generation, d.Status.ObservedGeneration, d.Spec.Strategy.Type, ptrValue(d.Spec.Replicas), d.Spec.Template.Annotations)
		}
	}
	evs := &corev1.EventList{}
	if err := p.env.Kube.Client.List(ctx, evs); err == nil {
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name == x.ProviderRevision || ev.InvolvedObject.Name == ProviderName {
				fmt.Fprintf(&b, "Event %s %s %s: %s %s\n", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
			}
		}
	}
	b.WriteString(x.describeProviderPods(ctx, p.env))
	fmt.Fprintf(&b, "crossplane log ends:\n%s\n", Tail(x.logFile, 20))
	return b.String()
}

func ptrValue(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

// restartOf is the restart annotation of the nth restart ("" before any).
func restartOf(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// envEqual compares env lists by name, value and source, in order.
func envEqual(a, b []corev1.EnvVar) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.EnvVar) bool {
		return x.Name == y.Name && x.Value == y.Value && (x.ValueFrom == nil) == (y.ValueFrom == nil)
	})
}

func fromUnstructuredSlice(s []any, into *[]corev1.EnvVar) error {
	for _, e := range s {
		m, _ := e.(map[string]any)
		var v corev1.EnvVar
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &v); err != nil {
			return err
		}
		*into = append(*into, v)
	}
	return nil
}

// tail copies what the provider's container runs write to their log
// files into LogFile, until Close.
func (p *ProviderPodControl) tail() {
	defer close(p.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.SyncLogs()
		}
	}
}

// SyncLogs copies what the provider's container runs wrote since the last
// copy into LogFile. The kubelet keeps a container run's log while its Pod
// exists (<ns>_<pod>_<uid>/package-runtime/<restart>.log).
func (p *ProviderPodControl) SyncLogs() {
	p.mu.Lock()
	defer p.mu.Unlock()
	files, _ := filepath.Glob(filepath.Join(p.env.Node.PodLogs, CrossplaneNamespace+"_"+p.env.Crossplane.ProviderRevision+"-*", runtimeContainerName, "*.log"))
	for _, f := range files {
		p.copyFrom(f)
	}
}

func (p *ProviderPodControl) copyFrom(file string) {
	f, err := os.Open(file) //nolint:gosec // the kubelet's log of the provider's container
	if err != nil {
		return // gone with its Pod
	}
	defer f.Close() //nolint:errcheck // read-only
	st, err := f.Stat()
	if err != nil {
		return
	}
	off := p.offsets[file]
	if st.Size() < off {
		off = 0 // rotated
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return
	}
	n, _ := io.Copy(p.out, f)
	p.offsets[file] = off + n
}

// firstContainer is the ID of the first container of a Pod just made, from
// the status its restarted container shows: when that container was
// restarted before it was first seen Ready (a fault point it was armed for
// reached within seconds of its start), the one that exited, which is the
// one WaitKilled judges; else the running one.
func firstContainer(s corev1.ContainerStatus) string {
	if t := s.LastTerminationState.Terminated; s.RestartCount > 0 && t != nil {
		return t.ContainerID
	}
	return s.ContainerID
}
