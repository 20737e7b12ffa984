package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CrossplaneNamespace is where Crossplane core keeps its Secrets.
const CrossplaneNamespace = "crossplane-system"

// Crossplane is Crossplane core run as a local process against the test
// apiserver, with the package runtime deferred ("External"): nothing runs
// in pods. The harness plays that external runtime: it starts the
// Configuration's functions as local mTLS gRPC servers and points their
// FunctionRevisions at them. Packages come from a pre-seeded package cache
// (digest references to a loopback registry that is never contacted), so
// nothing leaves the machine. Core's Usage webhook is registered with a
// loopback URL, so Usages protect what they should.
type Crossplane struct {
	logFile string
	proc    *process
	fns     []*process
	kcm     *process
}

// CrossplaneCRDDir is where hack/install-tools.sh puts core's CRDs.
func CrossplaneCRDDir(binDir string) string { return filepath.Join(binDir, "crossplane-crds") }

// loopbackRegistry names packages; nothing listens there and nothing is
// fetched from it: every package is in the cache.
const loopbackRegistry = "127.0.0.1:5001/crossplane-contrib"

func startCrossplane(ctx context.Context, root, binDir string, k *Kube, ca *CA) (*Crossplane, error) {
	for _, b := range []string{"crossplane-core", "kube-controller-manager"} {
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
	x := &Crossplane{logFile: filepath.Join(root, "crossplane.log")}
	fail := func(err error) (*Crossplane, error) { x.Stop(); return nil, err }
	kenv := append(os.Environ(), "KUBECONFIG="+k.KubeconfigFile)

	// core init: the TLS Secrets, the package Lock, the default runtime
	// config. Its CRDs were installed with the apiserver's.
	if err := waitFor(ctx, 30*time.Second, func(context.Context) error {
		cmd := exec.Command(filepath.Join(binDir, "crossplane-core"), "core", "init", "--cr-ds-path="+CrossplaneCRDDir(binDir),
			"--enable-webhooks=false", "--namespace="+CrossplaneNamespace,
			"--tlsca-secret-name=crossplane-root-ca", "--tls-client-secret-name=crossplane-tls-client")
		cmd.Env = kenv
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("crossplane core init: %v\n%s", err, out)
		}
		return nil
	}); err != nil {
		return fail(err)
	}

	refs := map[string]string{}
	for _, f := range TenantFunctions {
		ref, err := seedPackage(cache, filepath.Join(binDir, f.Binary+"-package"), loopbackRegistry+"/"+f.Binary)
		if err != nil {
			return fail(err)
		}
		refs[f.Name] = ref
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
	cmd := exec.Command(filepath.Join(binDir, "crossplane-core"), "core", "start",
		"--namespace="+CrossplaneNamespace, "--package-runtime=External", "--xpkg-cache-dir="+cache,
		"--tls-client-certs-dir="+clientDir, "--tls-server-certs-dir="+server,
		"--enable-webhooks=true", fmt.Sprintf("--webhook-port=%d", webhook),
		fmt.Sprintf("--metrics-port=%d", metrics), fmt.Sprintf("--health-probe-port=%d", health),
		"--leader-election=false", "--poll-interval=1m")
	cmd.Env = kenv
	var err error
	if x.proc, err = startProcess("crossplane", x.logFile, cmd); err != nil {
		return fail(err)
	}
	if err := waitFor(ctx, 60*time.Second, func(ctx context.Context) error {
		if x.proc.exited() {
			return errors.New("crossplane core exited:\n" + Tail(x.logFile, 20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", health), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}); err != nil {
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

	// The functions, and their Function objects pointed at them.
	for _, f := range TenantFunctions {
		port, err := FreePort()
		if err != nil {
			return fail(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p, err := startProcess(f.Binary, filepath.Join(root, f.Binary+".log"),
			exec.Command(filepath.Join(binDir, f.Binary), "--address="+addr, "--tls-certs-dir="+server))
		if err != nil {
			return fail(err)
		}
		x.fns = append(x.fns, p)
		if err := installFunction(ctx, k.Client, f.Name, refs[f.Name], addr, server); err != nil {
			return fail(fmt.Errorf("function %s: %w\ncrossplane log:\n%s", f.Name, err, Tail(x.logFile, 20)))
		}
	}
	return x, nil
}

// ApplyConfiguration installs the Configuration package's XRDs and
// Compositions (what `crossplane xpkg install` of it would), waits until
// Crossplane serves them, then starts kube-controller-manager's garbage
// collector (it discovers new kinds only every 30 s, so after the XRDs):
// Crossplane relies on it to delete composed resources with their XR.
func (x *Crossplane) ApplyConfiguration(ctx context.Context, root, binDir string, k *Kube) error {
	objs, err := ReadManifests(filepath.Join(RepoRoot(), "package", "configuration"))
	if err != nil {
		return err
	}
	var xrds []string
	for _, o := range objs {
		if o.GetKind() == "Configuration" {
			continue
		}
		if err := k.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "CompositeResourceDefinition" {
			xrds = append(xrds, o.GetName())
		}
	}
	for _, name := range xrds {
		if err := waitFor(ctx, 60*time.Second, func(ctx context.Context) error {
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
			return fmt.Errorf("%w\ncrossplane log:\n%s", err, Tail(x.logFile, 20))
		}
	}
	kcmLog := filepath.Join(root, "kube-controller-manager.log")
	cmd := exec.Command(filepath.Join(binDir, "kube-controller-manager"),
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

// Stop stops core, the functions and the garbage collector.
func (x *Crossplane) Stop() {
	if x == nil {
		return
	}
	x.kcm.stop(syscall.SIGTERM)
	x.proc.stop(syscall.SIGTERM)
	for _, p := range x.fns {
		p.stop(syscall.SIGTERM)
	}
}

// LogFile is core's log.
func (x *Crossplane) LogFile() string { return x.logFile }

// seedPackage writes the package in dir (crossplane.yaml first, then the
// other YAML files) into core's package cache under the key core looks up
// for a digest reference, and returns that reference.
func seedPackage(cache, dir, source string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "crossplane.yaml")); err != nil {
		return "", missing("function package", dir, "hack/install-tools.sh (make tools)")
	}
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) && p != filepath.Join(dir, "crossplane.yaml") {
			files = append(files, p)
		}
		return err
	}); err != nil {
		return "", err
	}
	sort.Strings(files)
	var stream bytes.Buffer
	for _, f := range append([]string{filepath.Join(dir, "crossplane.yaml")}, files...) {
		b, err := os.ReadFile(f) //nolint:gosec // files of the installed package
		if err != nil {
			return "", err
		}
		stream.WriteString("---\n")
		stream.Write(b)
		stream.WriteString("\n")
	}
	sum := sha256.Sum256(stream.Bytes())
	digest := "sha256:" + hex.EncodeToString(sum[:])
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(stream.Bytes()); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(cache, packageCacheKey(source, digest)+".gz"), gz.Bytes(), 0o600); err != nil {
		return "", err
	}
	return source + "@" + digest, nil
}

// installFunction creates the Function and, as the external package runtime
// would, points its active revision at the local process at addr.
func installFunction(ctx context.Context, c client.Client, name, ref, addr, certDir string) error {
	fn := &unstructured.Unstructured{}
	fn.SetAPIVersion("pkg.crossplane.io/v1")
	fn.SetKind("Function")
	fn.SetName(name)
	_ = unstructured.SetNestedField(fn.Object, ref, "spec", "package")
	if err := c.Create(ctx, fn); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: name + "-tls-server"}, Data: map[string][]byte{}}
	for k, f := range map[string]string{"tls.crt": "tls.crt", "tls.key": "tls.key", "ca.crt": "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(certDir, f)) //nolint:gosec // harness files
		if err != nil {
			return err
		}
		secret.Data[k] = b
	}
	if err := c.Create(ctx, secret); err != nil {
		return err
	}
	return waitFor(ctx, 90*time.Second, func(ctx context.Context) error {
		revs := &unstructured.UnstructuredList{}
		revs.SetAPIVersion("pkg.crossplane.io/v1")
		revs.SetKind("FunctionRevisionList")
		if err := c.List(ctx, revs, client.MatchingLabels{"pkg.crossplane.io/package": name}); err != nil {
			return err
		}
		for i := range revs.Items {
			rev := &revs.Items[i]
			if st, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState"); st != "Active" {
				continue
			}
			caps, _, _ := unstructured.NestedStringSlice(rev.Object, "status", "capabilities")
			if !slices.Contains(caps, "composition") {
				return fmt.Errorf("revision %s not parsed yet (capabilities %v)", rev.GetName(), caps)
			}
			ep, _, _ := unstructured.NestedString(rev.Object, "status", "endpoint")
			if ep == addr && conditionStatus(rev, "RuntimeHealthy") == "True" {
				return nil
			}
			before := rev.DeepCopy()
			_ = unstructured.SetNestedField(rev.Object, addr, "status", "endpoint")
			_ = unstructured.SetNestedField(rev.Object, secret.Name, "status", "tlsServerSecretName")
			conds, _, _ := unstructured.NestedSlice(rev.Object, "status", "conditions")
			conds = slices.DeleteFunc(conds, func(c any) bool { m, _ := c.(map[string]any); return m["type"] == "RuntimeHealthy" })
			conds = append(conds, map[string]any{"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
			_ = unstructured.SetNestedSlice(rev.Object, conds, "status", "conditions")
			if err := c.Status().Patch(ctx, rev, client.MergeFrom(before)); err != nil {
				return err
			}
			return errors.New("endpoint set; confirming")
		}
		return errors.New("no active revision yet")
	})
}

// packageCacheKey is the file name (without .gz) core's package cache uses
// for a package source and digest: crossplane-runtime's xpkg.FriendlyID.
// Importing pkg/xpkg would pull its registry, signing and cloud-credential
// dependencies into this module for these few lines. A wrong key cannot
// pass unnoticed: core would then try the loopback registry, where nothing
// listens, and the Function would never become ready.
func packageCacheKey(source, digest string) string {
	s := trunc(source, 50) + "-" + trunc(digest, 12)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			b.WriteByte(c)
		}
		if (c == '.' || c == '/' || c == ':' || c == '-') && i != 0 && i != 62 && i != len(s)-1 {
			b.WriteByte('-')
		}
		if i == 62 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
