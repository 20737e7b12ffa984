package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// The identities Crossplane's Helm chart gives core and its RBAC manager.
const (
	CoreServiceAccount        = "crossplane"
	RBACManagerServiceAccount = "rbac-manager"
)

// CrossplaneChartDir is where hack/install-tools.sh puts the templates of
// Crossplane's Helm chart (of the pinned core version).
func CrossplaneChartDir(binDir string) string {
	return filepath.Join(binDir, "crossplane-chart-templates")
}

// chartRBACFiles are the chart's templates that hold ClusterRoles and
// ClusterRoleBindings: core's, the RBAC manager's, the aggregated roles it
// manages and the allow-list of permissions providers may request.
var chartRBACFiles = []string{
	"clusterrole.yaml", "clusterrolebinding.yaml",
	"rbac-manager-clusterrole.yaml", "rbac-manager-clusterrolebinding.yaml",
	"rbac-manager-managed-clusterroles.yaml", "rbac-manager-allowed-provider-permissions.yaml",
}

// renderChartRBAC renders the chart's RBAC templates as `helm install` with
// the chart's defaults would (release name "crossplane" in
// crossplane-system, the RBAC manager deployed, its aggregated roles
// created). Only the little template language those files use is
// supported; anything else fails the render rather than being guessed.
func renderChartRBAC(dir string) ([]*unstructured.Unstructured, error) {
	values := map[string]any{
		"Values": map[string]any{
			"rbacManager":    map[string]any{"deploy": true, "skipAggregatedClusterRoles": false},
			"serviceAccount": map[string]any{"create": true, "name": ""},
		},
		"Release": map[string]any{"Namespace": CrossplaneNamespace, "Name": "crossplane"},
	}
	var out []*unstructured.Unstructured
	for _, f := range chartRBACFiles {
		b, err := os.ReadFile(filepath.Join(dir, f)) //nolint:gosec // the pinned chart's files in the component cache
		if err != nil {
			return nil, missing("Crossplane's Helm chart templates", dir, "hack/install-tools.sh crossplane-core (make tools)")
		}
		t := template.New(f).Option("missingkey=error").Funcs(template.FuncMap{
			// The chart's labels are cosmetic here.
			"include": func(string, any) string { return "" },
			"indent":  func(int, string) string { return "" },
		})
		if t, err = t.Parse(`{{- define "crossplane.name" -}}crossplane{{- end -}}` + string(b)); err != nil {
			return nil, fmt.Errorf("chart template %s: %w", f, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, values); err != nil {
			return nil, fmt.Errorf("chart template %s: %w", f, err)
		}
		docs, err := SplitYAML(buf.Bytes())
		if err != nil {
			return nil, fmt.Errorf("chart template %s: %w", f, err)
		}
		for _, doc := range docs {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				return nil, fmt.Errorf("chart template %s: %w", f, err)
			}
			if len(u.Object) > 0 {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// installCrossplaneRBAC creates the service accounts of core and the RBAC
// manager and the chart's ClusterRoles and bindings, and returns a
// kubeconfig for each identity.
func installCrossplaneRBAC(ctx context.Context, root, binDir string, k *Kube) (core, rbacManager string, err error) {
	objs, err := renderChartRBAC(CrossplaneChartDir(binDir))
	if err != nil {
		return "", "", err
	}
	for _, sa := range []string{CoreServiceAccount, RBACManagerServiceAccount} {
		if err := k.EnsureServiceAccount(ctx, CrossplaneNamespace, sa); err != nil {
			return "", "", err
		}
	}
	for _, o := range objs {
		if err := k.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", "", fmt.Errorf("chart %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	core = filepath.Join(root, "kubeconfig-crossplane")
	if err := k.WriteServiceAccountKubeconfig(ctx, CrossplaneNamespace, CoreServiceAccount, core); err != nil {
		return "", "", err
	}
	rbacManager = filepath.Join(root, "kubeconfig-rbac-manager")
	if err := k.WriteServiceAccountKubeconfig(ctx, CrossplaneNamespace, RBACManagerServiceAccount, rbacManager); err != nil {
		return "", "", err
	}
	return core, rbacManager, nil
}

// WriteServiceAccountKubeconfig writes a kubeconfig that authenticates as
// the service account with a token from the TokenRequest API (valid for a
// day: longer than any run), as a pod of that service account would.
func (k *Kube) WriteServiceAccountKubeconfig(ctx context.Context, ns, name, file string) error {
	ttl := int64((24 * time.Hour).Seconds())
	tr, err := k.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cannot request a token for %s/%s: %w", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: k.Config.Host, CertificateAuthorityData: k.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = "test"
	return clientcmd.WriteToFile(*cfg, file)
}

// ClusterRolesBoundTo lists the ClusterRoles bound to a service account by
// ClusterRoleBindings: what the RBAC manager granted it, for messages.
func (k *Kube) ClusterRolesBoundTo(ctx context.Context, ns, name string) ([]string, error) {
	l := &rbacv1.ClusterRoleBindingList{}
	if err := k.Client.List(ctx, l); err != nil {
		return nil, err
	}
	var out []string
	for _, b := range l.Items {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && s.Name == name {
				out = append(out, b.RoleRef.Name)
			}
		}
	}
	return out, nil
}
