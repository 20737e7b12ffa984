package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProviderCAConfigMap is the ConfigMap examples/provider/runtime-config.yaml
// mounts the CA bundle from (an admin creates it; the harness, with its CA).
const ProviderCAConfigMap = "provider-postgresql-tenant-ca"

// NodeRuntimeConfig reads the DeploymentRuntimeConfig of
// examples/provider/runtime-config.yaml, as a user copies it: the test node
// applies it unchanged. Its --openbao-address is a cluster DNS name, which
// the node's DNS server resolves to the Service the harness makes for its
// OpenBao (OpenBao.ServiceAddress).
func NodeRuntimeConfig() (*unstructured.Unstructured, error) {
	rc, _, err := exampleRuntimeConfig()
	return rc, err
}

// ExampleOpenBaoAddress returns the --openbao-address the package-runtime
// container of examples/provider/runtime-config.yaml passes.
func ExampleOpenBaoAddress() (string, error) {
	_, addr, err := exampleRuntimeConfig()
	return addr, err
}

func exampleRuntimeConfig() (*unstructured.Unstructured, string, error) {
	objs, err := ReadManifests(filepath.Join(RepoRoot(), "examples", "provider", "runtime-config.yaml"))
	if err != nil {
		return nil, "", err
	}
	if len(objs) != 1 || objs[0].GetKind() != "DeploymentRuntimeConfig" {
		return nil, "", errors.New("examples/provider/runtime-config.yaml must hold one DeploymentRuntimeConfig")
	}
	rc := objs[0]
	ctrs, _, _ := unstructured.NestedSlice(rc.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	for _, c := range ctrs {
		m, _ := c.(map[string]any)
		if m["name"] != "package-runtime" {
			continue
		}
		args, _ := m["args"].([]any)
		for _, a := range args {
			if s, _ := a.(string); strings.HasPrefix(s, "--openbao-address=") {
				return rc, strings.TrimPrefix(s, "--openbao-address="), nil
			}
		}
	}
	return nil, "", errors.New("examples/provider/runtime-config.yaml: the package-runtime container passes no --openbao-address")
}

// serviceRef is a Service named by an address's host.
type serviceRef struct {
	host, name, namespace string
	port                  int32
}

// serviceOfAddress reads an https:// address whose host is a Service's
// cluster DNS name: <name>.<namespace>.svc (or .svc.cluster.local), with
// its port (443 when none).
func serviceOfAddress(addr string) (serviceRef, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return serviceRef{}, err
	}
	if u.Scheme != "https" {
		return serviceRef{}, fmt.Errorf("%s: not an https:// address", addr)
	}
	h := strings.TrimSuffix(u.Hostname(), "."+ClusterDomain)
	l := strings.Split(h, ".")
	if len(l) != 3 || l[2] != "svc" {
		return serviceRef{}, fmt.Errorf("%s: the host is no Service's cluster DNS name (<name>.<namespace>.svc)", addr)
	}
	port := int32(443)
	if p := u.Port(); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return serviceRef{}, fmt.Errorf("%s: %w", addr, err)
		}
		port = int32(n)
	}
	return serviceRef{host: u.Hostname(), name: l[0], namespace: l[1], port: port}, nil
}

// exposeOnNode makes ServiceAddress lead to this server from the node's
// Pods: a Service of the address's name and namespace, without selector,
// on the address's port, and an EndpointSlice of it with the one endpoint
// NodeIP on the server's port (PodAddress). kube-proxy routes the
// Service's ClusterIP there; the node's DNS server resolves the name to it.
func (b *OpenBao) exposeOnNode(ctx context.Context, k *Kube) error {
	ref, err := serviceOfAddress(b.ServiceAddress)
	if err != nil {
		return err
	}
	pod, err := url.Parse(b.PodAddress)
	if err != nil {
		return err
	}
	target, err := strconv.ParseInt(pod.Port(), 10, 32)
	if err != nil {
		return err
	}
	if err := k.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ref.namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tcp, portName := corev1.ProtocolTCP, "https"
	if err := k.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.namespace, Name: ref.name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: portName, Protocol: tcp, Port: ref.port, TargetPort: intstr.FromInt32(int32(target)),
		}}},
	}); err != nil {
		return fmt.Errorf("the Service of %s: %w", b.ServiceAddress, err)
	}
	ready := true
	if err := k.Client.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.namespace, Name: ref.name + "-harness", Labels: map[string]string{
			discoveryv1.LabelServiceName: ref.name,
			discoveryv1.LabelManagedBy:   "testenv.ppt.local",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{NodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &tcp, Port: ptr.To(int32(target))}},
	}); err != nil {
		return fmt.Errorf("the EndpointSlice of %s: %w", b.ServiceAddress, err)
	}
	return nil
}

// InstallProviderPod installs the provider package through core's package
// manager with core's default (Deployment) package runtime and the test
// node: it publishes the package to the loopback registry (an ImageConfig
// rewrites its public name to it), creates the CA bundle ConfigMap,
// applies the examples' activation policy and runtime config
// (NodeRuntimeConfig), installs the provider with that runtime config, and
// waits until core has made the provider's Deployment, whose Pod (the
// package's embedded image, pulled by the node's containerd from the
// registry) is Ready under the kubelet, the revision has installed its
// objects and is healthy, and the RBAC manager has bound the provider's
// role to its service account. With configuration, it then installs the
// Configuration package (installConfigurationPod).
func (x *Crossplane) InstallProviderPod(ctx context.Context, pkgDir string, e *Env, configuration bool) error {
	k := e.Kube
	providerRef := ProviderPackageName + ":" + PackageTestVersion
	if err := x.reg.push(ctx, e.BinDir, filepath.Join(pkgDir, "provider-postgresql-tenant.xpkg"), providerRef); err != nil {
		return err
	}
	if err := x.imageConfigs(ctx, k, map[string]bool{hostOf(ProviderPackageName): true}); err != nil {
		return err
	}
	if err := k.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: CrossplaneNamespace, Name: ProviderCAConfigMap},
		Data:       map[string]string{"ca.crt": string(e.CA.CertPEM)},
	}); err != nil {
		return err
	}
	examples, err := ReadManifests(filepath.Join(RepoRoot(), "examples", "provider", "activation.yaml"))
	if err != nil {
		return err
	}
	rc, err := NodeRuntimeConfig()
	if err != nil {
		return err
	}
	if err := x.providerPod.applyTo(rc); err != nil {
		return err
	}
	saName, _, _ := unstructured.NestedString(rc.Object, "spec", "serviceAccountTemplate", "metadata", "name")
	if saName == "" {
		return errors.New("examples/provider/runtime-config.yaml names no service account")
	}
	for _, o := range append(examples, rc) {
		if err := k.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("examples/provider %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	prov := packageObject("Provider", ProviderName, providerRef)
	_ = unstructured.SetNestedField(prov.Object, rc.GetName(), "spec", "runtimeConfigRef", "name")
	t0 := time.Now()
	if err := k.Client.Create(ctx, prov); err != nil {
		return err
	}
	explain := func(err error) error {
		return fmt.Errorf("%w\n%s\ncrossplane log:\n%s", err, x.describeProviderPods(ctx, e), Tail(x.logFile, 30))
	}
	rev, err := x.activeRevision(ctx, k, "ProviderRevision", ProviderName, true, 4*time.Minute)
	if err != nil {
		return explain(fmt.Errorf("provider %s: %w", providerRef, err))
	}
	if err := WaitFor(ctx, 4*time.Minute, func(ctx context.Context) error {
		if err := x.rbacExited(); err != nil {
			return err
		}
		if err := e.Node.exited(); err != nil {
			return err
		}
		return packageReady(ctx, k, "Provider", ProviderName)
	}); err != nil {
		return explain(err)
	}
	// Core reports Healthy from the Deployment's Available condition,
	// which can be True before its first Pod runs.
	x.ProviderRevision = rev
	if err := WaitFor(ctx, 4*time.Minute, func(ctx context.Context) error {
		if err := e.Node.exited(); err != nil {
			return err
		}
		return runningReady(x.ProviderPod(ctx, k.Client))
	}); err != nil {
		return explain(err)
	}
	x.ProviderPodReady = time.Since(t0)
	if err := x.waitProviderRBAC(ctx, k, rev, saName); err != nil {
		return err
	}
	if configuration {
		if err := x.installConfigurationPod(ctx, pkgDir, e); err != nil {
			return explain(err)
		}
	}
	if !x.keepRBACManager {
		x.stopRBACManager()
	}
	x.ProviderRevision, x.ProviderServiceAccount = rev, saName
	return nil
}

// PublishPackages pushes the packages in pkgDir to the loopback registry
// under version: the provider, the functions built from the repository and
// the Configuration, each under its public name. Nothing installed changes:
// users upgrade by editing each package object's spec.package, and so do
// the tests.
func (x *Crossplane) PublishPackages(ctx context.Context, e *Env, pkgDir, version string) error {
	files := map[string]string{
		ProviderPackageName:      "provider-postgresql-tenant.xpkg",
		ConfigurationPackageName: "configuration-postgresql-tenant.xpkg",
	}
	for _, f := range TenantFunctions {
		if f.Source != "" {
			repo, _, _ := strings.Cut(f.Package, ":")
			files[repo] = f.PackageFile
		}
	}
	for repo, file := range files {
		if err := x.reg.push(ctx, e.BinDir, filepath.Join(pkgDir, file), repo+":"+version); err != nil {
			return err
		}
	}
	return nil
}

// ProviderPod returns the Pod of the provider revision's Deployment (the
// one not being deleted), or an error while there is none.
func (x *Crossplane) ProviderPod(ctx context.Context, c client.Client) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(CrossplaneNamespace), client.MatchingLabels{"pkg.crossplane.io/revision": x.ProviderRevision}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Pod of provider revision %s", x.ProviderRevision)
}

// describeProviderPods says, for an error message, what the Deployments
// and Pods in core's namespace are doing and how the kubelet's log ends.
func (x *Crossplane) describeProviderPods(ctx context.Context, e *Env) string {
	var b strings.Builder
	deps := &appsv1.DeploymentList{}
	if err := e.Kube.Client.List(ctx, deps, client.InNamespace(CrossplaneNamespace)); err == nil {
		for _, d := range deps.Items {
			fmt.Fprintf(&b, "Deployment %s: %d/%d ready %v\n", d.Name, d.Status.ReadyReplicas, d.Status.Replicas, d.Status.Conditions)
		}
	}
	pods := &corev1.PodList{}
	if err := e.Kube.Client.List(ctx, pods, client.InNamespace(CrossplaneNamespace)); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "Pod %s on %q: %s %v\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			for _, cs := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, "  container %s: ready %v restarts %d state %+v last %+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
			}
		}
	}
	evs := &corev1.EventList{}
	if err := e.Kube.Client.List(ctx, evs, client.InNamespace(CrossplaneNamespace)); err == nil {
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "Event %s %s: %s %s\n", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
			}
		}
	}
	if e.Node != nil {
		fmt.Fprintf(&b, "kubelet log ends:\n%s\n", Tail(filepath.Join(e.Node.Dir, "logs", "kubelet.log"), 15))
	}
	return b.String()
}

// installConfigurationPod installs the Configuration package through core's
// package manager, on the Deployment runtime: it publishes the Configuration
// and its functions' packages (built from this tree, runtime image
// embedded) to the loopback registry under the names and versions the
// Configuration depends on, creates the Configuration, and waits until core
// has installed each function, whose Pod is Ready on the node, and serves
// the XRDs (the RBAC manager has generated core's roles for their kinds).
func (x *Crossplane) installConfigurationPod(ctx context.Context, pkgDir string, e *Env) error {
	k := e.Kube
	deps, err := configurationDependencies()
	if err != nil {
		return err
	}
	var fns []string
	for _, d := range deps {
		if hostOf(d.pkg) != hostOf(ProviderPackageName) {
			return fmt.Errorf("the Configuration depends on %s, from a registry the node does not mirror", d.pkg)
		}
		if d.kind != "Function" {
			continue
		}
		var fn *Function
		for i := range TenantFunctions {
			if strings.HasPrefix(TenantFunctions[i].Package, d.pkg+":") && TenantFunctions[i].Source != "" {
				fn = &TenantFunctions[i]
			}
		}
		if fn == nil {
			return fmt.Errorf("the Configuration depends on %s, which is not built from this tree: no image of it to run on the node", d.pkg)
		}
		if err := x.reg.push(ctx, e.BinDir, filepath.Join(pkgDir, fn.PackageFile), d.pkg+":"+tagFor(d.version)); err != nil {
			return err
		}
		fns = append(fns, fn.Name)
	}
	configurationRef := ConfigurationPackageName + ":" + PackageTestVersion
	if err := x.reg.push(ctx, e.BinDir, filepath.Join(pkgDir, "configuration-postgresql-tenant.xpkg"), configurationRef); err != nil {
		return err
	}
	cfg := packageObject("Configuration", ConfigurationName, configurationRef)
	if err := k.Client.Create(ctx, cfg); err != nil {
		return err
	}
	for _, name := range fns {
		if err := WaitFor(ctx, 4*time.Minute, func(ctx context.Context) error {
			if err := e.Node.exited(); err != nil {
				return err
			}
			if err := packageReady(ctx, k, "Function", name); err != nil {
				return err
			}
			return runningReady(x.FunctionPod(ctx, k.Client, name))
		}); err != nil {
			return err
		}
	}
	return x.waitConfigurationXRDs(ctx, k)
}

// FunctionPod returns the Pod of the Function's active revision (the one
// not being deleted), or an error while there is none.
func (x *Crossplane) FunctionPod(ctx context.Context, c client.Client, function string) (*corev1.Pod, error) {
	rev, err := activeRevisionOf(ctx, c, "FunctionRevision", function)
	if err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(CrossplaneNamespace), client.MatchingLabels{"pkg.crossplane.io/revision": rev.GetName()}); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no Pod of function revision %s", rev.GetName())
}

// packageObject is a package object (Provider, Function, Configuration) of
// name installing ref.
func packageObject(kind, name, ref string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("pkg.crossplane.io/v1")
	o.SetKind(kind)
	o.SetName(name)
	_ = unstructured.SetNestedField(o.Object, ref, "spec", "package")
	return o
}

// packageReady reports, as an error until then, whether the package object
// kind/name is Installed and Healthy.
func packageReady(ctx context.Context, k *Kube, kind, name string) error {
	o := packageObject(kind, name, "")
	if err := k.Client.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
		return err
	}
	if conditionStatus(o, "Healthy") != "True" || conditionStatus(o, "Installed") != "True" {
		return fmt.Errorf("%s %s: %v", strings.ToLower(kind), name, conditionsOf(o))
	}
	return nil
}

// runningReady reports, as an error until then, whether the Pod (as a
// lookup returned it) is Running and Ready.
func runningReady(p *corev1.Pod, err error) error {
	if err != nil {
		return err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
			return nil
		}
	}
	return fmt.Errorf("pod %s is %s, not Ready", p.Name, p.Status.Phase)
}
