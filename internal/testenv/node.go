package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The test node's network: everything lives in a private network namespace
// the test makes (NodeMain), with a bridge cni0 that the pods are attached
// to. Nothing is routed out of it.
const (
	// NodeIP is the bridge's address: the node's address, and where the
	// pods reach the harness's servers (kube-apiserver, OpenBao,
	// PostgreSQL), whose certificates carry it.
	NodeIP = "10.244.0.1"
	// PodCIDR is the bridge's subnet, the pods' addresses.
	PodCIDR = "10.244.0.0/24"
	// ServiceCIDR is the Services' range; the kubernetes Service is its
	// first address, KubernetesServiceIP.
	ServiceCIDR         = "10.96.0.0/12"
	KubernetesServiceIP = "10.96.0.1"
	// NodeName is the node's name.
	NodeName = "ppt-node"
	// KubeletClientUser is the user the kube-apiserver's client
	// certificate names when it calls the kubelet (logs, exec).
	KubeletClientUser = "kube-apiserver-kubelet-client"
	// PauseImage is the sandbox image the harness builds and imports.
	PauseImage = "ppt.local/pause:v1"

	nodeNetnsEnv = "PPT_NODE_NETNS"
	nodeDirEnv   = "PPT_NODE_DIR"
	// nodeResolvConfEnv names the node's resolv.conf (NodeResolvConf),
	// which the test binary inside the namespace bind-mounts over
	// /etc/resolv.conf in its private mount namespace; nodeHostMntnsEnv
	// identifies the host's mount namespace (device:inode), where it must
	// not.
	nodeResolvConfEnv = "PPT_NODE_RESOLV_CONF"
	nodeHostMntnsEnv  = "PPT_NODE_HOST_MNTNS"
	hostResolvConf    = "/etc/resolv.conf"
)

// NodeResolvConf is the resolv.conf of the processes in the node's
// namespace (the harness's, Crossplane core's): the node's DNS server and
// the search list and ndots the kubelet gives a Pod, less the Pod's own
// namespace.
var NodeResolvConf = fmt.Sprintf("nameserver %s\nsearch svc.%s %s\noptions ndots:5\n", NodeIP, ClusterDomain, ClusterDomain)

// nodeFixedDirs hold the paths the node's components write to outside
// any directory they are given: containerd's shim sockets, fifos and runc
// state (/run/containerd), the CNI plugins' cache (/var/lib/cni), the
// kubelet's container log links and device-plugin socket directory. The
// test binary mounts a tmpfs of its own on each in its private mount
// namespace: two nodes running at once never see each other's, and
// nothing is left on the host's when the namespace goes.
var nodeFixedDirs = []string{"/run/containerd", "/var/lib/cni", "/var/log/containers", "/var/lib/kubelet"}

// nodeSlotsEnv sets how many nodes may run on this machine at once
// (default defaultNodeSlots); each takes a slot: a lock in the component
// cache, its number naming the node's cgroup root (nodeCgroupRoot).
const (
	nodeSlotsEnv     = "PPT_NODE_SLOTS"
	nodeSlotEnv      = "PPT_NODE_SLOT"
	defaultNodeSlots = 2
)

// nodeSlots is how many nodes may run at once.
func nodeSlots() int {
	if n, err := strconv.Atoi(os.Getenv(nodeSlotsEnv)); err == nil && n > 0 {
		return n
	}
	return defaultNodeSlots
}

// nodeCgroupRoot is the kubelet's cgroupRoot of the node in slot: the
// pods' cgroups of two nodes are apart, and each kubelet removes only its
// own.
func nodeCgroupRoot(slot string) string { return "/ppt-node-" + slot }

// InNodeNetns reports whether this process runs inside the node's private
// network namespace (the test binary NodeMain runs again there).
func InNodeNetns() bool { return os.Getenv(nodeNetnsEnv) != "" }

// privateNetns returns an error unless this process runs in the network
// namespace NodeMain made (the one bind-mounted at $PPT_NODE_NETNS): the
// kubelet and kube-proxy install firewall chains in the namespace they run
// in, and the node's servers listen on every address of it; it must never
// be the host's.
func privateNetns() error {
	refuse := errors.New("refusing to start the node on the host network: run the tests through testenv.NodeMain, which runs them in a private network namespace")
	file := os.Getenv(nodeNetnsEnv)
	if file == "" {
		return refuse
	}
	var want, self syscall.Stat_t
	if err := syscall.Stat(file, &want); err != nil {
		return fmt.Errorf("%w (%s: %w)", refuse, file, err)
	}
	if err := syscall.Stat("/proc/self/ns/net", &self); err != nil {
		return err
	}
	if want.Dev != self.Dev || want.Ino != self.Ino {
		return fmt.Errorf("%w (this process is not in the namespace at %s)", refuse, file)
	}
	return nil
}

// NodeMain is the TestMain body of a package whose tests run real Pods
// (Options.Node). Run as the test binary normally is, it builds what needs
// the network (the packages), makes a private network namespace (lo, and a
// bridge cni0 with NodeIP/24 and the default route), runs the test binary
// again inside it, and when that ends stops what the node left behind (by
// the PIDs it recorded), cleans the paths the components write outside
// their directories and removes the namespace. Inside the namespace it is
// Main: every component the Env starts, the node's included, runs there, so
// nothing the node does reaches the host's network, nor its fixed
// directories (nodeFixedDirs) or cgroups another node's. Up to
// $PPT_NODE_SLOTS nodes (2) run on a machine at once, each in a slot (a
// lock in the component cache).
func NodeMain(m *testing.M, o Options, env **Env, hooks ...func(*Env) (func(), error)) {
	if short() {
		Main(m, o, env, hooks...)
		return
	}
	code, err := NodeRun(o, func() int {
		Main(m, o, env, hooks...)
		return 0
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: test node: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// NodeRun runs a program whose environment has a node (Options.Node) the
// way NodeMain runs tests: called in the host's namespaces, it makes the
// node's network namespace, runs this same executable with the same
// arguments again inside it and returns that run's exit code once it ends
// (after stopping what the node left behind); called inside, it
// bind-mounts the node's resolv.conf and returns run's exit code. Signals
// (SIGINT, SIGTERM) sent to the outer process reach the inner one. The
// netns file of the running node is NodeNetns() inside.
func NodeRun(o Options, run func() int) (int, error) {
	if InNodeNetns() {
		if err := bindResolvConf(os.Getenv(nodeResolvConfEnv), hostResolvConf, os.Getenv(nodeHostMntnsEnv)); err != nil {
			return 0, err
		}
		if err := mountFixedDirs(nodeFixedDirs, os.Getenv(nodeHostMntnsEnv)); err != nil {
			return 0, err
		}
		return run(), nil
	}
	return runInNodeNetns(o)
}

// NodeNetns is, inside the node's network namespace, the file it is bound
// at (nsenter --net=<file> enters it); else "".
func NodeNetns() string { return os.Getenv(nodeNetnsEnv) }

// nsID identifies a namespace file (/proc/<pid>/ns/<type>) as
// device:inode.
func nsID(file string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// bindResolvConf bind-mounts src over target (/etc/resolv.conf), so that
// the processes of the node's namespace resolve the cluster's names with
// the node's DNS server. It refuses unless this process runs in a mount
// namespace other than hostMntns (NodeMain runs it in a private one, with
// private propagation): the host's resolv.conf stays as it is, and the
// mount goes away with the namespace.
func bindResolvConf(src, target, hostMntns string) error {
	if err := privateMountNamespace("the node's resolv.conf", hostMntns); err != nil {
		return err
	}
	if src == "" {
		return errors.New("no resolv.conf for the node's namespace ($" + nodeResolvConfEnv + ")")
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s over %s: %w", src, target, err)
	}
	return nil
}

// privateMountNamespace refuses to mount what unless this process runs in
// a mount namespace other than hostMntns (the host's, as NodeMain names
// it).
func privateMountNamespace(what, hostMntns string) error {
	self, err := nsID("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	if hostMntns == "" || self == hostMntns {
		return fmt.Errorf("refusing to mount %s in the host's mount namespace: run the tests through testenv.NodeMain, which runs them in a private one", what)
	}
	return nil
}

// mountFixedDirs mounts a tmpfs on each of dirs, in this process's mount
// namespace, which must not be hostMntns (as bindResolvConf).
func mountFixedDirs(dirs []string, hostMntns string) error {
	if err := privateMountNamespace("the node's directories", hostMntns); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil { //nolint:gosec // a system directory the node's components expect
			return err
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err != nil {
			return fmt.Errorf("mounting a tmpfs on %s: %w", d, err)
		}
	}
	return nil
}

// lockNodeSlot takes the first free of the machine's node slots (locks in
// the component cache), waiting while every one is taken; the slot is
// held until the file is closed.
func lockNodeSlot(ctx context.Context) (string, *os.File, error) {
	if err := os.MkdirAll(CacheDir(), 0o750); err != nil {
		return "", nil, err
	}
	for {
		for i := range nodeSlots() {
			f, ok, err := tryLock(filepath.Join(CacheDir(), fmt.Sprintf("node-%d.lock", i)))
			if err != nil {
				return "", nil, err
			}
			if ok {
				return strconv.Itoa(i), f, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", nil, fmt.Errorf("waiting for a node slot (%d nodes run on this machine already; $%s raises it): %w", nodeSlots(), nodeSlotsEnv, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// mountedAt reports whether something is mounted at path in this
// process's mount namespace.
func mountedAt(path string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if fs := strings.Fields(l); len(fs) > 4 && unescapeMount(fs[4]) == path {
			return true, nil
		}
	}
	return false, nil
}

func runInNodeNetns(o Options) (int, error) {
	for _, b := range []string{"unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			return 0, fmt.Errorf("%s not found (util-linux, iproute2): %w", b, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	slot, lock, err := lockNodeSlot(ctx)
	if err != nil {
		return 0, err
	}
	defer lock.Close() //nolint:errcheck // closing releases the lock
	if o.Crossplane {
		// The namespace has no route out: build the packages first.
		if _, err := PackagesDir(ctx); err != nil {
			return 0, err
		}
		if o.NodeUpgradeFrom != "" {
			if _, err := PackagesDirAt(ctx, o.NodeUpgradeFrom); err != nil {
				return 0, err
			}
		}
	}
	dir, err := os.MkdirTemp("", "ppt-node-")
	if err != nil {
		return 0, err
	}
	ns := filepath.Join(dir, "netns")
	defer func() {
		// Where the run inside kept its node (its PID files): what it
		// left running when it died is stopped here.
		cleanNode(innerNodeDir(dir))
		_ = syscall.Unmount(ns, syscall.MNT_DETACH)
		if os.Getenv("PPT_KEEP_TESTENV") != "" {
			fmt.Fprintf(os.Stderr, "testenv: kept %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	if err := os.WriteFile(ns, nil, 0o600); err != nil {
		return 0, err
	}
	if out, err := exec.CommandContext(ctx, "unshare", "--net="+ns, "true").CombinedOutput(); err != nil { //nolint:gosec // the namespace file is the harness's own
		return 0, fmt.Errorf("unshare --net: %w\n%s", err, out)
	}
	setup := fmt.Sprintf("ip link set lo up && ip link add cni0 type bridge && ip addr add %s/24 dev cni0 && ip link set cni0 up && ip route add default dev cni0", NodeIP)
	if out, err := exec.CommandContext(ctx, "nsenter", "--net="+ns, "sh", "-ec", setup).CombinedOutput(); err != nil { //nolint:gosec // fixed commands in the harness's own namespace
		return 0, fmt.Errorf("setting up the node's network namespace: %w\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	// The test binary runs in its own mount namespace too (private
	// propagation: no mount of it reaches the host's, and they all go
	// with it), where it bind-mounts the node's resolv.conf over
	// /etc/resolv.conf.
	hostMntns, err := nsID("/proc/self/ns/mnt")
	if err != nil {
		return 0, err
	}
	hostResolv, err := os.ReadFile(hostResolvConf)
	if err != nil {
		return 0, err
	}
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(NodeResolvConf), 0o644); err != nil { //nolint:gosec // no secret; the kubelet and every process of the node read it
		return 0, err
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + ns, "--", "unshare", "--mount", "--propagation=private", "--", self}, os.Args[1:]...)...) //nolint:gosec,noctx // this test binary, again, in the namespaces; it ends by itself
	cmd.Env = append(os.Environ(), nodeNetnsEnv+"="+ns, nodeDirEnv+"="+innerNodeDir(dir), nodeResolvConfEnv+"="+resolv, nodeHostMntnsEnv+"="+hostMntns, nodeSlotEnv+"="+slot)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// go test's timeout and ^C reach this process: pass them on, so the
	// tests inside stop what they started.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			if herr := hostResolvConfKept(hostResolv); herr != nil {
				return 0, herr
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ee.ExitCode() >= 0 {
					return ee.ExitCode(), nil
				}
				return 1, nil
			}
			if err != nil {
				return 0, err
			}
			return 0, nil
		}
	}
}

// hostResolvConfKept is an error when the host's /etc/resolv.conf is not
// what it was before the node ran (was), or has a mount on it.
func hostResolvConfKept(was []byte) error {
	now, err := os.ReadFile(hostResolvConf)
	if err != nil {
		return err
	}
	if string(now) != string(was) {
		return fmt.Errorf("the host's %s changed while the node ran", hostResolvConf)
	}
	m, err := mountedAt(hostResolvConf)
	if err != nil {
		return err
	}
	if m {
		return fmt.Errorf("the host's %s has a mount on it after the node ran", hostResolvConf)
	}
	return nil
}

// Node is a Kubernetes node run by the harness against its kube-apiserver:
// containerd (with runc), the bridge CNI, a kubelet, kube-scheduler,
// kube-controller-manager (the Deployment, ReplicaSet, EndpointSlice,
// service-account and root CA publisher controllers among all its
// defaults) and kube-proxy in nftables mode. Pods get addresses in
// PodCIDR and reach the kube-apiserver through the kubernetes Service.
type Node struct {
	// Dir holds the node's state, logs and PID files.
	Dir string
	// Containerd is containerd's socket (for ctr).
	Containerd string
	// KubeletRoot is the kubelet's --root-dir (pod volumes).
	KubeletRoot string
	// PodLogs is the kubelet's podLogsDir: <ns>_<pod>_<uid>/<container>/N.log.
	PodLogs string
	// Up is how long starting the node took, until it was Ready.
	Up time.Duration
	// DNS is the cluster DNS server, on NodeIP:53 (the kubelet's
	// clusterDNS; the nameserver of NodeResolvConf).
	DNS *DNS

	procs []*process
}

// nodeDir is where the node keeps its files: the directory NodeMain made
// for it (so that it can clean up after a test binary that died), else one
// in the run's directory.
// innerNodeDir is the node's directory of a run NodeRun makes in dir.
func innerNodeDir(dir string) string { return filepath.Join(dir, "node") }

func nodeDir(root string) string {
	if d := os.Getenv(nodeDirEnv); d != "" {
		return d
	}
	return filepath.Join(root, "node")
}

func startNode(ctx context.Context, root, binDir string, k *Kube, ca *CA) (*Node, error) {
	if err := privateNetns(); err != nil {
		return nil, err
	}
	for _, b := range []string{"kubelet", "kube-scheduler", "kube-proxy", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, missing(b, filepath.Join(binDir, b), "make tools (hack/install-k8s.sh "+b+")")
		}
	}
	for _, b := range []string{"containerd", "ctr", "runc", "nft", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, missing(b, b, "make tools (hack/install-node.sh)")
		}
	}
	t0 := time.Now()
	dir := nodeDir(root)
	n := &Node{Dir: dir, Containerd: filepath.Join(dir, "run", "containerd", "containerd.sock"),
		KubeletRoot: filepath.Join(dir, "kubelet"), PodLogs: filepath.Join(dir, "pod-logs")}
	for _, d := range []string{"run", "logs", "containerd", "cni", "certs.d", "kubelet", "pod-logs", "image", filepath.Join("run", "cni-ipam")} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	fail := func(err error) (*Node, error) { n.Stop(); return nil, err }

	if err := n.startContainerd(ctx); err != nil {
		return fail(err)
	}
	if err := k.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ppt:" + KubeletClientUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: KubeletClientUser}},
	}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fail(err)
	}
	dns, err := startDNS(net.JoinHostPort(NodeIP, "53"), kubeServices(k.Client), filepath.Join(dir, "logs", "dns.log"))
	if err != nil {
		return fail(err)
	}
	n.DNS = dns

	// The kubelet, as the harness's admin (no Node authorizer here). Its
	// API listens on the node's address, where the kube-apiserver reaches
	// it for `kubectl logs` and `exec` (KubeletClientUser's certificate,
	// from the harness's CA, bound to system:kubelet-api-admin); nothing
	// else gets in: no anonymous access, other callers' tokens are
	// checked with the API server.
	ports := make([]int, 5)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return fail(err)
		}
		ports[i] = p
	}
	kubeletPort, kubeletHealth, proxyHealth, proxyMetrics, kcmPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	cgroupRoot, err := makeCgroupRoot(dir, os.Getenv(nodeSlotEnv))
	if err != nil {
		return fail(err)
	}
	// A container that exits is started again after at most a second
	// (crashLoopBackOff, on by default since Kubernetes 1.35), not after
	// 10 s, 20 s, 40 s...: the tests kill the provider's container on
	// purpose, several times in a row, and wait only for its restart.
	// The kubelet syncs each Pod again every 2 to 3 s (syncFrequency, and
	// up to half of it more), not every 1 to 1.5 min: a Secret mounted as
	// files is refreshed at that sync, and the tests that watch an app
	// take a rotated credential from such a file wait for it.
	kcfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: %q
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
podLogsDir: %s
registerNode: true
rotateCertificates: false
serverTLSBootstrap: false
oomScoreAdj: 0
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
localStorageCapacityIsolation: true
crashLoopBackOff: {maxContainerRestartPeriod: 1s}
syncFrequency: 2s
clusterDNS: [%q]
clusterDomain: %s
`, NodeIP, kubeletPort, kubeletHealth, ca.CertFile, cgroupRoot, n.Containerd, n.Containerd, n.PodLogs, NodeIP, ClusterDomain)
	if err := os.WriteFile(filepath.Join(dir, "kubelet.yaml"), []byte(kcfg), 0o600); err != nil { //nolint:gosec // the node's own directory
		return fail(err)
	}
	if err := n.start(ctx, "kubelet", exec.Command(filepath.Join(binDir, "kubelet"), "--config="+filepath.Join(dir, "kubelet.yaml"), //nolint:gosec,noctx // the pinned binary; runs until Stop
		"--kubeconfig="+k.KubeconfigFile, "--root-dir="+n.KubeletRoot, "--cert-dir="+filepath.Join(n.KubeletRoot, "pki"), "--hostname-override="+NodeName, "--node-ip="+NodeIP, "-v=1")); err != nil {
		return fail(err)
	}
	kc := "--kubeconfig=" + k.KubeconfigFile
	if err := n.start(ctx, "kube-scheduler", exec.Command(filepath.Join(binDir, "kube-scheduler"), kc, //nolint:gosec,noctx // the pinned binary; runs until Stop
		"--authentication-kubeconfig="+k.KubeconfigFile, "--authorization-kubeconfig="+k.KubeconfigFile,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")); err != nil {
		return fail(err)
	}
	if err := n.start(ctx, "kube-controller-manager", exec.Command(filepath.Join(binDir, "kube-controller-manager"), kc, //nolint:gosec,noctx // the pinned binary; runs until Stop
		"--authentication-kubeconfig="+k.KubeconfigFile, "--authorization-kubeconfig="+k.KubeconfigFile,
		"--leader-elect=false", "--controllers=*", "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort), "--cert-dir="+filepath.Join(dir, "kcm-certs"),
		"--root-ca-file="+ca.CertFile, "--service-account-private-key-file="+k.serviceAccountKey)); err != nil {
		return fail(err)
	}
	if err := n.start(ctx, "kube-proxy", exec.Command(filepath.Join(binDir, "kube-proxy"), kc, "--proxy-mode=nftables", //nolint:gosec,noctx // the pinned binary; runs until Stop
		"--hostname-override="+NodeName, "--cluster-cidr="+PodCIDR,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", proxyMetrics), fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", proxyHealth),
		"--conntrack-max-per-core=0")); err != nil {
		return fail(err)
	}
	if err := WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		if err := n.exited(); err != nil {
			return err
		}
		node := &corev1.Node{}
		if err := k.Client.Get(ctx, client.ObjectKey{Name: NodeName}, node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready yet", NodeName)
	}); err != nil {
		return fail(fmt.Errorf("%w; kubelet log ends:\n%s", err, Tail(filepath.Join(dir, "logs", "kubelet.log"), 20)))
	}
	// kube-proxy serves its health once it has synced the rules.
	if err := WaitFor(ctx, time.Minute, func(ctx context.Context) error {
		if err := n.exited(); err != nil {
			return err
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", proxyHealth))
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		return fail(err)
	}
	n.Up = time.Since(t0)
	return n, nil
}

// startContainerd starts containerd with the bridge CNI config and
// imports the pause image.
func (n *Node) startContainerd(ctx context.Context) error {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return err
	}
	// containerd: cgroupfs (this kernel's cgroup v1 hierarchy), negative
	// oom_score_adj refused (root here lacks CAP_SYS_RESOURCE), the pause
	// image built here as the sandbox image, registries from certs.d.
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[8]q
        Root = %[5]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[7]q
`, filepath.Join(n.Dir, "containerd"), filepath.Join(n.Dir, "run", "containerd"), n.Containerd, PauseImage,
		filepath.Join(n.Dir, "run", "runc"), filepath.Join(n.Dir, "cni"), filepath.Join(n.Dir, "certs.d"), runc)
	if err := os.WriteFile(filepath.Join(n.Dir, "containerd.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "ppt-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}}
  ]
}
`, PodCIDR, NodeIP, filepath.Join(n.Dir, "run", "cni-ipam"))
	if err := os.WriteFile(filepath.Join(n.Dir, "cni", "10-bridge.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	if err := n.start(ctx, "containerd", exec.Command("containerd", "--config", filepath.Join(n.Dir, "containerd.toml"))); err != nil { //nolint:gosec,noctx // the node's own config; runs until Stop
		return err
	}
	if err := WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		if err := n.exited(); err != nil {
			return err
		}
		_, err := n.Ctr(ctx, "version")
		return err
	}); err != nil {
		return err
	}
	if err := n.importPause(ctx); err != nil {
		return err
	}
	return nil
}

// start starts one of the node's processes, its log in Dir/logs and its
// PID in Dir/run, so that NodeMain can stop it after a test binary that
// died.
func (n *Node) start(_ context.Context, name string, cmd *exec.Cmd) error {
	p, err := startProcess(name, filepath.Join(n.Dir, "logs", name+".log"), cmd)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return os.WriteFile(filepath.Join(n.Dir, "run", name+".pid"), []byte(strconv.Itoa(p.cmd.Process.Pid)), 0o600)
}

// exited is an error naming the first of the node's processes that has
// exited, with its log's end.
func (n *Node) exited() error {
	for _, p := range n.procs {
		if p.exited() {
			return Permanent(fmt.Errorf("%s exited (%w); its log ends:\n%s", p.name, p.err, Tail(filepath.Join(n.Dir, "logs", p.name+".log"), 20)))
		}
	}
	return nil
}

// Ctr runs ctr against the node's containerd, in the CRI's namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.Containerd, "--namespace", "k8s.io"}, args...)...).CombinedOutput() //nolint:gosec // ctr against the harness's containerd
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// TaskPid returns the PID of a container's process, as containerd knows
// it (ctr task ls).
func (n *Node) TaskPid(ctx context.Context, containerID string) (int, error) {
	out, err := n.Ctr(ctx, "task", "ls")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == containerID {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("containerd runs no task %s:\n%s", containerID, out)
}

// AllowRegistry lets containerd pull from a plain-HTTP registry on the
// namespace's loopback, under its own address and as a mirror of each of
// hosts, whose repositories it serves under <addr>/<host>/ (the layout
// the harness's registry uses).
func (n *Node) AllowRegistry(addr string, hosts ...string) error {
	write := func(host, body string) error {
		d := filepath.Join(n.Dir, "certs.d", host)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(body), 0o600)
	}
	if err := write(addr, fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", addr)); err != nil {
		return err
	}
	for _, h := range hosts {
		if err := write(h, fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s/v2/%[2]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n", addr, h)); err != nil {
			return err
		}
	}
	return nil
}

// importPause builds the pause program (internal/testenv/pause) and
// imports a one-layer image of it as PauseImage: no image comes from
// outside.
func (n *Node) importPause(ctx context.Context) error {
	bin := filepath.Join(n.Dir, "image", "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./internal/testenv/pause") //nolint:gosec // the go command on this repository, into the node's directory
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./internal/testenv/pause: %w\n%s", err, out)
	}
	tar := filepath.Join(n.Dir, "image", "pause.tar")
	if err := writeOCIArchive(bin, "pause", PauseImage, "65535:65535", tar); err != nil {
		return err
	}
	_, err := n.Ctr(ctx, "images", "import", tar)
	return err
}

// Stop stops the node's processes, its containers and their shims, and
// removes what they left outside its directory.
func (n *Node) Stop() {
	if n == nil {
		return
	}
	cleanNode(n.Dir)
	for _, p := range n.procs {
		<-p.done
	}
	n.DNS.Stop()
}

// cleanNode stops, by the PIDs recorded in dir/run, the kubelet and the
// control-plane processes, then every container and containerd and the
// shims it started (the processes whose command line names its socket),
// unmounts what is mounted under dir, removes the pods' cgroups and the
// node's fixed paths. It is safe to call again.
func cleanNode(dir string) {
	for _, name := range []string{"kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager"} {
		stopPidFile(filepath.Join(dir, "run", name+".pid"), 20*time.Second)
	}
	sock := filepath.Join(dir, "run", "containerd", "containerd.sock")
	if pidAlive(filepath.Join(dir, "run", "containerd.pid")) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ctr := func(args ...string) string {
			out, _ := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).Output() //nolint:gosec // ctr against the harness's containerd
			return string(out)
		}
		for _, id := range strings.Fields(ctr("task", "ls", "-q")) {
			ctr("task", "kill", "-s", "SIGKILL", id)
		}
		for _, id := range strings.Fields(ctr("containers", "ls", "-q")) {
			_ = WaitFor(ctx, 5*time.Second, func(context.Context) error {
				if strings.Contains(ctr("task", "ls", "-q"), id) {
					ctr("task", "rm", "-f", id)
					return ErrNotYet
				}
				return nil
			})
			ctr("containers", "rm", id)
		}
		cancel()
	}
	stopPidFile(filepath.Join(dir, "run", "containerd.pid"), 20*time.Second)
	for _, pid := range shimsOf(sock) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	unmountUnder(dir)
	for _, c := range cgroupDirs(dir) {
		removeCgroupTree(c)
	}
}

// stopPidFile sends SIGTERM to the process whose PID the file records,
// SIGKILL after grace, and removes the file.
func stopPidFile(file string, grace time.Duration) {
	b, err := os.ReadFile(file) //nolint:gosec // the node's own PID file
	if err != nil {
		return
	}
	defer os.Remove(file) //nolint:errcheck // best effort
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50 && alive(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

func pidAlive(file string) bool {
	b, err := os.ReadFile(file) //nolint:gosec // the node's own PID file
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && pid > 1 && alive(pid)
}

// alive reports whether pid runs and is not a zombie (the harness's own
// children are reaped by their Wait goroutine).
func alive(pid int) bool {
	st, ok := ReadProcStat(fmt.Sprintf("/proc/%d/stat", pid))
	return ok && st.State != 'Z'
}

// shimsOf returns the PIDs of the containerd shims started by the
// containerd serving sock: they name its address on their command line,
// and outlive it.
func shimsOf(sock string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == sock {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// unmountUnder detaches every mount point under dir, deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 {
			p := unescapeMount(fs[4])
			if p == dir || strings.HasPrefix(p, dir+"/") {
				points = append(points, p)
			}
		}
	}
	_ = f.Close()
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// cgroupRootFile records, in the node's directory, the cgroup root its
// kubelet was given, for cleanNode.
func cgroupRootFile(dir string) string { return filepath.Join(dir, "run", "cgroup-root") }

// makeCgroupRoot makes the cgroup root of the node in slot in every
// cgroup hierarchy (cgroupfs; a cpuset gets its parent's CPUs and memory
// nodes, which a new one lacks), records it in dir and returns it.
func makeCgroupRoot(dir, slot string) (string, error) {
	if slot == "" {
		slot = "0"
	}
	root := nodeCgroupRoot(slot)
	if err := os.WriteFile(cgroupRootFile(dir), []byte(root), 0o600); err != nil { //nolint:gosec // the node's own directory
		return "", err
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return "", err
	}
	for _, h := range hs {
		d := filepath.Join(h, root)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) { //nolint:gosec // a cgroup directory
			return "", fmt.Errorf("making the node's cgroup root: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(h, f)) //nolint:gosec // the cgroup hierarchy's own file
			if err != nil {
				continue // not a cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil { //nolint:gosec // a cgroup file
				return "", fmt.Errorf("setting %s of the node's cgroup root: %w", f, err)
			}
		}
	}
	return root, nil
}

// cgroupHierarchies are the cgroup file systems mounted on this machine
// (one per cgroup v1 controller, or the v2 one).
func cgroupHierarchies() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		for i, f := range fs {
			if f == "-" && i+1 < len(fs) && (fs[i+1] == "cgroup" || fs[i+1] == "cgroup2") {
				out = append(out, unescapeMount(fs[4]))
			}
		}
	}
	return out, nil
}

// cgroupDirs are the node's cgroups (its kubelet's root, the pods' under
// it) in every hierarchy.
func cgroupDirs(dir string) []string {
	b, err := os.ReadFile(cgroupRootFile(dir))
	root := strings.TrimSpace(string(b))
	if err != nil || !strings.HasPrefix(root, "/ppt-node-") {
		return nil
	}
	hs, _ := cgroupHierarchies()
	var out []string
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, root)); err == nil { //nolint:gosec // a cgroup path the node made
			out = append(out, filepath.Join(h, root))
		}
	}
	return out
}

// removeCgroupTree removes a cgroup directory and its children, deepest
// first (cgroup directories are removed with rmdir only).
func removeCgroupTree(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		_ = syscall.Rmdir(d)
	}
}
