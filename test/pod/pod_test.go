// Package pod runs the provider as the Pod Crossplane core makes on a
// user's cluster: core on its default (Deployment) package runtime
// installs the provider package from the loopback registry with the
// runtime config of examples/provider/runtime-config.yaml, and the
// package's embedded image runs under a real kubelet (containerd, runc,
// bridge CNI, kube-proxy) in the test's private network namespace
// (testenv.NodeMain). The Pod reaches the kube-apiserver through the
// kubernetes Service and logs in to OpenBao, at the example's cluster DNS
// name, with its projected token. The Configuration's function runs as a
// Pod too, and core calls it by its Service's name.
package pod

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"golang.org/x/net/dns/dnsmessage"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.NodeMain(m, testenv.Options{Postgres: true, OpenBao: true, OpenBaoAudit: true, Kube: true, Crossplane: true, Node: true, NodeConfiguration: true}, &env)
}

func await[T client.Object](t *testing.T, obj T, timeout time.Duration, what string, cond func(T) bool) {
	t.Helper()
	testenv.Await(t, env.Kube.Client, obj, timeout, what, cond, func(o T) string {
		b, _ := json.MarshalIndent(o, "", " ")
		return string(b)
	})
}

func ready(c xpv2.Condition) bool { return c.Status == corev1.ConditionTrue }

// exampleContainer is the package-runtime container and pod security
// context of the runtime config the environment applied.
func exampleContainer(t *testing.T) (corev1.Container, *corev1.PodSecurityContext) {
	t.Helper()
	rc, err := testenv.NodeRuntimeConfig()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := struct {
		Spec struct {
			DeploymentTemplate struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			} `json:"deploymentTemplate"`
		} `json:"spec"`
	}{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rc.Object, &tmpl); err != nil {
		t.Fatal(err)
	}
	pod := tmpl.Spec.DeploymentTemplate.Spec.Template.Spec
	for _, c := range pod.Containers {
		if c.Name == "package-runtime" {
			return c, pod.SecurityContext
		}
	}
	t.Fatal("the runtime config has no package-runtime container")
	return corev1.Container{}, nil
}

func runtimeContainer(t *testing.T, pod *corev1.Pod) (corev1.Container, corev1.ContainerStatus) {
	t.Helper()
	for i, c := range pod.Spec.Containers {
		if c.Name == "package-runtime" {
			for _, s := range pod.Status.ContainerStatuses {
				if s.Name == c.Name {
					return pod.Spec.Containers[i], s
				}
			}
		}
	}
	t.Fatalf("pod %s has no package-runtime container with a status: %+v", pod.Name, pod.Status)
	return corev1.Container{}, corev1.ContainerStatus{}
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readProc reads a file of /proc/<pid>.
func readProc(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProviderPod is one story, in order: the Pod core made runs under the
// kubelet as the runtime config says, drives a Database on PostgreSQL
// (TLS) with its credential in OpenBao, logged in to OpenBao with its
// projected token, is restarted by the kubelet when its process is
// killed, and logs no secret.
func TestProviderPod(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := env.Kube.Client
	x := env.Crossplane
	t.Logf("node up in %s; provider Pod Ready %s after the Provider was created", env.Node.Up.Round(time.Millisecond), x.ProviderPodReady.Round(time.Millisecond))

	// What core's Deployment runtime made.
	pod, err := x.ProviderPod(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !podReady(pod) || pod.Spec.NodeName != testenv.NodeName {
		t.Fatalf("pod %s: phase %s on node %q, conditions %+v", pod.Name, pod.Status.Phase, pod.Spec.NodeName, pod.Status.Conditions)
	}
	rs := &appsv1.ReplicaSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: metav1.GetControllerOf(pod).Name}, rs); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: metav1.GetControllerOf(rs).Name}, dep); err != nil {
		t.Fatal(err)
	}
	if o := metav1.GetControllerOf(dep); o == nil || o.Kind != "ProviderRevision" || o.Name != x.ProviderRevision {
		t.Errorf("Deployment %s is controlled by %+v, want ProviderRevision %s", dep.Name, o, x.ProviderRevision)
	}
	svcs := &corev1.ServiceList{}
	if err := c.List(ctx, svcs, client.InNamespace(testenv.CrossplaneNamespace)); err != nil {
		t.Fatal(err)
	}
	var svc *corev1.Service
	for i := range svcs.Items {
		if o := metav1.GetControllerOf(&svcs.Items[i]); o != nil && o.Kind == "ProviderRevision" && o.Name == x.ProviderRevision {
			svc = &svcs.Items[i]
		}
	}
	if svc == nil {
		t.Errorf("no Service controlled by ProviderRevision %s", x.ProviderRevision)
	}
	for _, s := range []string{testenv.ProviderName + "-tls-server", testenv.ProviderName + "-tls-client"} {
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: testenv.CrossplaneNamespace, Name: s}, sec); err != nil {
			t.Errorf("core's TLS Secret %s: %v", s, err)
		} else if len(sec.Data["tls.crt"]) == 0 {
			t.Errorf("core's TLS Secret %s holds no certificate", s)
		}
	}
	ctr, st := runtimeContainer(t, pod)
	if want := testenv.ProviderPackageName; !strings.Contains(ctr.Image, want) || !strings.HasPrefix(ctr.Image, "127.0.0.1:") {
		t.Errorf("the container runs image %s, want the package %s from the loopback registry", ctr.Image, want)
	}

	// The container is as the runtime config says.
	want, wantPod := exampleContainer(t)
	if d := cmp.Diff(want.SecurityContext, ctr.SecurityContext); d != "" {
		t.Errorf("container securityContext (-runtime config +pod):\n%s", d)
	}
	if wantPod == nil || pod.Spec.SecurityContext == nil || *wantPod.RunAsNonRoot != *pod.Spec.SecurityContext.RunAsNonRoot ||
		*wantPod.RunAsUser != *pod.Spec.SecurityContext.RunAsUser {
		t.Errorf("pod securityContext %+v, want %+v", pod.Spec.SecurityContext, wantPod)
	}
	for _, l := range []corev1.ResourceList{want.Resources.Limits, want.Resources.Requests} {
		if len(l) == 0 {
			t.Fatal("the runtime config sets no resource requests or limits")
		}
	}
	for name, q := range want.Resources.Limits {
		if got := ctr.Resources.Limits[name]; got.Cmp(q) != 0 {
			t.Errorf("limit %s = %s, want %s", name, got.String(), q.String())
		}
	}
	for name, q := range want.Resources.Requests {
		if got := ctr.Resources.Requests[name]; got.Cmp(q) != 0 {
			t.Errorf("request %s = %s, want %s", name, got.String(), q.String())
		}
	}
	memLimit := want.Resources.Limits[corev1.ResourceMemory]
	var gomem *corev1.EnvVar
	for i := range ctr.Env {
		if ctr.Env[i].Name == "GOMEMLIMIT" {
			gomem = &ctr.Env[i]
		}
	}
	if gomem == nil || gomem.ValueFrom == nil || gomem.ValueFrom.ResourceFieldRef == nil || gomem.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("GOMEMLIMIT = %+v, want the memory limit", gomem)
	}
	for probe, p := range map[string]*corev1.Probe{"/healthz": ctr.LivenessProbe, "/readyz": ctr.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != probe || p.HTTPGet.Port.IntValue() != 8081 {
			t.Errorf("probe of %s: %+v, want an HTTP GET of the provider's health endpoint :8081%s", probe, p, probe)
		}
	}

	// ... and so is its process, as the kubelet and runc made it.
	cid := strings.TrimPrefix(st.ContainerID, "containerd://")
	pid, err := env.Node.TaskPid(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	checkProcess(t, pid, *want.SecurityContext.RunAsUser, memLimit.Value())

	// A Database on PostgreSQL (TLS, verify-full), its credential in
	// OpenBao, driven by the Pod.
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ProviderNamespace, Name: "pod-admin"},
		StringData: map[string]string{"username": env.Postgres.AdminUser, "password": env.Postgres.AdminPassword},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "node"},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: env.Postgres.Host, Hostaddr: env.Postgres.PodHostaddr, Port: int32(env.Postgres.Port)}, //nolint:gosec // test port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "pod-admin"}},
		},
	}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	await(t, cfg, 2*time.Minute, "the config is Ready", func(o *v1alpha1.ClusterProviderConfig) bool { return ready(o.GetCondition(xpv2.TypeReady)) })
	passwords := []string{}
	database := func(name string) {
		t.Helper()
		d := &v1alpha1.Database{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.DatabaseSpec{
				ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
					ProviderConfigReference: &xpv2.Reference{Name: cfg.Name},
					ManagementPolicies:      xpv2.ManagementPolicies{xpv2.ManagementActionAll},
				},
				ReclaimPolicy: v1alpha1.ReclaimDelete,
				ForProvider:   v1alpha1.DatabaseParameters{Database: name},
			},
		}
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		await(t, d, 2*time.Minute, "Database "+name+" is Ready", func(d *v1alpha1.Database) bool { return ready(d.GetCondition(xpv2.TypeReady)) })
		passwords = append(passwords, appLogin(ctx, t, name))
	}
	database("podshop")

	// The Pod logged in to OpenBao with its projected token, at the
	// example's address, a cluster DNS name the node resolved.
	checkLogin(ctx, t, pod)
	checkDNS(ctx, t, pod, ctr, pid)

	// Kill the container's process (its PID from containerd); the kubelet
	// restarts the container, and the Database stays Ready.
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	restarted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	await(t, restarted, 3*time.Minute, "the kubelet restarts the container and it is Ready", func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == ctr.Name {
				return s.RestartCount > st.RestartCount && s.ContainerID != st.ContainerID && s.Ready && podReady(p)
			}
		}
		return false
	})
	t.Logf("killed the provider's process (pid %d); the kubelet restarted its container, Ready again after %s", pid, time.Since(killed).Round(time.Millisecond))
	_, st2 := runtimeContainer(t, restarted)
	if st2.LastTerminationState.Terminated == nil || st2.LastTerminationState.Terminated.ExitCode != 137 {
		t.Errorf("the last termination: %+v, want the SIGKILL (exit code 137)", st2.LastTerminationState.Terminated)
	}
	if restarted.UID != pod.UID {
		t.Errorf("the Pod was replaced (uid %s, was %s): want its container restarted in place", restarted.UID, pod.UID)
	}
	first := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Name: "podshop"}}
	await(t, first, time.Minute, "Database podshop stays Ready", func(d *v1alpha1.Database) bool { return ready(d.GetCondition(xpv2.TypeReady)) })
	// The restarted container works: a new Database.
	database("podshopagain")

	// No secret in the Pod's logs (both containers' runs), the harness's
	// logs, or the objects.
	tok := projectedToken(t, pod)
	canaries(ctx, t, pod.Name, append(passwords, env.Postgres.AdminPassword, env.Postgres.SuperPassword, env.OpenBao.RootToken, tok))
}

// checkDNS checks that the Pod reached OpenBao by the example's cluster
// DNS name: its container passes the example's --openbao-address
// unchanged, its resolv.conf names the node's DNS server, which answered
// the Pod's A query of the name with the ClusterIP of the Service the
// harness made for OpenBao; and that the harness's processes (Crossplane
// core's among them) resolve the same name through the same server.
func checkDNS(ctx context.Context, t *testing.T, pod *corev1.Pod, ctr corev1.Container, pid int) {
	t.Helper()
	addr, err := testenv.ExampleOpenBaoAddress()
	if err != nil {
		t.Fatal(err)
	}
	if addr != env.OpenBao.ServiceAddress || !strings.Contains(addr, ".svc") {
		t.Errorf("the example's OpenBao address %s, the harness's Service address %s: want the same cluster DNS name", addr, env.OpenBao.ServiceAddress)
	}
	if !slices.Contains(ctr.Args, "--openbao-address="+addr) {
		t.Errorf("the container's args %q, want --openbao-address=%s as the example has it", ctr.Args, addr)
	}
	resolv := readProc(t, pid, "root/etc/resolv.conf")
	if !slices.Contains(strings.Split(resolv, "\n"), "nameserver "+testenv.NodeIP) {
		t.Errorf("the Pod's /etc/resolv.conf names no nameserver %s:\n%s", testenv.NodeIP, resolv)
	}
	host := strings.Split(strings.TrimPrefix(addr, "https://"), ":")[0]
	parts := strings.Split(host, ".")
	svc := &corev1.Service{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: parts[1], Name: parts[0]}, svc); err != nil {
		t.Fatal(err)
	}
	fqdn := parts[0] + "." + parts[1] + ".svc." + testenv.ClusterDomain + "."
	answered := 0
	for _, q := range env.Node.DNS.Queries() {
		if q.From.String() == pod.Status.PodIP && q.Name == fqdn && q.Type == dnsmessage.TypeA && q.Answer.String() == svc.Spec.ClusterIP {
			answered++
		}
	}
	if answered == 0 {
		t.Errorf("the node's DNS server answered no A query of %s from the Pod (%s) with the Service's ClusterIP %s; its queries: %+v",
			fqdn, pod.Status.PodIP, svc.Spec.ClusterIP, env.Node.DNS.Queries())
	}
	t.Logf("the Pod resolved %s to %s (%d A queries answered)", fqdn, svc.Spec.ClusterIP, answered)

	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != testenv.NodeResolvConf {
		t.Errorf("the harness's /etc/resolv.conf:\n%s\nwant the node's:\n%s", b, testenv.NodeResolvConf)
	}
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil || !cmp.Equal(ips, []string{svc.Spec.ClusterIP}) {
		t.Errorf("the harness resolves %s to %v (%v), want [%s]", host, ips, err, svc.Spec.ClusterIP)
	}
}

// checkProcess checks the container's process: its user, GOMEMLIMIT in its
// environment, its memory cgroup's limit, and its read-only root.
func checkProcess(t *testing.T, pid int, uid, memLimit int64) {
	t.Helper()
	for _, l := range strings.Split(readProc(t, pid, "status"), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "Uid:" && f[1] != strconv.FormatInt(uid, 10) {
			t.Errorf("the provider's process runs as uid %s, want %d", f[1], uid)
		}
	}
	// Only GOMEMLIMIT is looked at: the rest of the environment is not
	// the test's business to print.
	gomem := ""
	for _, kv := range strings.Split(readProc(t, pid, "environ"), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GOMEMLIMIT="); ok {
			gomem = v
		}
	}
	if gomem != strconv.FormatInt(memLimit, 10) {
		t.Errorf("the provider's process has GOMEMLIMIT=%q, want the memory limit %d", gomem, memLimit)
	}
	cg := ""
	for _, l := range strings.Split(readProc(t, pid, "cgroup"), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && (f[1] == "memory" || strings.Contains(","+f[1]+",", ",memory,")) {
			cg = f[2]
		}
	}
	if cg == "" {
		t.Errorf("the provider's process is in no memory cgroup:\n%s", readProc(t, pid, "cgroup"))
	} else if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cg, "memory.limit_in_bytes")); err != nil {
		t.Errorf("memory cgroup %s: %v", cg, err)
	} else if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(memLimit, 10) {
		t.Errorf("memory cgroup %s limits to %s bytes, want %d", cg, got, memLimit)
	}
	root := ""
	for _, l := range strings.Split(readProc(t, pid, "mounts"), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[1] == "/" {
			root = f[3]
		}
	}
	if !strings.HasPrefix(root, "ro,") && root != "ro" {
		t.Errorf("the provider's root filesystem is mounted %q, want read-only", root)
	}
}

// appLogin reads the Database's credential from OpenBao, logs in with it
// (verify-full) and returns its password, a canary.
func appLogin(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := root.KVv2(env.OpenBao.KVMount).Get(ctx, options.DefaultDatabaseBasePath+"/"+name)
	if err != nil {
		t.Fatalf("the credential of Database %s in OpenBao: %v", name, err)
	}
	user, _ := sec.Data["username"].(string)
	pw, _ := sec.Data["password"].(string)
	db, _ := sec.Data["database"].(string)
	app, err := env.Postgres.ConnConfig(user, pw, db)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, app)
	if err != nil {
		t.Fatalf("the app cannot log in with the credential of Database %s: %v", name, err)
	}
	_ = conn.Close(ctx)
	if pw == "" {
		t.Fatalf("the credential of Database %s has no password", name)
	}
	return pw
}

// projectedToken reads the Pod's OpenBao token as the kubelet wrote it
// into the projected volume of the runtime config.
func projectedToken(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Node.KubeletRoot, "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "openbao-token", "token"))
	if err != nil {
		t.Fatalf("the Pod's projected OpenBao token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// checkLogin checks that the Pod's login to OpenBao used its projected
// token: the token has OpenBao's audience and is bound to this Pod and the
// provider's service account, and a Kubernetes login from the Pod's
// address carried exactly it (the audit device's HMAC of it).
func checkLogin(ctx context.Context, t *testing.T, pod *corev1.Pod) {
	t.Helper()
	tok := projectedToken(t, pod)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatal("the projected token is no JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Aud []string `json:"aud"`
		Sub string   `json:"sub"`
		K8s struct {
			Pod struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	wantSub := "system:serviceaccount:" + testenv.ProviderNamespace + ":" + testenv.ProviderServiceAccount
	if !cmp.Equal(claims.Aud, []string{testenv.ProviderAudience}) || claims.Sub != wantSub || claims.K8s.Pod.Name != pod.Name || claims.K8s.Pod.UID != string(pod.UID) {
		t.Errorf("the projected token: audiences %v, subject %s, pod %s/%s; want [%s], %s, %s/%s",
			claims.Aud, claims.Sub, claims.K8s.Pod.Name, claims.K8s.Pod.UID, testenv.ProviderAudience, wantSub, pod.Name, pod.UID)
	}
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	h, err := root.Logical().WriteWithContext(ctx, "sys/audit-hash/requests", map[string]any{"input": tok})
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := h.Data["hash"].(string)
	if hash == "" {
		t.Fatal("OpenBao returned no audit hash")
	}
	logins, fromPod, err := kubernetesLogins(hash, pod.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	if fromPod == 0 {
		t.Errorf("no Kubernetes login to OpenBao from the Pod's address %s carried its projected token (%d logins in all)", pod.Status.PodIP, logins)
	}
}

// kubernetesLogins counts the Kubernetes-auth login requests in OpenBao's
// audit log, and those from addr whose JWT has the audit HMAC hash.
func kubernetesLogins(hash, addr string) (all, matching int, err error) {
	b, err := os.ReadFile(env.OpenBao.AuditLog)
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" {
			continue
		}
		var e struct {
			Type    string `json:"type"`
			Request struct {
				Path          string         `json:"path"`
				RemoteAddress string         `json:"remote_address"`
				Data          map[string]any `json:"data"`
			} `json:"request"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			return 0, 0, errors.New("the audit log has a line that is no JSON")
		}
		if e.Type != "request" || e.Request.Path != "auth/"+env.OpenBao.AuthMount+"/login" {
			continue
		}
		all++
		if e.Request.Data["jwt"] == hash && e.Request.RemoteAddress == addr {
			matching++
		}
	}
	return all, matching, nil
}

// canaries fails the test when a secret appears in the Pod's logs (every
// container run of it), the node's and the harness's logs, or the
// objects, Events and conditions.
func canaries(ctx context.Context, t *testing.T, podName string, secrets []string) {
	t.Helper()
	texts := map[string]string{}
	podLogs := 0
	for _, dir := range []string{env.Node.PodLogs, filepath.Join(env.Node.Dir, "logs")} {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, rerr := os.ReadFile(p) //nolint:gosec // the run's own logs
				if rerr != nil {
					t.Error(rerr)
					return nil
				}
				texts[p] = string(b)
				if dir == env.Node.PodLogs && strings.Contains(p, "_"+podName+"_") && strings.Contains(p, "package-runtime") && len(b) > 0 {
					podLogs++
				}
			}
			return nil
		})
	}
	if podLogs < 2 {
		t.Errorf("%d non-empty logs of the provider's container runs, want one before and one after the kill: the check would prove little", podLogs)
	}
	files, _ := filepath.Glob(filepath.Join(env.Dir, "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	var dump strings.Builder
	for _, l := range []client.ObjectList{&v1alpha1.DatabaseList{}, &v1alpha1.ClusterProviderConfigList{}, &corev1.EventList{}, &corev1.PodList{}, &appsv1.DeploymentList{}} {
		if err := env.Kube.Client.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(l)
		dump.Write(b)
	}
	texts["objects, conditions and Events"] = dump.String()
	for where, text := range texts {
		for _, s := range secrets {
			if s == "" {
				t.Fatal("an empty canary")
			}
			if strings.Contains(text, s) {
				t.Errorf("%s contains a secret (%.4s…)", where, s)
			}
		}
	}
}

// TestFunctionPod: the Configuration's function runs as the Pod core's
// Deployment runtime made for it, and core calls it by its Service's name
// (resolved by the node's DNS): a Tenant's Composition runs through it and
// composes the Tenant's DatabaseBinding.
func TestFunctionPod(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := env.Kube.Client
	fn := testenv.TenantFunctions[0].Name
	pod, err := env.Crossplane.FunctionPod(ctx, c, fn)
	if err != nil {
		t.Fatal(err)
	}
	if !podReady(pod) || pod.Spec.NodeName != testenv.NodeName {
		t.Fatalf("function pod %s: phase %s on node %q, conditions %+v", pod.Name, pod.Status.Phase, pod.Spec.NodeName, pod.Status.Conditions)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testenv.CrossplaneNamespace, Name: fn}, svc); err != nil {
		t.Fatalf("the function's Service: %v", err)
	}

	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "tenant", "namespace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples", "tenant", "tenant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range append(objs, tenants...) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	tenant := tenants[0]
	var bindings v1alpha1.DatabaseBindingList
	if err := testenv.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) error {
		if err := c.List(ctx, &bindings, client.InNamespace(tenant.GetNamespace())); err != nil {
			return err
		}
		if len(bindings.Items) == 0 {
			return fmt.Errorf("no DatabaseBinding composed for Tenant %s/%s yet", tenant.GetNamespace(), tenant.GetName())
		}
		return nil
	}); err != nil {
		got := tenant.DeepCopy()
		_ = c.Get(ctx, client.ObjectKeyFromObject(tenant), got)
		st, _ := json.MarshalIndent(got.Object["status"], "", " ")
		evs := &corev1.EventList{}
		_ = c.List(ctx, evs, client.InNamespace(tenant.GetNamespace()))
		var b strings.Builder
		for _, ev := range evs.Items {
			fmt.Fprintf(&b, "%s %s %s: %s\n", ev.Type, ev.InvolvedObject.Kind, ev.Reason, ev.Message)
		}
		t.Fatalf("%v\nTenant status: %s\nEvents:\n%s", err, st, b.String())
	}
	if owner := bindings.Items[0].GetLabels()["crossplane.io/composite"]; owner != tenant.GetName() {
		t.Errorf("DatabaseBinding %s: labels %v, want crossplane.io/composite=%s", bindings.Items[0].Name, bindings.Items[0].GetLabels(), tenant.GetName())
	}
	fqdn := fn + "." + testenv.CrossplaneNamespace + ".svc." + testenv.ClusterDomain + "."
	answered := 0
	for _, q := range env.Node.DNS.Queries() {
		if q.Name == fqdn && q.Type == dnsmessage.TypeA && q.Answer.String() == pod.Status.PodIP {
			answered++
		}
	}
	if answered == 0 {
		t.Errorf("the node's DNS server answered no A query of %s with the function Pod's address %s (its Service is headless: %q)", fqdn, pod.Status.PodIP, svc.Spec.ClusterIP)
	}
	t.Logf("the Tenant's Composition ran through the function's Pod %s (%s; %d A queries of %s answered with it): DatabaseBinding %s",
		pod.Name, pod.Status.PodIP, answered, fqdn, bindings.Items[0].Name)
}

// The PodMonitor users apply (cluster/monitoring/podmonitor.yaml) selects
// exactly the provider's Pod that core made, by the labels core gives it,
// and scrapes a port of it that exists, by name, at the path the provider
// serves its metrics on.
func TestPodMonitorSelectsTheProviderPod(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "cluster", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	var pm map[string]any
	for _, o := range objs {
		if o.GetKind() == "PodMonitor" {
			pm = o.Object
		}
	}
	if pm == nil {
		t.Fatal("cluster/monitoring has no PodMonitor")
	}
	spec, _ := pm["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	raw, _ := sel["matchLabels"].(map[string]any)
	labels := client.MatchingLabels{}
	for k, v := range raw {
		labels[k], _ = v.(string)
	}
	if len(labels) == 0 {
		t.Fatalf("the PodMonitor selects by no labels: %v", sel)
	}
	pods := &corev1.PodList{}
	if err := env.Kube.Client.List(ctx, pods, client.InNamespace(testenv.CrossplaneNamespace), labels); err != nil {
		t.Fatal(err)
	}
	want, err := env.Crossplane.ProviderPod(ctx, env.Kube.Client)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pods.Items {
		got = append(got, p.Name)
	}
	if diff := cmp.Diff([]string{want.Name}, got); diff != "" {
		t.Fatalf("the PodMonitor's selector %v selects (-want +got):\n%s", labels, diff)
	}
	ctr, _ := runtimeContainer(t, want)
	eps, _ := spec["podMetricsEndpoints"].([]any)
	if len(eps) == 0 {
		t.Fatal("the PodMonitor has no podMetricsEndpoints")
	}
	for _, e := range eps {
		ep, _ := e.(map[string]any)
		port, _ := ep["port"].(string)
		found := false
		for _, p := range ctr.Ports {
			if p.Name == port {
				found = true
				body := scrapePod(ctx, t, want.Status.PodIP, p.ContainerPort, fmt.Sprint(ep["path"]))
				if !strings.Contains(body, "# TYPE ") {
					t.Errorf("GET %s on port %s (%d) answered no metrics: %.200q", ep["path"], port, p.ContainerPort, body)
				}
			}
		}
		if !found {
			t.Errorf("the PodMonitor scrapes port %q; the provider's container has %+v", port, ctr.Ports)
		}
	}
}

// scrapePod GETs path on the Pod's port over plain HTTP, from inside the
// node's network namespace.
func scrapePod(ctx context.Context, t *testing.T, ip string, port int32, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, strconv.Itoa(int(port)))+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", req.URL, resp.Status)
	}
	return string(b)
}

// `kubectl logs` of the provider's Pod works: the kube-apiserver reaches
// the node's kubelet by its address (the node's DNS knows no host names).
func TestProviderLogsThroughTheAPIServer(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	pod, err := env.Crossplane.ProviderPod(ctx, env.Kube.Client)
	if err != nil {
		t.Fatal(err)
	}
	lines := int64(5)
	b, err := env.Kube.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "package-runtime", TailLines: &lines}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("the provider Pod's log through the API server: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		t.Fatal("the provider Pod's log through the API server is empty")
	}
}
