package testenv

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CrossplaneNamespace is where Crossplane core keeps its Secrets.
const CrossplaneNamespace = "crossplane-system"

// Crossplane is Crossplane core run as a local process against the test
// apiserver, installed as its Helm chart would install it but without pods:
// core and its RBAC manager run under their own service accounts with the
// chart's ClusterRoles (rendered from the pinned chart), and the package
// runtime is deferred ("External"). Packages are installed through core's
// package manager from a loopback registry (an ImageConfig rewrites their
// public names to it), so nothing leaves the machine. The harness plays the
// external runtime: it starts each Function as a local mTLS gRPC server and
// points its revision at it, and for the provider revision it creates the
// service account and the (never scheduled) Deployment the Deployment
// runtime would, so that the RBAC manager binds the provider's generated
// ClusterRole to that service account; the provider process then runs with
// that service account's token. Core's Usage webhook is registered with a
// loopback URL, so Usages protect what they should.
type Crossplane struct {
	logFile string
	proc    *process
	rbac    *process
	fns     []*process
	fnAddrs map[string]string
	aggr    *process
	kcm     *process
	// rbacLock is held while the RBAC manager runs.
	rbacLock *os.File
	// rbacArgs and rbacEnv start the RBAC manager again.
	rbacArgs, rbacEnv []string
	// keepRBACManager keeps the RBAC manager running after the packages
	// are installed, for tests that install new revisions later (each
	// needs its roles bound).
	keepRBACManager bool
	// providerPod changes the runtime config InstallProviderPod applies
	// (Options.NodeProvider).
	providerPod *ProviderPodOptions
	rbacLog     string
	reg         *registry
	// coreArgs, coreEnv and healthPort start core again (RestartCore).
	coreArgs   []string
	coreEnv    []string
	healthPort int

	serverCertDir string
	// ProviderKubeconfig authenticates as the provider revision's service
	// account: what the provider process runs with.
	ProviderKubeconfig string
	// ProviderServiceAccount is that service account (in CrossplaneNamespace).
	ProviderServiceAccount string
	// ProviderRevision is the provider's active revision.
	ProviderRevision string

	// ProviderPodReady is how long the provider took, on the node, from
	// the Provider's creation to Healthy (its Pod Ready).
	ProviderPodReady time.Duration

	// node: core runs its default (Deployment) package runtime, whose
	// Deployments the test node runs (Options.Node), the function's too
	// with Options.NodeConfiguration.
	node bool
}

// CrossplaneCRDDir is where hack/install-tools.sh puts core's CRDs.
func CrossplaneCRDDir(binDir string) string { return filepath.Join(binDir, "crossplane-crds") }

func startCrossplane(ctx context.Context, root, binDir string, k *Kube, ca *CA, node, drill bool) (*Crossplane, error) {
	for _, b := range []string{"crossplane-core", "kube-controller-manager", "crossplane", "crane"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, missing(b, filepath.Join(binDir, b), "make tools (hack/install.sh)")
		}
	}
	dir := filepath.Join(root, "crossplane")
	server, clientDir, cache := filepath.Join(dir, "server"), filepath.Join(dir, "client"), filepath.Join(dir, "xpkg-cache")
	for _, d := range []string{server, clientDir, cache} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	// Functions and core's webhook serve on loopback; core presents a client
	// certificate to the functions.
	if err := ca.issueTLSDir(server, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if err := ca.issueTLSDir(clientDir, []string{"crossplane.crossplane-system"}, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	x := &Crossplane{logFile: filepath.Join(root, "crossplane.log"), serverCertDir: server, fnAddrs: map[string]string{}, node: node}
	fail := func(err error) (*Crossplane, error) { x.Stop(); return nil, err }

	// ClusterRole aggregation (kube-controller-manager's controller): core's
	// ClusterRole is the union of the roles labelled for it, among them the
	// ones the RBAC manager generates and the ones the docs tell an admin to
	// apply. The node's kube-controller-manager runs it already.
	var err error
	if !node {
		aggrLog := filepath.Join(root, "kube-controller-manager-aggregation.log")
		if x.aggr, err = startProcess("kube-controller-manager", aggrLog, exec.Command(filepath.Join(binDir, "kube-controller-manager"), //nolint:gosec,noctx // the pinned binary; runs until Stop
			"--kubeconfig="+k.KubeconfigFile, "--authentication-kubeconfig="+k.KubeconfigFile, "--authorization-kubeconfig="+k.KubeconfigFile,
			"--leader-elect=false", "--controllers=clusterrole-aggregation",
			"--bind-address=127.0.0.1", "--secure-port=0", "--use-service-account-credentials=false")); err != nil {
			return fail(err)
		}
	}
	coreKubeconfig, rbacKubeconfig, err := installCrossplaneRBAC(ctx, root, binDir, k)
	if err != nil {
		return fail(err)
	}
	// What the docs tell an admin to apply with the packages (an install
	// drill applies them itself, from the docs).
	if !drill {
		rbacObjs, err := ReadManifests(filepath.Join(RepoRoot(), "package", "rbac"))
		if err != nil {
			return fail(err)
		}
		for _, o := range rbacObjs {
			if err := k.Client.Create(ctx, o); err != nil {
				return fail(fmt.Errorf("package/rbac %s %s: %w", o.GetKind(), o.GetName(), err))
			}
		}
		// The admission policy the docs tell an admin to install with the
		// provider: only Crossplane's namespace and cluster admins write
		// DatabaseBindings.
		if err := k.InstallAdmissionPolicies(ctx); err != nil {
			return fail(err)
		}
	}
	kenv := append(os.Environ(), "KUBECONFIG="+coreKubeconfig)

	// core init: the TLS Secrets, the package Lock, the default runtime
	// config. Its CRDs were installed with the apiserver's.
	if err := WaitFor(ctx, 60*time.Second, func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "crossplane-core"), "core", "init", "--cr-ds-path="+CrossplaneCRDDir(binDir), //nolint:gosec // the pinned binary
			"--enable-webhooks=false", "--namespace="+CrossplaneNamespace,
			"--tlsca-secret-name=crossplane-root-ca", "--tls-client-secret-name=crossplane-tls-client")
		cmd.Env = kenv
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("crossplane core init: %w\n%s", err, out)
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	if node {
		// The functions' Pods serve certificates of core's own CA (core
		// makes their TLS Secrets) and accept clients of it: core presents
		// the client certificate core init made, as its Pod mounts it in
		// a cluster.
		if err := writeSecretFiles(ctx, k, "crossplane-tls-client", clientDir); err != nil {
			return fail(err)
		}
	}

	ports := make([]int, 3)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return fail(err)
		}
		ports[i] = p
	}
	webhook, metrics, health := ports[0], ports[1], ports[2]
	pkgRuntime := "--package-runtime=External"
	if node {
		pkgRuntime = "--package-runtime=Deployment" // core's default
	}
	cmd := exec.Command(filepath.Join(binDir, "crossplane-core"), "core", "start", //nolint:gosec,noctx // the pinned binary; runs until Stop
		"--namespace="+CrossplaneNamespace, pkgRuntime, "--xpkg-cache-dir="+cache,
		"--tls-client-certs-dir="+clientDir, "--tls-server-certs-dir="+server,
		"--enable-webhooks=true", fmt.Sprintf("--webhook-port=%d", webhook),
		fmt.Sprintf("--metrics-port=%d", metrics), fmt.Sprintf("--health-probe-port=%d", health),
		"--leader-election=false", "--poll-interval=1m")
	cmd.Env = kenv
	x.coreArgs, x.coreEnv, x.healthPort = cmd.Args, kenv, health
	if x.proc, err = startProcess("crossplane", x.logFile, cmd); err != nil {
		return fail(err)
	}
	// The RBAC manager always serves metrics on FixedMetricsPort (it has no
	// flag for it), and so do the functions: see FixedMetricsPort for how
	// environments share it. The manager runs under the machine-wide lock
	// while packages are installed, from a free port, and stops once it
	// has generated the roles of the packages' kinds (InstallPackages).
	x.rbacLog = filepath.Join(root, "crossplane-rbac-manager.log")
	rcmd := exec.Command(filepath.Join(binDir, "crossplane-core"), "rbac", "start", //nolint:gosec,noctx // the pinned binary; runs until the packages are installed
		"--provider-clusterrole=crossplane:allowed-provider-permissions", "--leader-election=false")
	rcmd.Env = append(os.Environ(), "KUBECONFIG="+rbacKubeconfig)
	x.rbacArgs, x.rbacEnv = rcmd.Args, rcmd.Env
	if x.rbacLock, x.rbac, err = metricsPort().startHolder(ctx, "crossplane-rbac-manager", x.rbacLog, rcmd); err != nil {
		return fail(fmt.Errorf("crossplane's RBAC manager: %w", err))
	}
	if err := x.waitCoreReady(ctx); err != nil {
		return fail(err)
	}
	// Core's Usage webhook: in a cluster a Service fronts it; here the
	// apiserver calls core on loopback.
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "crossplane-no-usages"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "nousages.protection.crossplane.io",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/validate-no-usages", webhook)), CABundle: ca.CertPEM},
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"crossplane.io/in-use": "true"}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Delete},
				Rule:       admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
			}},
		}},
	}
	if err := k.Client.Create(ctx, vwc); err != nil {
		return fail(err)
	}

	// The functions, as local processes; their Function objects come from
	// the Configuration's dependencies. Not with the node's Deployment
	// runtime, which runs them as Pods that core reaches by their
	// Service's DNS name (Options.NodeConfiguration).
	fns := TenantFunctions
	if node {
		fns = nil
	}
	for _, f := range fns {
		port, err := FreePort()
		if err != nil {
			return fail(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		// Started while the RBAC manager holds FixedMetricsPort, so it
		// never takes it.
		cfg, err := clientTLS(clientDir)
		if err != nil {
			return fail(err)
		}
		bin, err := f.binary(ctx)
		if err != nil {
			return fail(err)
		}
		name := filepath.Base(bin)
		p, err := startBeside(ctx, x.rbac, x.rbacLog, name, filepath.Join(root, name+".log"),
			exec.Command(bin, "--address="+addr, "--tls-certs-dir="+server, "--debug"), addr, cfg) //nolint:gosec,noctx // the function's binary; runs until Stop
		if p != nil {
			x.fns = append(x.fns, p)
		}
		if err != nil {
			return fail(err)
		}
		x.fnAddrs[f.Name] = addr
	}
	if x.reg, err = startRegistry(ctx, root, binDir); err != nil {
		return fail(err)
	}
	return x, nil
}

// InstallPackages installs the provider package and the Configuration
// package through core's package manager, as `crossplane xpkg install`
// would: it publishes them (built by PackagesDir) and the functions'
// packages to the loopback registry, applies the examples' runtime config
// and activation policy, installs the provider, plays its external runtime
// (see Crossplane), installs the Configuration (whose dependencies bring
// the functions), waits until Crossplane serves its XRDs, then starts
// kube-controller-manager's garbage collector (it discovers new kinds only
// every 30 s, so after the XRDs): Crossplane relies on it to delete
// composed resources with their XR.
func (x *Crossplane) InstallPackages(ctx context.Context, root, binDir, pkgDir string, k *Kube) error {
	deps, err := configurationDependencies()
	if err != nil {
		return err
	}
	providerRef := ProviderPackageName + ":" + PackageTestVersion
	hosts := map[string]bool{hostOf(ProviderPackageName): true, hostOf(ConfigurationPackageName): true}
	for _, d := range deps {
		hosts[hostOf(d.pkg)] = true
		switch d.kind {
		case "Function":
			var fn *Function
			for i := range TenantFunctions {
				if strings.HasPrefix(TenantFunctions[i].Package, d.pkg+":") {
					fn = &TenantFunctions[i]
				}
			}
			if fn == nil {
				return fmt.Errorf("the Configuration depends on %s, which the harness does not run", d.pkg)
			}
			file := filepath.Join(pkgDir, fn.PackageFile)
			if fn.Source == "" {
				file = filepath.Join(root, fn.Binary+".xpkg")
				if err := buildXpkg(ctx, binDir, filepath.Join(binDir, fn.Binary+"-package"), file); err != nil {
					return err
				}
			}
			if err := x.reg.push(ctx, binDir, file, d.pkg+":"+tagFor(d.version)); err != nil {
				return err
			}
		case "Provider":
			if d.pkg != ProviderPackageName {
				return fmt.Errorf("the Configuration depends on provider %s, not on %s", d.pkg, ProviderPackageName)
			}
			providerRef = d.pkg + ":" + tagFor(d.version)
		}
	}
	if err := x.reg.push(ctx, binDir, filepath.Join(pkgDir, "provider-postgresql-tenant.xpkg"), providerRef); err != nil {
		return err
	}
	configurationRef := ConfigurationPackageName + ":" + PackageTestVersion
	if err := x.reg.push(ctx, binDir, filepath.Join(pkgDir, "configuration-postgresql-tenant.xpkg"), configurationRef); err != nil {
		return err
	}
	if err := x.imageConfigs(ctx, k, hosts); err != nil {
		return err
	}

	// The provider, with the examples' runtime config and activation policy.
	examples, err := ReadManifests(filepath.Join(RepoRoot(), "examples", "provider"))
	if err != nil {
		return err
	}
	runtimeConfig, saName := "", ""
	for _, o := range examples {
		switch o.GetKind() {
		case "DeploymentRuntimeConfig":
			runtimeConfig = o.GetName()
			saName, _, _ = unstructured.NestedString(o.Object, "spec", "serviceAccountTemplate", "metadata", "name")
		case "ManagedResourceActivationPolicy":
		default:
			continue
		}
		if err := k.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("examples/provider %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if runtimeConfig == "" || saName == "" {
		return errors.New("examples/provider needs a DeploymentRuntimeConfig naming the provider's service account")
	}
	prov := packageObject("Provider", ProviderName, providerRef)
	_ = unstructured.SetNestedField(prov.Object, runtimeConfig, "spec", "runtimeConfigRef", "name")
	if err := k.Client.Create(ctx, prov); err != nil {
		return err
	}
	rev, err := x.activeRevision(ctx, k, "ProviderRevision", ProviderName, false, 3*time.Minute)
	if err != nil {
		return fmt.Errorf("provider %s: %w\ncrossplane log:\n%s", providerRef, err, Tail(x.logFile, 30))
	}
	if err := x.playProviderRuntime(ctx, root, k, rev, saName); err != nil {
		return err
	}

	cfg := packageObject("Configuration", ConfigurationName, configurationRef)
	if err := k.Client.Create(ctx, cfg); err != nil {
		return err
	}
	for _, f := range TenantFunctions {
		if err := x.playFunctionRuntime(ctx, k, f.Name, x.fnAddrs[f.Name]); err != nil {
			return fmt.Errorf("function %s: %w\ncrossplane log:\n%s", f.Name, err, Tail(x.logFile, 30))
		}
	}
	if err := x.waitConfigurationXRDs(ctx, k); err != nil {
		return err
	}
	x.stopRBACManager()
	kcmLog := filepath.Join(root, "kube-controller-manager.log")
	cmd := exec.Command(filepath.Join(binDir, "kube-controller-manager"), //nolint:gosec,noctx // the pinned binary; runs until Stop
		"--kubeconfig="+k.KubeconfigFile, "--authentication-kubeconfig="+k.KubeconfigFile, "--authorization-kubeconfig="+k.KubeconfigFile,
		"--leader-elect=false", "--controllers=namespace-controller,garbage-collector-controller",
		"--bind-address=127.0.0.1", "--secure-port=0", "--use-service-account-credentials=false")
	if x.kcm, err = startProcess("kube-controller-manager", kcmLog, cmd); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	if x.kcm.exited() {
		return errors.New("kube-controller-manager exited at once:\n" + Tail(kcmLog, 20))
	}
	return nil
}

// waitConfigurationXRDs waits until core serves the Configuration's XRDs
// (Established, and Offered when they have claims) and the RBAC manager has
// generated core's roles for their kinds.
func (x *Crossplane) waitConfigurationXRDs(ctx context.Context, k *Kube) error {
	objs, err := ReadManifests(filepath.Join(RepoRoot(), "package", "configuration"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() != "CompositeResourceDefinition" {
			continue
		}
		name := o.GetName()
		if err := WaitFor(ctx, 3*time.Minute, func(ctx context.Context) error {
			if err := x.rbacExited(); err != nil {
				return err
			}
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("apiextensions.crossplane.io/v2")
			u.SetKind("CompositeResourceDefinition")
			if err := k.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
				return err
			}
			for _, want := range []string{"Established", "Offered"} {
				st := conditionStatus(u, want)
				if want == "Offered" && st == "" && !hasClaims(u) {
					continue
				}
				if st != "True" {
					return fmt.Errorf("XRD %s: %s=%q", name, want, st)
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("%w\ncrossplane log:\n%s", err, Tail(x.logFile, 30))
		}
	}
	// Every role the packages need exists once the RBAC manager has
	// generated core's roles for the XRDs' kinds; it stops then (see
	// startCrossplane).
	if err := WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		for _, o := range objs {
			if o.GetKind() != "CompositeResourceDefinition" {
				continue
			}
			if err := x.rbacExited(); err != nil {
				return err
			}
			if err := k.Client.Get(ctx, client.ObjectKey{Name: "crossplane:composite:" + o.GetName() + ":aggregate-to-crossplane"}, &rbacv1.ClusterRole{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("the RBAC manager did not generate core's roles for the XRDs: %w", err)
	}
	return nil
}

// writeSecretFiles writes tls.crt, tls.key and ca.crt of a Secret in
// CrossplaneNamespace into dir.
func writeSecretFiles(ctx context.Context, k *Kube, name, dir string) error {
	sec := &corev1.Secret{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: CrossplaneNamespace, Name: name}, sec); err != nil {
		return fmt.Errorf("core's Secret %s: %w", name, err)
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(sec.Data[f]) == 0 {
			return fmt.Errorf("core's Secret %s has no %s", name, f)
		}
		if err := os.WriteFile(filepath.Join(dir, f), sec.Data[f], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// imageConfigs makes Crossplane pull every package of hosts from the
// loopback registry, where the packages keep their path: the admin's
// ImageConfig of examples/provider, pointed at it, for its prefix's host;
// one of the harness's for any other host.
func (x *Crossplane) imageConfigs(ctx context.Context, k *Kube, hosts map[string]bool) error {
	example, examplePrefix, err := exampleImageConfig()
	if err != nil {
		return err
	}
	for h := range hosts {
		if example != nil && strings.HasPrefix(examplePrefix, h+"/") {
			ic := example.DeepCopy()
			_ = unstructured.SetNestedField(ic.Object, x.reg.addr+"/"+examplePrefix, "spec", "rewriteImage", "prefix")
			if err := k.Client.Create(ctx, ic); err != nil {
				return fmt.Errorf("examples/provider ImageConfig %s: %w", ic.GetName(), err)
			}
			continue
		}
		ic := &unstructured.Unstructured{}
		ic.SetAPIVersion("pkg.crossplane.io/v1beta1")
		ic.SetKind("ImageConfig")
		ic.SetName("loopback-" + strings.ReplaceAll(h, ".", "-"))
		_ = unstructured.SetNestedSlice(ic.Object, []any{map[string]any{"type": "Prefix", "prefix": h + "/"}}, "spec", "matchImages")
		_ = unstructured.SetNestedField(ic.Object, x.reg.addr+"/"+h+"/", "spec", "rewriteImage", "prefix")
		if err := k.Client.Create(ctx, ic); err != nil {
			return fmt.Errorf("ImageConfig %s: %w", ic.GetName(), err)
		}
	}
	return nil
}

// exampleImageConfig is the ImageConfig of examples/provider (nil when
// there is none) and the one prefix it matches, which must cover the
// provider's and the Configuration's packages.
func exampleImageConfig() (*unstructured.Unstructured, string, error) {
	objs, err := ReadManifests(filepath.Join(RepoRoot(), "examples", "provider"))
	if err != nil {
		return nil, "", err
	}
	for _, o := range objs {
		if o.GetKind() != "ImageConfig" {
			continue
		}
		m, _, _ := unstructured.NestedSlice(o.Object, "spec", "matchImages")
		if len(m) != 1 {
			return nil, "", fmt.Errorf("examples/provider ImageConfig %s: want one matchImages entry, got %d", o.GetName(), len(m))
		}
		prefix, _, _ := unstructured.NestedString(m[0].(map[string]any), "prefix")
		for _, p := range []string{ProviderPackageName, ConfigurationPackageName} {
			if !strings.HasPrefix(p, prefix) {
				return nil, "", fmt.Errorf("examples/provider ImageConfig %s: prefix %q does not cover %s", o.GetName(), prefix, p)
			}
		}
		return o, prefix, nil
	}
	return nil, "", nil
}

func hostOf(pkg string) string {
	h, _, _ := strings.Cut(pkg, "/")
	return h
}

// activeRevision waits until the package has an active revision, which has
// installed its objects when needObjects, and returns its name.
func (x *Crossplane) activeRevision(ctx context.Context, k *Kube, kind, pkg string, needObjects bool, timeout time.Duration) (string, error) {
	name := ""
	err := WaitFor(ctx, timeout, func(ctx context.Context) error {
		if err := x.rbacExited(); err != nil {
			return err
		}
		rev, err := activeRevisionOf(ctx, k.Client, kind, pkg)
		if err != nil {
			return err
		}
		if needObjects {
			refs, _, _ := unstructured.NestedSlice(rev.Object, "status", "objectRefs")
			if len(refs) == 0 {
				return fmt.Errorf("revision %s has installed nothing yet (conditions %v)", rev.GetName(), conditionsOf(rev))
			}
		}
		name = rev.GetName()
		return nil
	})
	return name, err
}

// activeRevisionOf returns the package's active revision (kind
// ProviderRevision or FunctionRevision), or an error while it has none.
func activeRevisionOf(ctx context.Context, c client.Client, kind, pkg string) (*unstructured.Unstructured, error) {
	revs := &unstructured.UnstructuredList{}
	revs.SetAPIVersion("pkg.crossplane.io/v1")
	revs.SetKind(kind + "List")
	if err := c.List(ctx, revs, client.MatchingLabels{"pkg.crossplane.io/package": pkg}); err != nil {
		return nil, err
	}
	for i := range revs.Items {
		if st, _, _ := unstructured.NestedString(revs.Items[i].Object, "spec", "desiredState"); st == "Active" {
			return &revs.Items[i], nil
		}
	}
	return nil, fmt.Errorf("%s %s has no active revision yet", kind, pkg)
}

func conditionsOf(u *unstructured.Unstructured) []string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			out = append(out, fmt.Sprintf("%v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"]))
		}
	}
	return out
}

// playProviderRuntime does for the provider revision what the Deployment
// runtime would, short of running a pod: the TLS server Secret core's
// package manager waits for before it installs the package's objects, the
// service account the runtime config names and a Deployment of it
// controlled by the revision (never scheduled here: no kubelet), from which
// the RBAC manager learns whom to bind the revision's generated ClusterRole
// to. It waits for the objects and that binding and writes a kubeconfig of
// the service account.
func (x *Crossplane) playProviderRuntime(ctx context.Context, root string, k *Kube, rev, saName string) error {
	pr := &unstructured.Unstructured{}
	pr.SetAPIVersion("pkg.crossplane.io/v1")
	pr.SetKind("ProviderRevision")
	if err := k.Client.Get(ctx, client.ObjectKey{Name: rev}, pr); err != nil {
		return err
	}
	owner := metav1.OwnerReference{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: rev, UID: pr.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	tls, err := x.tlsServerSecret(ctx, k, ProviderName)
	if err != nil {
		return err
	}
	before := pr.DeepCopy()
	_ = unstructured.SetNestedField(pr.Object, tls, "status", "tlsServerSecretName")
	if err := k.Client.Status().Patch(ctx, pr, client.MergeFrom(before)); err != nil {
		return err
	}
	if err := k.EnsureServiceAccount(ctx, CrossplaneNamespace, saName); err != nil {
		return err
	}
	labels := map[string]string{"pkg.crossplane.io/revision": rev}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: rev, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{ServiceAccountName: saName, Containers: []corev1.Container{{Name: "package-runtime", Image: "provider"}}},
			},
		},
	}
	if err := k.Client.Create(ctx, dep); err != nil {
		return err
	}
	if _, err := x.activeRevision(ctx, k, "ProviderRevision", ProviderName, true, 3*time.Minute); err != nil {
		return fmt.Errorf("provider revision %s: %w\ncrossplane log:\n%s", rev, err, Tail(x.logFile, 30))
	}
	if err := x.waitProviderRBAC(ctx, k, rev, saName); err != nil {
		return err
	}
	x.ProviderRevision, x.ProviderServiceAccount = rev, saName
	x.ProviderKubeconfig = filepath.Join(root, "kubeconfig-provider")
	return k.WriteServiceAccountKubeconfig(ctx, CrossplaneNamespace, saName, x.ProviderKubeconfig)
}

// MarkProviderHealthy reports, as the external runtime, that the provider
// process is up.
func (x *Crossplane) MarkProviderHealthy(ctx context.Context, k *Kube) error {
	return markRuntimeHealthy(ctx, k.Client, "ProviderRevision", x.ProviderRevision, nil)
}

func markRuntimeHealthy(ctx context.Context, c client.Client, kind, name string, status map[string]string) error {
	rev := &unstructured.Unstructured{}
	rev.SetAPIVersion("pkg.crossplane.io/v1")
	rev.SetKind(kind)
	if err := c.Get(ctx, client.ObjectKey{Name: name}, rev); err != nil {
		return err
	}
	before := rev.DeepCopy()
	for k, v := range status {
		_ = unstructured.SetNestedField(rev.Object, v, "status", k)
	}
	conds, _, _ := unstructured.NestedSlice(rev.Object, "status", "conditions")
	conds = slices.DeleteFunc(conds, func(c any) bool { m, _ := c.(map[string]any); return m["type"] == "RuntimeHealthy" })
	conds = append(conds, map[string]any{"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	_ = unstructured.SetNestedSlice(rev.Object, conds, "status", "conditions")
	return c.Status().Patch(ctx, rev, client.MergeFrom(before))
}

// playFunctionRuntime waits for the Function the package manager created
// and, as the external runtime would, points its active revision at the
// local process at addr.
func (x *Crossplane) playFunctionRuntime(ctx context.Context, k *Kube, name, addr string) error {
	secret, err := x.tlsServerSecret(ctx, k, name)
	if err != nil {
		return err
	}
	return WaitFor(ctx, 3*time.Minute, func(ctx context.Context) error {
		rev, err := activeRevisionOf(ctx, k.Client, "FunctionRevision", name)
		if err != nil {
			return err
		}
		caps, _, _ := unstructured.NestedStringSlice(rev.Object, "status", "capabilities")
		if !slices.Contains(caps, "composition") {
			return fmt.Errorf("revision %s not parsed yet (capabilities %v)", rev.GetName(), caps)
		}
		ep, _, _ := unstructured.NestedString(rev.Object, "status", "endpoint")
		if ep == addr && conditionStatus(rev, "RuntimeHealthy") == "True" {
			return nil
		}
		if err := markRuntimeHealthy(ctx, k.Client, "FunctionRevision", rev.GetName(),
			map[string]string{"endpoint": addr, "tlsServerSecretName": secret}); err != nil {
			return err
		}
		return errors.New("endpoint set; confirming")
	})
}

// tlsServerSecret creates the package's TLS server Secret (the harness's
// loopback server certificate) and returns its name.
func (x *Crossplane) tlsServerSecret(ctx context.Context, k *Kube, pkg string) (string, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: pkg + "-tls-server"}, Data: map[string][]byte{}}
	for key, f := range map[string]string{"tls.crt": "tls.crt", "tls.key": "tls.key", "ca.crt": "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(x.serverCertDir, f)) //nolint:gosec // harness files
		if err != nil {
			return "", err
		}
		secret.Data[key] = b
	}
	if err := k.Client.Create(ctx, secret); err != nil {
		return "", err
	}
	return secret.Name, nil
}

func hasClaims(xrd *unstructured.Unstructured) bool {
	_, ok, _ := unstructured.NestedMap(xrd.Object, "spec", "claimNames")
	return ok
}

func conditionStatus(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return fmt.Sprint(m["status"])
		}
	}
	return ""
}

// waitCoreReady waits until core answers its readiness probe.
func (x *Crossplane) waitCoreReady(ctx context.Context) error {
	return WaitFor(ctx, 60*time.Second, func(ctx context.Context) error {
		if x.proc.exited() {
			return errors.New("crossplane core exited:\n" + Tail(x.logFile, 20))
		}
		if err := x.rbacExited(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", x.healthPort), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
}

// RestartCore stops Crossplane core and starts it again with the same
// flags, as `kubectl rollout restart` restarts its Deployment in a
// cluster, and waits until it is ready. Core dials each function afresh
// after it.
func (x *Crossplane) RestartCore(ctx context.Context) error {
	x.proc.stop(syscall.SIGTERM)
	return x.startCore(ctx)
}

// startCore starts core with the flags and environment it first ran
// with, and waits until it is ready.
func (x *Crossplane) startCore(ctx context.Context) error {
	cmd := exec.Command(x.coreArgs[0], x.coreArgs[1:]...) //nolint:gosec,noctx // the pinned binary, as first started; runs until Stop
	cmd.Env = x.coreEnv
	p, err := startProcess("crossplane", x.logFile, cmd)
	if err != nil {
		return err
	}
	x.proc = p
	return x.waitCoreReady(ctx)
}

// Stop stops core, the RBAC manager, the functions, the registry and the
// controller managers.
func (x *Crossplane) Stop() {
	if x == nil {
		return
	}
	x.kcm.stop(syscall.SIGTERM)
	x.proc.stop(syscall.SIGTERM)
	x.stopRBACManager()
	x.aggr.stop(syscall.SIGTERM)
	for _, p := range x.fns {
		p.stop(syscall.SIGTERM)
	}
	x.reg.stop()
}

// StartRBACManager starts the RBAC manager again, for a test that installs
// new package revisions after the environment stopped it; nothing while it
// runs. It runs under the machine-wide lock on FixedMetricsPort, which the
// other environments on the machine wait for to start theirs: stop it
// (StopRBACManager) as soon as the roles it makes are there.
func (x *Crossplane) StartRBACManager(ctx context.Context) error {
	if x.rbac != nil {
		return nil
	}
	cmd := exec.Command(x.rbacArgs[0], x.rbacArgs[1:]...) //nolint:gosec,noctx // the pinned binary, as first started; runs until StopRBACManager
	cmd.Env = x.rbacEnv
	lock, p, err := metricsPort().startHolder(ctx, "crossplane-rbac-manager", x.rbacLog, cmd)
	if err != nil {
		return fmt.Errorf("crossplane's RBAC manager: %w", err)
	}
	x.rbac, x.rbacLock = p, lock
	return nil
}

// StopRBACManager stops the RBAC manager and releases the lock it runs
// under; nothing when it is not running.
func (x *Crossplane) StopRBACManager() { x.stopRBACManager() }

// AwaitProviderRBAC waits until the RBAC manager has bound the roles of the
// provider revision rev to the provider's service account.
func (x *Crossplane) AwaitProviderRBAC(ctx context.Context, k *Kube, rev string) error {
	return x.waitProviderRBAC(ctx, k, rev, x.ProviderServiceAccount)
}

func (x *Crossplane) stopRBACManager() {
	releaseHolder(x.rbac, x.rbacLock)
	x.rbac, x.rbacLock = nil, nil
}

// rbacExited is, while the RBAC manager is needed, a Permanent error
// reporting its exit with its log once it has exited; else nil. Every wait
// that depends on the manager's work checks it.
func (x *Crossplane) rbacExited() error {
	if x.rbac == nil || !x.rbac.exited() {
		return nil
	}
	return Permanent(fmt.Errorf("crossplane's RBAC manager exited (%w); its log %s ends:\n%s", x.rbac.err, x.rbacLog, Tail(x.rbacLog, 30)))
}

// lockFile takes an exclusive lock on file, waiting until ctx ends; closing
// the returned file releases it (so does the process's exit).
func lockFile(ctx context.Context, file string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		return nil, err
	}
	for {
		f, ok, err := tryLock(file)
		if err != nil || ok {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s (another environment is installing packages): %w", file, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tryLock takes an exclusive lock on file if no one holds it (ok), held
// until f is closed.
func tryLock(file string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // the component cache's lock file
	if err != nil {
		return nil, false, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, true, nil
	}
	_ = f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, false, nil
	}
	return nil, false, err
}

// LogFile is core's log.
func (x *Crossplane) LogFile() string { return x.logFile }

// waitProviderRBAC waits until core's RBAC manager has bound the provider
// revision rev's system ClusterRole to the service account saName.
func (x *Crossplane) waitProviderRBAC(ctx context.Context, k *Kube, rev, saName string) error {
	system := "crossplane:provider:" + rev + ":system"
	return WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		if err := x.rbacExited(); err != nil {
			return err
		}
		crb := &rbacv1.ClusterRoleBinding{}
		if err := k.Client.Get(ctx, client.ObjectKey{Name: system}, crb); err != nil {
			return err
		}
		for _, s := range crb.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == CrossplaneNamespace && s.Name == saName {
				return nil
			}
		}
		return fmt.Errorf("ClusterRoleBinding %s does not bind %s yet", system, saName)
	})
}
