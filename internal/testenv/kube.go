package testenv

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"ddupan.top/provider-postgresql-tenant/apis"
)

// Kube is a real kube-apiserver with etcd, started through envtest from
// binaries built from the Go module proxy, with the project's CRDs installed.
type Kube struct {
	// Config is an admin rest config.
	Config *rest.Config
	// Client is an uncached admin client with the project's scheme.
	Client client.Client
	// Clientset is a typed admin clientset.
	Clientset kubernetes.Interface
	// KubeconfigFile is an admin kubeconfig, for processes under test.
	KubeconfigFile string
	// AuditLog is the apiserver's audit log (Options.KubeAudit; empty
	// without it): one JSON event per request, at the Metadata level.
	AuditLog string

	env *envtest.Environment
	// apiserverProc and etcdProc take the place of envtest's processes
	// once a fault has ended those (Faults.Kill, Faults.Restart): the
	// harness starts them again with envtest's command line and data
	// directory; nil until then.
	apiserverProc, etcdProc *process
	// serviceAccountKey signs service-account tokens (node networks only:
	// kube-controller-manager's token controller reads it).
	serviceAccountKey string
}

// Scheme has the core Kubernetes types, CRDs and the project's APIs.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apis.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// auditPolicy logs every request once, when its response is complete, with
// its metadata only (no object, no secret).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// startKube starts etcd and the kube-apiserver. With ca (a node's
// environment, Options.Node), the apiserver serves a certificate of ca for
// loopback, NodeIP and the kubernetes Service (KubernetesServiceIP and its
// names), listens on every address of the node's private namespace,
// advertises NodeIP as the kubernetes Service's endpoint, takes its
// Services from ServiceCIDR and runs the ServiceAccount admission plugin
// (the pods' API token volume), which envtest turns off.
func startKube(ctx context.Context, root, binDir string, crdDirs []string, audit bool, ca *CA) (*Kube, error) {
	if ca != nil {
		if err := privateNetns(); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, missing(b, filepath.Join(binDir, b), "make tools (hack/install-k8s.sh)")
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
		// envtest waits 20 s for each component, then starts it again,
		// five times, and 10 s for the CRDs to be served: on two busy
		// cores (four other environments and a package build) a node's
		// apiserver, with its admission plugins and Crossplane's and
		// ESO's CRDs, took longer. A slow start is not a failure.
		ControlPlaneStartTimeout: 2 * time.Minute,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: 3 * time.Minute},
	}
	auditLog := ""
	if audit {
		policy := filepath.Join(root, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return nil, err
		}
		auditLog = filepath.Join(root, "kube-audit.log")
		// Blocking mode: an event is in the file when its response is
		// sent, so a reader's window has every request made in it; no
		// rotation (a large benchmark writes hundreds of MiB).
		env.ControlPlane.GetAPIServer().Configure().
			Append("audit-policy-file", policy).
			Append("audit-log-path", auditLog).
			Append("audit-log-format", "json").
			Append("audit-log-mode", "blocking").
			Append("audit-log-maxsize", "1000000")
	}
	saKey := ""
	if ca != nil {
		certDir := filepath.Join(root, "apiserver-certs")
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, err
		}
		// envtest keeps an apiserver.crt it finds in its certificate
		// directory, and its clients trust SecureServing.CA.
		if _, err := ca.issueFor(certDir, "apiserver",
			[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(KubernetesServiceIP)}, x509.ExtKeyUsageServerAuth); err != nil {
			return nil, err
		}
		sa, err := ca.issueFor(certDir, "sa-signer", nil, nil, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, err
		}
		saKey = sa.KeyFile
		api := env.ControlPlane.GetAPIServer()
		api.CertDir = certDir
		api.SecureServing.CA = ca.CertPEM
		args := api.Configure()
		args.Set("bind-address", "0.0.0.0")
		args.Set("advertise-address", NodeIP)
		// The node is known by its address: the node's DNS answers only
		// cluster.local names (kubectl logs and exec reach the kubelet).
		args.Set("kubelet-preferred-address-types", "InternalIP")
		kc, err := ca.issueFor(certDir, KubeletClientUser, nil, nil, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, err
		}
		args.Set("kubelet-client-certificate", kc.CertFile)
		args.Set("kubelet-client-key", kc.KeyFile)
		args.Set("service-cluster-ip-range", ServiceCIDR)
		args.Disable("disable-admission-plugins")
	}
	// What the apiserver last wrote, for a start that fails.
	apiOut := &tailWriter{max: 4096}
	env.ControlPlane.GetAPIServer().Err = apiOut
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("cannot start kube-apiserver and etcd: %w\nthe apiserver's last output:\n%s", err, apiOut.String())
	}
	k := &Kube{Config: cfg, env: env, AuditLog: auditLog, serviceAccountKey: saKey}
	fail := func(err error) (*Kube, error) { k.Stop(); return nil, err }

	user, err := env.AddUser(envtest.User{Name: "harness-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return fail(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fail(err)
	}
	k.KubeconfigFile = filepath.Join(root, "kubeconfig")
	if err := os.WriteFile(k.KubeconfigFile, kc, 0o600); err != nil {
		return fail(err)
	}
	if k.Client, err = client.New(cfg, client.Options{Scheme: env.Scheme}); err != nil {
		return fail(err)
	}
	if k.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail(err)
	}
	if ca != nil {
		// The package runtime makes the provider's service account.
		return k, k.EnsureNamespace(ctx, ProviderNamespace)
	}
	if err := k.EnsureServiceAccount(ctx, ProviderNamespace, ProviderServiceAccount); err != nil {
		return fail(err)
	}
	return k, nil
}

// Stop stops the apiserver and etcd.
func (k *Kube) Stop() {
	if k != nil && k.env != nil {
		// The harness's processes in the place of envtest's (Faults),
		// the apiserver before etcd, as envtest stops them; envtest then
		// stops its own and removes etcd's data directory.
		k.apiserverProc.stop(syscall.SIGTERM)
		if k.etcdProc != nil {
			_ = k.env.ControlPlane.GetAPIServer().Stop()
			k.etcdProc.stop(syscall.SIGTERM)
		}
		_ = k.env.Stop()
	}
}

// UserClient is a client authenticated as the user name in groups (a
// client certificate of the apiserver's CA), with only what RBAC grants
// them: e.g. an app team's identity.
func (k *Kube) UserClient(name string, groups ...string) (client.Client, error) {
	u, err := k.env.AddUser(envtest.User{Name: name, Groups: groups}, k.Config)
	if err != nil {
		return nil, err
	}
	return client.New(u.Config(), client.Options{Scheme: k.env.Scheme})
}

// UserKubeconfig writes a kubeconfig of the user name in groups (as
// UserClient) to file, for a process under test.
func (k *Kube) UserKubeconfig(file, name string, groups ...string) error {
	u, err := k.env.AddUser(envtest.User{Name: name, Groups: groups}, k.Config)
	if err != nil {
		return err
	}
	b, err := u.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o600)
}

// EnsureNamespace creates a namespace if it does not exist.
func (k *Kube) EnsureNamespace(ctx context.Context, ns string) error {
	err := k.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// EnsureServiceAccount creates a namespace and a service account in it.
func (k *Kube) EnsureServiceAccount(ctx context.Context, ns, name string) error {
	if err := k.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	err := k.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ServiceAccountToken mints a short-lived token for a service account with
// the TokenRequest API and the kube-apiserver's own audience, as the
// kubelet does for the default service-account token.
func (k *Kube) ServiceAccountToken(ctx context.Context, ns, name string) (string, error) {
	return k.ServiceAccountTokenFor(ctx, ns, name)
}

// ServiceAccountTokenFor mints a short-lived token for a service account
// with the given audiences (none: the kube-apiserver's), as the kubelet
// does for a projected serviceAccountToken volume with an audience.
func (k *Kube) ServiceAccountTokenFor(ctx context.Context, ns, name string, audiences ...string) (string, error) {
	ttl := int64(3600)
	tr, err := k.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("cannot request a token for %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// reviewerToken returns a token of a service account allowed to review
// tokens (system:auth-delegator), which OpenBao's Kubernetes auth uses.
func (k *Kube) reviewerToken(ctx context.Context) (string, error) {
	const ns, name = "kube-system", "openbao-token-reviewer"
	if err := k.EnsureServiceAccount(ctx, ns, name); err != nil {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "openbao-token-reviewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}
	if err := k.Client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return k.ServiceAccountToken(ctx, ns, name)
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
