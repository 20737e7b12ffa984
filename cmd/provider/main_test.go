package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Kube: true, OpenBao: true}, &env)
}

func TestParseRejectsBadFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"NoOpenBao":       {args: nil, want: "--openbao-address is required"},
		"BadBasePath":     {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--openbao-tenant-base-path=/abs"}, want: "--openbao-tenant-base-path"},
		"BadRate":         {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--max-reconcile-rate=0"}, want: "--max-reconcile-rate"},
		"BadConcurrency":  {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--max-concurrent-reconciles=-1"}, want: "--max-concurrent-reconciles"},
		"StrayArgument":   {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "extra"}, want: "unexpected arguments"},
		"UnknownFlag":     {args: []string{"--no-such-flag"}, want: "no-such-flag"},
		"EmptyNamespace":  {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--namespace="}, want: "--namespace"},
		"HTTPOpenBao":     {args: []string{"--openbao-address=http://bao:8200", "--openbao-auth-role=r"}, want: "--openbao-allow-insecure-http allows http for local development only"},
		"HTTPConsumer":    {args: []string{"--openbao-address=https://bao:8200", "--openbao-consumer-address=http://bao:8200", "--openbao-auth-role=r"}, want: "--openbao-consumer-address"},
		"NegativeMinPoll": {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--min-poll-interval=-1s"}, want: "--min-poll-interval"},
		"RelativeSocket":  {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--enable-changelogs", "--changelogs-socket=changelogs.sock"}, want: "--changelogs-socket"},
		"NoSATokenFile":   {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--openbao-sa-token-file="}, want: "--openbao-sa-token-file"},
		"OverlappingBasePaths": {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--openbao-tenant-base-path=kv-paths", "--openbao-database-base-path=kv-paths/databases"},
			want: `--openbao-database-base-path "kv-paths/databases" lies under --openbao-tenant-base-path "kv-paths"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parse(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
	t.Setenv("POD_NAMESPACE", "from-env")
	f, err := parse([]string{"--openbao-address=https://bao:8200/", "--openbao-auth-role=r"})
	if err != nil {
		t.Fatal(err)
	}
	if f.maxConcurrent != f.maxReconcileRate {
		t.Errorf("--max-concurrent-reconciles defaults to %d, want --max-reconcile-rate (%d)", f.maxConcurrent, f.maxReconcileRate)
	}
	if f.opts.Namespace != "from-env" || f.opts.OpenBao.ConsumerAddress != "https://bao:8200" || f.opts.OpenBao.KVMount != "kv" {
		t.Errorf("defaults: namespace %q consumer %q kv %q", f.opts.Namespace, f.opts.OpenBao.ConsumerAddress, f.opts.OpenBao.KVMount)
	}
	// Leader election is on unless turned off; the OpenBao login token is
	// the projected one with OpenBao's audience; plain http is refused.
	if !f.leaderElection {
		t.Error("--leader-election defaults to false, want true")
	}
	if got, want := f.opts.OpenBao.ServiceAccountTokenFile, "/var/run/secrets/openbao/serviceaccount/token"; got != want {
		t.Errorf("--openbao-sa-token-file defaults to %q, want the projected token %q", got, want)
	}
	if f.opts.OpenBao.AllowInsecureHTTP {
		t.Error("--openbao-allow-insecure-http defaults to true")
	}
	// Change logs are off unless asked for; a poll-interval annotation has
	// a floor.
	if f.enableChangeLogs || f.changeLogsSocket != "/var/run/changelogs/changelogs.sock" {
		t.Errorf("change logs default to %v on %q, want off on the sidecar's socket", f.enableChangeLogs, f.changeLogsSocket)
	}
	if f.opts.MinPollInterval != 10*time.Second {
		t.Errorf("--min-poll-interval defaults to %s, want 10s", f.opts.MinPollInterval)
	}
	f, err = parse([]string{"--openbao-address=http://127.0.0.1:8200", "--openbao-auth-role=r", "--openbao-allow-insecure-http", "--leader-election=false"})
	if err != nil {
		t.Fatalf("http with --openbao-allow-insecure-http: %v", err)
	}
	if !f.opts.OpenBao.AllowInsecureHTTP || f.leaderElection {
		t.Errorf("allow-insecure-http %v, leader-election %v", f.opts.OpenBao.AllowInsecureHTTP, f.leaderElection)
	}
}

// The example DeploymentRuntimeConfig is a valid Pod spec (every field name
// checked against the Kubernetes types), its args parse, and the token the
// provider reads by default is a projected service-account token with
// OpenBao's audience; nothing in it is a local-development flag.
func TestExampleRuntimeConfig(t *testing.T) {
	testenv.Need(t)
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "provider"))
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.PodSpec
	for _, o := range objs {
		if o.GetKind() != "DeploymentRuntimeConfig" {
			continue
		}
		m, ok, err := unstructured.NestedMap(o.Object, "spec", "deploymentTemplate", "spec", "template", "spec")
		if err != nil || !ok {
			t.Fatalf("no pod spec in the DeploymentRuntimeConfig: %v", err)
		}
		pod = &corev1.PodSpec{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, pod, true); err != nil {
			t.Fatalf("the pod spec of the DeploymentRuntimeConfig: %v", err)
		}
	}
	if pod == nil || len(pod.Containers) != 1 || pod.Containers[0].Name != "package-runtime" {
		t.Fatalf("want one DeploymentRuntimeConfig with the package-runtime container, got %+v", pod)
	}
	ctr := pod.Containers[0]
	for _, a := range ctr.Args {
		for _, dev := range []string{"--openbao-allow-insecure-http", "--openbao-token-file", "--leader-election"} {
			if strings.HasPrefix(a, dev) {
				t.Errorf("the example passes %s", a)
			}
		}
	}
	// --ca-bundle must exist when parsed: parse with a local file in its
	// place, and check the example's path against the mounts below.
	caBundle := ""
	args := make([]string, 0, len(ctr.Args))
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--ca-bundle="); ok {
			caBundle, a = v, "--ca-bundle="+env.CA.CertFile
		}
		args = append(args, a)
	}
	t.Setenv("POD_NAMESPACE", "")
	f, err := parse(args)
	if err != nil {
		t.Fatalf("the example's args: %v", err)
	}
	mounted := func(file string) *corev1.Volume {
		for _, vm := range ctr.VolumeMounts {
			rel, err := filepath.Rel(vm.MountPath, file)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			for i := range pod.Volumes {
				if v := &pod.Volumes[i]; v.Name == vm.Name {
					if !vm.ReadOnly {
						t.Errorf("volume %s is mounted writable", v.Name)
					}
					return v
				}
			}
		}
		return nil
	}
	v := mounted(f.opts.OpenBao.ServiceAccountTokenFile)
	if v == nil || v.Projected == nil {
		t.Fatalf("--openbao-sa-token-file %s is not in a projected volume", f.opts.OpenBao.ServiceAccountTokenFile)
	}
	var sat *corev1.ServiceAccountTokenProjection
	for _, src := range v.Projected.Sources {
		if src.ServiceAccountToken != nil && filepath.Join(mountPath(ctr, v.Name), src.ServiceAccountToken.Path) == f.opts.OpenBao.ServiceAccountTokenFile {
			sat = src.ServiceAccountToken
		}
	}
	if sat == nil || sat.Audience != options.DefaultOpenBaoAudience {
		t.Errorf("the token at %s: %+v, want a serviceAccountToken with audience %q", f.opts.OpenBao.ServiceAccountTokenFile, sat, options.DefaultOpenBaoAudience)
	}
	if v := mounted(caBundle); caBundle == "" || v == nil || v.ConfigMap == nil {
		t.Errorf("--ca-bundle %q is not in a ConfigMap volume", caBundle)
	}
}

func mountPath(c corev1.Container, volume string) string {
	for _, vm := range c.VolumeMounts {
		if vm.Name == volume {
			return vm.MountPath
		}
	}
	return ""
}

// The provider binary starts out of cluster against the test apiserver,
// answers on its health and metrics endpoints, registers its controllers
// behind the safe-start gate, and the usage controller blocks deleting a
// ClusterProviderConfig while a Database uses it.
func TestProviderStartsAndGuardsConfigsInUse(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := env.Kube.Client

	bin := providerBinary(t)
	metricsPort, healthPort, pprofPort := freePort(t), freePort(t), freePort(t)
	logFile := filepath.Join(t.TempDir(), "provider.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, //nolint:noctx // stopped with SIGTERM, then SIGKILL, by the deferred cleanup
		"--kubeconfig="+env.Kube.KubeconfigFile,
		"--namespace="+testenv.ProviderNamespace,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", healthPort),
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprofPort),
		"--openbao-address="+env.OpenBao.Address,
		"--openbao-auth-role="+env.OpenBao.ProviderRole,
		"--ca-bundle="+env.CA.CertFile,
		"--poll=5s",
		"--debug",
	)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			t.Logf("the provider stopped on SIGTERM: %v", err)
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("provider log:\n%s", lastLines(string(b), 60))
		}
	}()

	get := func(port int, path string) (int, string, error) { return httpGet(ctx, port, path) }
	eventually(t, ctx, exited, "healthz and readyz answer 200", func() error {
		for _, p := range []string{"/healthz", "/readyz"} {
			code, _, err := get(healthPort, p)
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("%s: HTTP %d", p, code)
			}
		}
		return nil
	})
	// Profiling is served only where --pprof-bind-address says.
	eventually(t, ctx, exited, "pprof answers on its own address only", func() error {
		code, body, err := get(pprofPort, "/debug/pprof/")
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.Contains(body, "goroutine") {
			return fmt.Errorf("pprof index: HTTP %d", code)
		}
		if code, _, err := get(metricsPort, "/debug/pprof/"); err != nil || code == http.StatusOK {
			return fmt.Errorf("the metrics address serves pprof: HTTP %d (%w)", code, err)
		}
		return nil
	})
	// The gated controllers exist once the CRD gate has opened for them;
	// controller-runtime then exports their metrics.
	eventually(t, ctx, exited, "metrics name every controller", func() error {
		code, body, err := get(metricsPort, "/metrics")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		for _, c := range []string{
			`controller="providerconfig/clusterproviderconfig.database.ayatori.ddupan.top"`,
			`controller="managed/database.database.ayatori.ddupan.top"`,
			`controller="managed/databasebinding.database.ayatori.ddupan.top"`,
		} {
			if !strings.Contains(body, c) {
				return fmt.Errorf("no metrics for %s", c)
			}
		}
		return nil
	})

	// The usage controller takes a ClusterProviderConfig under its care.
	cpc := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: "localhost", Hostaddr: "127.0.0.1"},
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
		},
	}
	if err := kube.Create(ctx, cpc); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, exited, "the ClusterProviderConfig carries the in-use finalizer", func() error {
		if err := kube.Get(ctx, types.NamespacedName{Name: "shared"}, cpc); err != nil {
			return err
		}
		if len(cpc.GetFinalizers()) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})

	// A Database records its usage of the config.
	db := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "netbox"},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: "shared"}},
			ForProvider:                v1alpha1.DatabaseParameters{Database: "netbox", LoginRole: ptr.To("netbox")},
		},
	}
	if err := kube.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, exited, "the ClusterProviderConfig counts one user", func() error {
		if err := kube.Get(ctx, types.NamespacedName{Name: "shared"}, cpc); err != nil {
			return err
		}
		if cpc.Status.Users != 1 {
			return fmt.Errorf("users = %d", cpc.Status.Users)
		}
		return nil
	})

	// Deleting the config while it is in use is blocked.
	if err := kube.Delete(ctx, cpc); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, exited, "deletion is blocked with a condition that says why", func() error {
		if err := kube.Get(ctx, types.NamespacedName{Name: "shared"}, cpc); err != nil {
			return err
		}
		c := cpc.GetCondition("Terminating")
		if cpc.GetDeletionTimestamp() == nil || c.Reason != "InUse" || !strings.Contains(c.Message, "usages still exist") {
			return fmt.Errorf("deletionTimestamp %v, Terminating condition %+v", cpc.GetDeletionTimestamp(), c)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if err := kube.Get(ctx, types.NamespacedName{Name: "shared"}, cpc); err != nil {
		t.Fatalf("the config in use was deleted: %v", err)
	}

	// Deleting the Database with the default reclaim policy (Retain)
	// completes without touching any server. There is no garbage collector in this
	// environment, so the test removes the Database's usage as the
	// collector would; then the config goes.
	if err := kube.Delete(ctx, db); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, exited, "the Database is gone", func() error {
		err := kube.Get(ctx, client.ObjectKeyFromObject(db), db)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %w)", err)
	})
	if err := kube.DeleteAllOf(ctx, &v1alpha1.ClusterProviderConfigUsage{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, exited, "the unused config is deleted", func() error {
		err := kube.Get(ctx, types.NamespacedName{Name: "shared"}, cpc)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %w)", err)
	})
}

func eventually(t *testing.T, ctx context.Context, exited <-chan error, what string, fn func() error) {
	t.Helper()
	err := testenv.WaitFor(ctx, 0, func(context.Context) error {
		err := fn()
		if err != nil {
			select {
			case e := <-exited:
				return testenv.Permanent(fmt.Errorf("provider exited (%w)", e))
			default:
			}
		}
		return err
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// providerBinary builds the provider once per test run.
func providerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(env.Dir, "provider")
		out, err := exec.CommandContext(t.Context(), "go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a provider process started by a test.
type proc struct {
	cmd                     *exec.Cmd
	exited                  chan error    // receives the exit once
	done                    chan struct{} // closed at exit
	metricsPort, healthPort int
	log                     string
}

// startProc starts the provider with the test environment's OpenBao flags,
// its own metrics and health ports, and args; it is stopped (SIGTERM) when
// the test ends.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{exited: make(chan error, 1), done: make(chan struct{}), metricsPort: freePort(t), healthPort: freePort(t), log: filepath.Join(t.TempDir(), name+".log")}
	lf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(providerBinary(t), append([]string{ //nolint:noctx // the test stops it (SIGTERM or SIGKILL) at the moment it chooses
		"--kubeconfig=" + env.Kube.KubeconfigFile,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", p.metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", p.healthPort),
		"--openbao-address=" + env.OpenBao.Address,
		"--openbao-auth-role=" + env.OpenBao.ProviderRole,
		"--ca-bundle=" + env.CA.CertFile,
	}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		_ = lf.Close()
		close(p.done)
		p.exited <- err
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s log:\n%s", name, lastLines(string(b), 40))
		}
	})
	return p
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 20 s).
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	testenv.Terminate(p.cmd.Process, p.done, 20*time.Second)
}

// metrics returns the process's /metrics page.
func (p *proc) metrics(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", p.metricsPort), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close() //nolint:errcheck // test
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

const databaseController = `controller="managed/database.database.ayatori.ddupan.top"`

// leads reports whether the process says it holds the Lease and runs its
// controllers.
func (p *proc) leads(ctx context.Context) (bool, error) {
	m, err := p.metrics(ctx)
	if err != nil {
		return false, err
	}
	leader := strings.Contains(m, `leader_election_master_status{name="`+leaderElectionID+`"} 1`)
	return leader && strings.Contains(m, databaseController), nil
}

// By default two provider processes elect one leader with a Lease in the
// provider's namespace: only the leader runs its controllers; the other
// waits, and takes over promptly (well within the 60 s lease) when the
// leader is stopped, because the leader releases the Lease on SIGTERM.
func TestLeaderElection(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns = "leader-election"
	if err := env.Kube.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	holder := func() (string, error) {
		l := &coordinationv1.Lease{}
		if err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: leaderElectionID}, l); err != nil {
			return "", err
		}
		return ptr.Deref(l.Spec.HolderIdentity, ""), nil
	}

	a := startProc(t, "first", "--namespace="+ns) // no --leader-election flag: the default
	var first string
	eventually(t, ctx, a.exited, "the first process holds the Lease and runs its controllers", func() error {
		h, err := holder()
		if err != nil {
			return err
		}
		if h == "" {
			return fmt.Errorf("the Lease has no holder")
		}
		if ok, err := a.leads(ctx); err != nil || !ok {
			return fmt.Errorf("the first process does not lead (%w)", err)
		}
		first = h
		return nil
	})

	b := startProc(t, "second", "--namespace="+ns)
	eventually(t, ctx, b.exited, "the second process serves its metrics", func() error {
		_, err := b.metrics(ctx)
		return err
	})
	// Long enough for several attempts to acquire (every 2 s).
	time.Sleep(6 * time.Second)
	if ok, err := b.leads(ctx); err != nil || ok {
		t.Errorf("the second process leads while the first runs (%v)", err)
	}
	if m, _ := b.metrics(ctx); strings.Contains(m, databaseController) {
		t.Error("the second process started its controllers while the first leads")
	}
	if h, err := holder(); err != nil || h != first {
		t.Errorf("the Lease holder changed to %q (%v) while the first process runs", h, err)
	}

	a.stop()
	stopped := time.Now()
	tctx, tcancel := context.WithTimeout(ctx, 25*time.Second)
	defer tcancel()
	eventually(t, tctx, b.exited, "the second process takes the Lease over", func() error {
		h, err := holder()
		if err != nil {
			return err
		}
		if h == "" || h == first {
			return fmt.Errorf("holder %q", h)
		}
		if ok, err := b.leads(ctx); err != nil || !ok {
			return fmt.Errorf("the second process does not lead yet (%w)", err)
		}
		return nil
	})
	t.Logf("the second process led %s after the first was stopped", time.Since(stopped).Round(100*time.Millisecond))
}

// Without its namespace the provider cannot hold the Lease: it starts none
// of its controllers, and says why in its log.
func TestLeaderElectionNeedsItsNamespace(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := startProc(t, "no-namespace", "--namespace=no-such-namespace")
	var log string
	eventually(t, ctx, p.exited, "the log says the Lease cannot be written", func() error {
		b, err := os.ReadFile(p.log)
		if err != nil {
			return err
		}
		log = string(b)
		if !strings.Contains(log, "lease lock") || !strings.Contains(log, `namespaces \"no-such-namespace\" not found`) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if ok, err := p.leads(ctx); err != nil || ok {
		t.Errorf("the provider leads without its namespace (%v)", err)
	}
	if m, _ := p.metrics(ctx); strings.Contains(m, databaseController) {
		t.Error("the provider started its controllers without holding the Lease")
	}
}

// /readyz answers 200 only once the provider's caches have synced: started
// as a user RBAC grants nothing, the provider is alive (/healthz 200) but
// not ready (/readyz 500, naming the check) for as long as it cannot list its
// resources; once the user may, it becomes ready without a restart.
func TestReadyOnlyOnceTheCachesSync(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.UserKubeconfig(kc, "provider-without-rbac"); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "unready", "--kubeconfig="+kc, "--namespace="+testenv.ProviderNamespace, "--leader-election=false")
	probe := func(path string) (int, string, error) { return httpGet(ctx, p.healthPort, path+"?verbose") }
	eventually(t, ctx, p.exited, "healthz answers 200", func() error {
		code, _, err := probe("/healthz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	// Not ready, and it stays so while nothing changes.
	for i := 0; i < 5; i++ {
		code, body, err := probe("/readyz")
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusInternalServerError || !strings.Contains(body, "[-]caches-synced failed") {
			t.Fatalf("/readyz without RBAC: HTTP %d %q, want 500 naming the failed cache check", code, body)
		}
		time.Sleep(time.Second)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "provider-without-rbac-gets-it"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "provider-without-rbac"}},
	}
	if err := env.Kube.Client.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Kube.Client.Delete(context.Background(), crb) }()
	eventually(t, ctx, p.exited, "readyz answers 200 once the caches sync", func() error {
		code, body, err := probe("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d %s", code, body)
		}
		return nil
	})
}

// httpGet GETs http://127.0.0.1:<port><path> and returns the status code
// and body.
func httpGet(ctx context.Context, port int, path string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close() //nolint:errcheck // test
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
