// Command devenv runs the local development environment behind `make dev`:
// the same real components the tests use (kube-apiserver + etcd with the
// project's CRDs, PostgreSQL with TLS, OpenBao with Kubernetes auth, the
// External Secrets Operator, Crossplane core), the provider and the
// examples applied with their endpoint and credential pointed at the local
// server.
//
// With -runtime=pod (root only) the provider runs as users run it: a Pod
// that Crossplane core's default package runtime makes from the provider
// package, under examples/provider/runtime-config.yaml, on a real node
// (kubelet, containerd) with the Configuration's function as a Pod too;
// the whole environment then lives in a private network namespace
// (testenv.NodeRun). With -runtime=process the provider built from this
// tree runs as a local process and the functions too.
//
// It writes its state to -state (kubeconfig, CA, provider log, the other
// components' logs under logs/, a "ready" file once the example Database
// and Tenant are Ready) and runs until SIGINT or SIGTERM, then stops
// everything it started.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// State is what `make dev` prints for the developer. It names files and
// addresses, never a credential.
type State struct {
	Kubeconfig     string `json:"kubeconfig"`
	CABundle       string `json:"caBundle"`
	OpenBaoAddress string `json:"openBaoAddress"`
	PostgresHost   string `json:"postgresHost"`
	PostgresPort   int    `json:"postgresPort"`
	ProviderLog    string `json:"providerLog"`
	ProviderPID    int    `json:"providerPID,omitempty"`
	// Runtime is how the provider runs: "pod" or "process".
	Runtime string `json:"runtime"`
	// Netns is, with the pod runtime, the network namespace everything
	// listens in (nsenter --net=<Netns>).
	Netns string `json:"netns,omitempty"`
	// Database is the admin's example Database (cluster-scoped), bound by
	// the static Tenant StaticNamespace/StaticTenant.
	Database        string `json:"database"`
	StaticNamespace string `json:"staticNamespace"`
	StaticTenant    string `json:"staticTenant"`
	StaticSecret    string `json:"staticSecret"`
	// Released is the Database the dynamic example Tenant left behind, and
	// the Tenant the admin then handed it to, with its Secret.
	Released        string `json:"released"`
	TenantNamespace string `json:"tenantNamespace"`
	Tenant          string `json:"tenant"`
	TenantSecret    string `json:"tenantSecret"`
	CrossplaneLog   string `json:"crossplaneLog"`
	LogsDir         string `json:"logsDir"`
}

// The example Tenant's kind.
const (
	tenantAPIVersion = "database.ayatori.ddupan.top/v1alpha1"
	tenantKind       = "Tenant"
)

// skipKinds are in examples/ for clusters that install them by hand; here
// the harness installed the XRDs and Compositions from
// package/configuration and Functions of the same names pointed at local
// processes (examples/tenant/functions.yaml would make core pull them from
// xpkg.crossplane.io).
var skipKinds = map[string]bool{"Function": true, "CompositeResourceDefinition": true, "Composition": true,
	"DeploymentRuntimeConfig": true, "ManagedResourceActivationPolicy": true}

func main() {
	state := flag.String("state", "_output/dev", "Directory for the environment's state files.")
	runtime := flag.String("runtime", "process", `How the provider runs: "pod" (as the Pod Crossplane core makes, on a local node in a private network namespace; needs root) or "process".`)
	flag.Parse()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
	switch *runtime {
	case "process":
		if err := run(*state, false); err != nil {
			fail(err)
		}
	case "pod":
		code, err := testenv.NodeRun(options(true), func() int {
			if err := run(*state, true); err != nil {
				fmt.Fprintln(os.Stderr, "devenv:", err)
				return 1
			}
			return 0
		})
		if err != nil {
			fail(err)
		}
		os.Exit(code)
	default:
		fail(fmt.Errorf("-runtime=%q: want pod or process", *runtime))
	}
}

// options are the components the environment starts.
func options(pod bool) testenv.Options {
	return testenv.Options{Kube: true, Postgres: true, OpenBao: true, ESO: true, Crossplane: true, Node: pod, NodeConfiguration: pod}
}

func step(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }

func run(stateDir string, pod bool) error {
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(stateDir, "ready"))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if pod {
		step("starting, in a private network namespace: kube-apiserver + etcd, PostgreSQL (TLS), OpenBao (TLS, Kubernetes auth), " +
			"the External Secrets Operator, Crossplane core and its RBAC manager under their own service accounts, the garbage collector " +
			"and a node (containerd, kubelet, kube-proxy, cluster DNS); then the provider and Configuration packages installed through " +
			"Crossplane's package manager from a loopback registry: core runs the provider (under examples/provider/runtime-config.yaml) " +
			"and the function as Pods on the node")
	} else {
		step("starting kube-apiserver + etcd, PostgreSQL (TLS), OpenBao (TLS, Kubernetes auth), the External Secrets Operator, " +
			"Crossplane core and its RBAC manager under their own service accounts, the provider and Configuration packages " +
			"installed through Crossplane's package manager from a loopback registry, the functions and the garbage collector, " +
			"all as local processes")
	}
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	env, err := testenv.Start(startCtx, options(pod))
	cancel()
	if err != nil {
		return err
	}
	// The components' logs live in env.Dir, which env.Stop removes: link
	// them into logs/ while running, and keep copies when stopping.
	logsDir := filepath.Join(stateDir, "logs")
	if err := linkLogs(env.Dir, logsDir); err != nil {
		env.Stop()
		return err
	}
	crossplaneLog := filepath.Join(logsDir, filepath.Base(env.Crossplane.LogFile()))
	esoLog := filepath.Join(logsDir, filepath.Base(env.ESO.LogFile()))
	defer func() {
		// Crossplane and ESO first (env.Stop's order), so their logs are
		// complete when copied.
		env.Crossplane.Stop()
		env.ESO.Stop()
		keepLogs(logsDir)
		env.Stop()
	}()

	kubeconfig := filepath.Join(stateDir, "kubeconfig")
	if err := copyFile(env.Kube.KubeconfigFile, kubeconfig); err != nil {
		return err
	}
	ca := filepath.Join(stateDir, "ca.crt")
	if err := os.WriteFile(ca, env.CA.CertPEM, 0o600); err != nil {
		return err
	}

	var (
		providerLog string
		providerPID int
		// provDone reports the provider process's exit; the Pod's
		// container is restarted by the kubelet instead.
		provDone = make(chan error, 1)
	)
	if pod {
		// The kubelet's container logs: <ns>_<pod>_<uid>/<container>/N.log.
		providerLog = filepath.Join(logsDir, "pods")
		if err := os.Symlink(env.Node.PodLogs, providerLog); err != nil {
			return err
		}
		p, err := env.Crossplane.ProviderPod(ctx, env.Kube.Client)
		if err != nil {
			return err
		}
		step("the provider runs as Pod %s/%s (revision %s), its log under %s", p.Namespace, p.Name, env.Crossplane.ProviderRevision, providerLog)
	} else {
		step("building and starting the provider")
		bin, err := testenv.BuildProvider(ctx, stateDir)
		if err != nil {
			return err
		}
		// It runs as the service account Crossplane's RBAC manager bound the
		// provider's generated ClusterRole to, as in a cluster.
		providerLog = filepath.Join(stateDir, "provider.log")
		prov, err := testenv.StartProvider(ctx, env, testenv.ProviderOptions{Bin: bin, LogFile: providerLog, Poll: 15 * time.Second})
		if err != nil {
			return err
		}
		defer prov.Stop()
		providerPID = prov.Pid()
		go func() { <-prov.Done(); provDone <- prov.Exited() }()
	}

	step("applying examples/ (endpoint and admin credential pointed at the local server)")
	ex, err := applyExamples(ctx, env, pod)
	if err != nil {
		return err
	}
	if err := waitUntilWatched(ctx, env, provDone); err != nil {
		return fmt.Errorf("%w; provider log: %s", err, providerLog)
	}
	step("the admin's Database %s (reserved for tenant %s) provisions", ex.db.Name, ex.static)
	if err := waitForDatabase(ctx, env, ex.db, provDone); err != nil {
		return fmt.Errorf("%w; provider log: %s", err, providerLog)
	}
	step("tenant %s binds it (static); tenant %s gets a new Database (dynamic)", ex.static, ex.dynamic)
	staticSecret := ex.static.Name + "-postgresql"
	dynamicSecret := "shared-" + ex.dynamic.Name + "-postgresql"
	for _, w := range []struct {
		tn     types.NamespacedName
		secret string
	}{{ex.static, staticSecret}, {ex.dynamic, dynamicSecret}} {
		if err := waitForTenant(ctx, env, w.tn, crossplaneLog, provDone); err != nil {
			return fmt.Errorf("%w\nprovider log: %s", err, providerLog)
		}
		if err := waitForSecret(ctx, env, w.tn.Namespace, w.secret); err != nil {
			return fmt.Errorf("%w; ESO log: %s", err, esoLog)
		}
	}
	released, next, err := releaseAndRebind(ctx, env, ex.dynamic, crossplaneLog, provDone)
	if err != nil {
		return fmt.Errorf("%w\nprovider log: %s", err, providerLog)
	}
	nextSecret := next.Name + "-postgresql"
	if err := waitForSecret(ctx, env, next.Namespace, nextSecret); err != nil {
		return fmt.Errorf("%w; ESO log: %s", err, esoLog)
	}
	st := State{
		Kubeconfig: kubeconfig, CABundle: ca, OpenBaoAddress: env.OpenBao.Address,
		PostgresHost: env.Postgres.Host, PostgresPort: env.Postgres.Port,
		ProviderLog: providerLog, ProviderPID: providerPID, Runtime: map[bool]string{true: "pod", false: "process"}[pod], Netns: testenv.NodeNetns(),
		Database: ex.db.Name, StaticNamespace: ex.static.Namespace, StaticTenant: ex.static.Name, StaticSecret: staticSecret,
		Released: released, TenantNamespace: next.Namespace, Tenant: next.Name, TenantSecret: nextSecret,
		CrossplaneLog: crossplaneLog, LogsDir: logsDir,
	}
	// A local, throw-away OpenBao: its root token goes to a 0600 file so
	// the developer can read the tenant record (it is never printed).
	if err := os.WriteFile(filepath.Join(stateDir, "openbao-root-token"), []byte(env.OpenBao.RootToken), 0o600); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(stateDir, "state.json"), b, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stateDir, "ready"), nil, 0o600); err != nil {
		return err
	}
	step("ready")

	select {
	case <-ctx.Done():
		step("stopping")
		return nil
	case err := <-provDone:
		return fmt.Errorf("the provider exited: %w (log: %s)", err, providerLog)
	}
}

// applyExamples applies every object under examples/ but the kinds in
// skipKinds, pointing the ClusterProviderConfig at the local server, filling
// the admin Secret with the local admin role and the ClusterSecretStore with
// the local OpenBao. It returns the example Database and Tenants.
func applyExamples(ctx context.Context, env *testenv.Env, pod bool) (ex examples, err error) {
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples"))
	if err != nil {
		return ex, err
	}
	kube := env.Kube.Client
	// Namespaces first, then what others refer to (the ClusterSecretStore
	// before the ExternalSecrets, the ClusterProviderConfig before the
	// Database), then the rest in path order.
	sort.SliceStable(objs, func(i, j int) bool { return applyRank(objs[i]) < applyRank(objs[j]) })
	skipped := map[string]int{}
	for _, o := range objs {
		if skipKinds[o.GetKind()] {
			skipped[o.GetKind()]++
			continue
		}
		switch o.GetKind() {
		case "Namespace":
			if err := env.Kube.EnsureNamespace(ctx, o.GetName()); err != nil {
				return ex, err
			}
			fmt.Printf("    applied namespace %s\n", o.GetName())
			continue
		case "Secret":
			// The admin Secret; OpenBao's token reviewer
			// (examples/openbao) is applied as written and unused: the
			// harness configured OpenBao.
			if o.GetNamespace() == testenv.ProviderNamespace {
				if err := setStringData(o, env); err != nil {
					return ex, err
				}
			}
		case v1alpha1.ClusterProviderConfigKind:
			// A Pod reaches the server at the node's address.
			hostaddr := env.Postgres.Hostaddr
			if pod {
				hostaddr = env.Postgres.PodHostaddr
			}
			ep := map[string]any{
				"host":     env.Postgres.Host,
				"hostaddr": hostaddr,
				"port":     int64(env.Postgres.Port),
			}
			if err := unstructured.SetNestedMap(o.Object, ep, "spec", "endpoint"); err != nil {
				return ex, err
			}
		case v1alpha1.DatabaseKind:
			ex.db = types.NamespacedName{Name: o.GetName()}
		case tenantKind:
			if o.GetAPIVersion() == tenantAPIVersion {
				key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
				if _, static, _ := unstructured.NestedString(o.Object, "spec", "databaseRef"); static {
					ex.static = key
				} else {
					ex.dynamic = key
				}
			}
		case "ClusterSecretStore":
			vault := map[string]any{"server": env.OpenBao.Address, "caBundle": base64.StdEncoding.EncodeToString(env.CA.CertPEM)}
			for k, v := range vault {
				if err := unstructured.SetNestedField(o.Object, v, "spec", "provider", "vault", k); err != nil {
					return ex, err
				}
			}
		}
		if err := kube.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return ex, fmt.Errorf("cannot apply example %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		fmt.Printf("    applied %s %s\n", strings.ToLower(o.GetKind()), nsName(o))
	}
	if len(skipped) > 0 {
		var kinds []string
		for _, k := range []string{"Function", "CompositeResourceDefinition", "Composition", "DeploymentRuntimeConfig", "ManagedResourceActivationPolicy"} {
			if skipped[k] > 0 {
				kinds = append(kinds, fmt.Sprintf("%d %s", skipped[k], k))
			}
		}
		fmt.Printf("    skipped %s: installed with the packages (the Configuration package brings\n"+
			"      its XRDs, Compositions and Functions; the provider's runtime config and activation\n"+
			"      policy came with the provider package)\n", strings.Join(kinds, ", "))
	}
	if ex.db.Name == "" || ex.static.Name == "" || ex.dynamic.Name == "" {
		return ex, fmt.Errorf("examples/ needs a Database, a static and a dynamic %s %s (found database %q, static %q, dynamic %q)", tenantAPIVersion, tenantKind, ex.db, ex.static, ex.dynamic)
	}
	return ex, nil
}

// examples are the objects of examples/ that `make dev` follows.
type examples struct {
	db, static, dynamic types.NamespacedName
}

// applyRank orders the examples for applying: see applyExamples.
func applyRank(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "Namespace":
		return 0
	case "ServiceAccount", "Secret", "ClusterRole", "ClusterSecretStore", "SecretStore",
		v1alpha1.ClusterProviderConfigKind:
		return 1
	default:
		return 2
	}
}

func setStringData(o *unstructured.Unstructured, env *testenv.Env) error {
	sd := map[string]any{"username": env.Postgres.AdminUser, "password": env.Postgres.AdminPassword}
	return unstructured.SetNestedMap(o.Object, sd, "stringData")
}

// errTimedOut is what watch returns when the timeout passes.
var errTimedOut = errors.New("timed out")

// watch calls check every 500 ms until it reports done, printing each new
// status line; it stops early when the provider exits or ctx ends, and
// returns the last line with errTimedOut after timeout.
func watch(ctx context.Context, provDone <-chan error, timeout time.Duration, check func() (line string, done bool)) (string, error) {
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		line, done := check()
		if line != "" && line != last {
			fmt.Println("    " + line)
			last = line
		}
		if done {
			return last, nil
		}
		select {
		case err := <-provDone:
			return last, fmt.Errorf("the provider exited: %w", err)
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return last, errTimedOut
}

// waitUntilWatched waits until the provider has validated the example
// ClusterProviderConfig and counts the example Database as its user.
func waitUntilWatched(ctx context.Context, env *testenv.Env, provDone <-chan error) error {
	final := ""
	_, err := watch(ctx, provDone, 2*time.Minute, func() (string, bool) {
		cpc := &v1alpha1.ClusterProviderConfig{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: "shared"}, cpc); err != nil {
			return "", false
		}
		c := cpc.GetCondition(xpv2.TypeReady)
		done := c.Status == corev1.ConditionTrue && cpc.Status.Users > 0
		final = c.Message
		return fmt.Sprintf("clusterproviderconfig/shared: phase=%s ready=%s reason=%s users=%d", cpc.Status.Phase, c.Status, c.Reason, cpc.Status.Users), done
	})
	if errors.Is(err, errTimedOut) {
		return errors.New("the provider did not pick up clusterproviderconfig/shared within 2 minutes")
	}
	if err == nil {
		fmt.Printf("    %s\n", final)
	}
	return err
}

// waitForDatabase waits until the example Database is Ready, showing its
// phases as they change.
func waitForDatabase(ctx context.Context, env *testenv.Env, key types.NamespacedName, provDone <-chan error) error {
	final := ""
	_, err := watch(ctx, provDone, 3*time.Minute, func() (string, bool) {
		db := &v1alpha1.Database{}
		if err := env.Kube.Client.Get(ctx, key, db); err != nil {
			return "", false
		}
		c := db.GetCondition(xpv2.TypeReady)
		done := c.Status == corev1.ConditionTrue
		final = fmt.Sprintf("%s\n    credential: %s", c.Message, db.Status.AtProvider.Credential.OpenBaoURL)
		return fmt.Sprintf("database/%s: phase=%s binding=%s claim=%s ready=%s reason=%s", key.Name, db.Status.AtProvider.Phase, db.Status.Binding.Phase, db.Status.Binding.Claim, c.Status, c.Reason), done
	})
	if errors.Is(err, errTimedOut) {
		return fmt.Errorf("database %s did not become Ready within 3 minutes", key)
	}
	if err == nil {
		fmt.Printf("    %s\n", final)
	}
	return err
}

// waitForTenant waits until Crossplane has composed the example Tenant to
// phase Ready with a Ready condition True, showing its phases as they change.
func waitForTenant(ctx context.Context, env *testenv.Env, key types.NamespacedName, crossplaneLog string, provDone <-chan error) error {
	var u *unstructured.Unstructured
	last, err := watch(ctx, provDone, 3*time.Minute, func() (string, bool) {
		t := &unstructured.Unstructured{}
		t.SetAPIVersion(tenantAPIVersion)
		t.SetKind(tenantKind)
		if err := env.Kube.Client.Get(ctx, key, t); err != nil {
			return "", false
		}
		u = t
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		st, reason, msg := tenantkit.Condition(u, "Ready")
		s := fmt.Sprintf("tenant/%s: phase=%s ready=%s reason=%s", key.Name, phase, st, reason)
		if msg != "" && st != "True" {
			s += " message=" + strconv.Quote(msg)
		}
		done := phase == "Ready" && st == "True"
		return s, done
	})
	if errors.Is(err, errTimedOut) {
		if last == "" {
			last = "not found"
		}
		return fmt.Errorf("tenant %s did not become Ready within 3 minutes; last status: %s\n%s"+
			"crossplane log: %s (its last lines below; the functions' logs are in the same directory)\n%s",
			key, last, composed(ctx, env, u), crossplaneLog, tail(crossplaneLog, 20))
	}
	if err == nil {
		url, _, _ := unstructured.NestedString(u.Object, "status", "credential", "openBaoURL")
		fmt.Printf("    credential: %s\n", url)
	}
	return err
}

// composed describes the readiness of the resources Crossplane composed
// for the XR u, for an error message.
func composed(ctx context.Context, env *testenv.Env, u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "crossplane", "resourceRefs")
	var b strings.Builder
	for _, r := range refs {
		m, _ := r.(map[string]any)
		if m == nil {
			continue
		}
		c := &unstructured.Unstructured{}
		c.SetAPIVersion(fmt.Sprint(m["apiVersion"]))
		c.SetKind(fmt.Sprint(m["kind"]))
		name := fmt.Sprint(m["name"])
		if err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: name}, c); err != nil {
			fmt.Fprintf(&b, "  composed %s %s: %v\n", c.GetKind(), name, err)
			continue
		}
		st, reason, msg := tenantkit.Condition(c, "Ready")
		fmt.Fprintf(&b, "  composed %s %s: Ready=%s %s\n", c.GetKind(), name, st, strings.TrimSpace(reason+" "+msg))
	}
	if st, reason, msg := tenantkit.Condition(u, "Synced"); st != "True" {
		fmt.Fprintf(&b, "  tenant Synced=%s %s\n", st, strings.TrimSpace(reason+" "+msg))
	}
	return b.String()
}

// tail returns the last n lines of a log, without the API deprecation
// warnings core's client prints (they say nothing about a Tenant).
func tail(file string, n int) string {
	var lines []string
	for _, l := range strings.Split(testenv.Tail(file, 1000), "\n") {
		if !strings.HasPrefix(l, "Warning: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitForSecret waits until ESO has projected the credential into the app
// namespace, and prints the Secret's keys (never its values).
func waitForSecret(ctx context.Context, env *testenv.Env, ns, name string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		s := &corev1.Secret{}
		if err := env.Kube.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err == nil {
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			fmt.Printf("    secret/%s in namespace %s (projected by ESO from OpenBao): keys %v\n", name, ns, keys)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("ESO did not project secret %s/%s within 2 minutes", ns, name)
}

func nsName(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// linkLogs links every *.log of the environment's directory into dir,
// emptied first (it may hold the copies of a previous run).
func linkLogs(envDir, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	logs, err := filepath.Glob(filepath.Join(envDir, "*.log"))
	if err != nil {
		return err
	}
	for _, l := range logs {
		if err := os.Symlink(l, filepath.Join(dir, filepath.Base(l))); err != nil {
			return err
		}
	}
	return nil
}

// keepLogs replaces the links linkLogs made by copies, before the
// environment's directory is removed.
func keepLogs(dir string) {
	links, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range links {
		target, err := os.Readlink(l)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(target) //nolint:gosec // our own environment's log
		if err != nil {
			continue
		}
		if os.Remove(l) == nil {
			_ = os.WriteFile(l, b, 0o600) //nolint:gosec // a link in our own logs directory, replaced by its target's copy
		}
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from) //nolint:gosec // the environment's own kubeconfig
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600) //nolint:gosec // into the state directory the developer chose
}

// releaseAndRebind shows a Database outliving its Tenant: it deletes the
// dynamic example Tenant, waits until its Database is Released (database,
// role and record kept), then does what an admin does to hand it over —
// reserves it for a new Tenant — and creates that Tenant, which binds it.
// It returns the Database and the new Tenant.
func releaseAndRebind(ctx context.Context, env *testenv.Env, tn types.NamespacedName, crossplaneLog string, provDone <-chan error) (string, types.NamespacedName, error) {
	kube := env.Kube.Client
	next := types.NamespacedName{Namespace: tn.Namespace, Name: tn.Name + "-next"}
	t := &unstructured.Unstructured{}
	t.SetAPIVersion(tenantAPIVersion)
	t.SetKind(tenantKind)
	if err := kube.Get(ctx, tn, t); err != nil {
		return "", next, err
	}
	db := "tenant-" + string(t.GetUID())
	step("release: deleting tenant %s; its Database %s outlives it (the instance's defaultReclaimPolicy is Retain)", tn, db)
	if err := kube.Delete(ctx, t); err != nil {
		return "", next, err
	}
	_, err := watch(ctx, provDone, 3*time.Minute, func() (string, bool) {
		d := &v1alpha1.Database{}
		if err := kube.Get(ctx, types.NamespacedName{Name: db}, d); err != nil {
			return fmt.Sprintf("database/%s: %v", db, err), false
		}
		b := &v1alpha1.DatabaseBinding{}
		bindingGone := apierrors.IsNotFound(kube.Get(ctx, tn, b))
		line := fmt.Sprintf("database/%s: binding=%s claim=%s reclaim=%s ready=%s", db, d.Status.Binding.Phase, d.Status.Binding.Claim, d.Spec.ReclaimPolicy, d.GetCondition(xpv2.TypeReady).Status)
		return line, bindingGone && d.Status.Binding.Phase == v1alpha1.BindingReleased
	})
	if errors.Is(err, errTimedOut) {
		return "", next, fmt.Errorf("database %s was not Released within 3 minutes", db)
	}
	if err != nil {
		return "", next, err
	}
	step("rebind: the admin, having decided about the data and the old access (docs/admins.md), reserves %s for tenant %s", db, next)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &v1alpha1.Database{}
		if err := kube.Get(ctx, types.NamespacedName{Name: db}, d); err != nil {
			return err
		}
		d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: next.Namespace, Name: next.Name}
		return kube.Update(ctx, d)
	})
	if err != nil {
		return "", next, err
	}
	spec := map[string]any{"databaseRef": db}
	if roles, ok, _ := unstructured.NestedSlice(t.Object, "spec", "dataRoles"); ok {
		// The Database kept the data roles the first Tenant asked for:
		// the new one asks for them too and gets their Secrets.
		spec["dataRoles"] = roles
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": tenantAPIVersion, "kind": tenantKind,
		"metadata": map[string]any{"namespace": next.Namespace, "name": next.Name},
		"spec":     spec,
	}}
	if err := kube.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", next, err
	}
	fmt.Printf("    applied tenant %s (databaseRef: %s)\n", next, db)
	return db, next, waitForTenant(ctx, env, next, crossplaneLog, provDone)
}
