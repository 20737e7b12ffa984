// Command devenv runs the local development environment behind `make dev`:
// the same real components the tests use (kube-apiserver + etcd with the
// project's CRDs, PostgreSQL with TLS, OpenBao with Kubernetes auth), the
// provider built from this tree as a separate process, and the examples
// applied with their endpoint and credential pointed at the local server.
//
// It writes its state to -state (kubeconfig, CA, provider log, a "ready"
// file once everything is applied) and runs until SIGINT or SIGTERM, then
// stops everything it started.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
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
	ProviderPID    int    `json:"providerPID"`
	Namespace      string `json:"namespace"`
	Database       string `json:"database"`
}

func main() {
	state := flag.String("state", "_output/dev", "Directory for the environment's state files.")
	flag.Parse()
	if err := run(*state); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

func step(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }

func run(stateDir string) error {
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(stateDir, "ready"))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	step("starting kube-apiserver + etcd, PostgreSQL (TLS), OpenBao (TLS, Kubernetes auth) and the External Secrets Operator")
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := testenv.Start(startCtx, testenv.Options{Kube: true, Postgres: true, OpenBao: true, ESO: true})
	cancel()
	if err != nil {
		return err
	}
	defer env.Stop()

	kubeconfig := filepath.Join(stateDir, "kubeconfig")
	if err := copyFile(env.Kube.KubeconfigFile, kubeconfig); err != nil {
		return err
	}
	ca := filepath.Join(stateDir, "ca.crt")
	if err := os.WriteFile(ca, env.CA.CertPEM, 0o644); err != nil {
		return err
	}

	step("building and starting the provider")
	bin := filepath.Join(stateDir, "provider")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/provider").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/provider: %w\n%s", err, out)
	}
	// Out of cluster there is no projected token: mint one for the
	// provider's service account, as the kubelet would.
	jwt, err := env.Kube.ServiceAccountToken(ctx, testenv.ProviderNamespace, testenv.ProviderServiceAccount)
	if err != nil {
		return err
	}
	saToken := filepath.Join(stateDir, "sa-token")
	if err := os.WriteFile(saToken, []byte(jwt), 0o600); err != nil {
		return err
	}
	providerLog := filepath.Join(stateDir, "provider.log")
	lf, err := os.Create(providerLog)
	if err != nil {
		return err
	}
	defer lf.Close() //nolint:errcheck // best effort
	prov := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--namespace="+testenv.ProviderNamespace,
		"--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--openbao-address="+env.OpenBao.Address,
		"--openbao-auth-role="+env.OpenBao.ProviderRole,
		"--openbao-sa-token-file="+saToken,
		"--ca-bundle="+ca,
		"--poll=15s",
	)
	prov.Stdout, prov.Stderr = lf, lf
	if err := prov.Start(); err != nil {
		return err
	}
	provDone := make(chan error, 1)
	go func() { provDone <- prov.Wait() }()
	defer func() {
		_ = prov.Process.Signal(syscall.SIGTERM)
		select {
		case <-provDone:
		case <-time.After(20 * time.Second):
			_ = prov.Process.Kill()
		}
	}()

	step("applying examples/ (endpoint and admin credential pointed at the local server)")
	db, err := applyExamples(ctx, env)
	if err != nil {
		return err
	}

	st := State{
		Kubeconfig: kubeconfig, CABundle: ca, OpenBaoAddress: env.OpenBao.Address,
		PostgresHost: env.Postgres.Host, PostgresPort: env.Postgres.Port,
		ProviderLog: providerLog, ProviderPID: prov.Process.Pid,
		Namespace: db.Namespace, Database: db.Name,
	}
	if err := waitUntilWatched(ctx, env, provDone); err != nil {
		return fmt.Errorf("%w; provider log: %s", err, providerLog)
	}
	if err := waitForDatabase(ctx, env, db, provDone); err != nil {
		return fmt.Errorf("%w; provider log: %s", err, providerLog)
	}
	if err := waitForSecret(ctx, env, db.Namespace, "shared-"+db.Name+"-postgresql"); err != nil {
		return fmt.Errorf("%w; ESO log: %s", err, env.ESO.LogFile())
	}
	// A local, throw-away OpenBao: its root token goes to a 0600 file so
	// the developer can read the tenant record (it is never printed).
	if err := os.WriteFile(filepath.Join(stateDir, "openbao-root-token"), []byte(env.OpenBao.RootToken), 0o600); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(stateDir, "state.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stateDir, "ready"), nil, 0o644); err != nil {
		return err
	}
	step("ready")

	select {
	case <-ctx.Done():
		step("stopping")
		return nil
	case err := <-provDone:
		return fmt.Errorf("the provider exited: %v (log: %s)", err, providerLog)
	}
}

// applyExamples applies every object under examples/, pointing the
// ClusterProviderConfig at the local server and filling the admin Secret
// with the local admin role. It returns the example Database.
func applyExamples(ctx context.Context, env *testenv.Env) (types.NamespacedName, error) {
	objs, err := testenv.ReadManifests(filepath.Join(testenv.RepoRoot(), "examples"))
	if err != nil {
		return types.NamespacedName{}, err
	}
	var db types.NamespacedName
	kube := env.Kube.Client
	// Namespaces first.
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			if err := env.Kube.EnsureNamespace(ctx, o.GetName()); err != nil {
				return db, err
			}
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			continue
		case "Secret":
			if err := setStringData(o, env); err != nil {
				return db, err
			}
		case v1alpha1.ClusterProviderConfigKind, v1alpha1.ProviderConfigKind:
			ep := map[string]any{
				"host":     env.Postgres.Host,
				"hostaddr": env.Postgres.Hostaddr,
				"port":     int64(env.Postgres.Port),
			}
			if err := unstructured.SetNestedMap(o.Object, ep, "spec", "endpoint"); err != nil {
				return db, err
			}
		case v1alpha1.DatabaseKind:
			db = types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		case "ClusterSecretStore":
			vault := map[string]any{"server": env.OpenBao.Address, "caBundle": base64.StdEncoding.EncodeToString(env.CA.CertPEM)}
			for k, v := range vault {
				if err := unstructured.SetNestedField(o.Object, v, "spec", "provider", "vault", k); err != nil {
					return db, err
				}
			}
		}
		if err := kube.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return db, fmt.Errorf("cannot apply example %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		fmt.Printf("    applied %s %s\n", strings.ToLower(o.GetKind()), nsName(o))
	}
	return db, nil
}

func setStringData(o *unstructured.Unstructured, env *testenv.Env) error {
	sd := map[string]any{"username": env.Postgres.AdminUser, "password": env.Postgres.AdminPassword}
	return unstructured.SetNestedMap(o.Object, sd, "stringData")
}

// waitUntilWatched waits until the example ClusterProviderConfig is Ready
// (TLS, authentication and privileges verified against the local server)
// and the provider counts the Database as its user.
func waitUntilWatched(ctx context.Context, env *testenv.Env, provDone <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		cpc := &v1alpha1.ClusterProviderConfig{}
		if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: "shared"}, cpc); err == nil {
			c := cpc.GetCondition(xpv2.TypeReady)
			s := fmt.Sprintf("    clusterproviderconfig/shared: phase=%s ready=%s reason=%s users=%d", cpc.Status.Phase, c.Status, c.Reason, cpc.Status.Users)
			if s != last {
				fmt.Println(s)
				last = s
			}
			if c.Status == corev1.ConditionTrue && cpc.Status.Users > 0 {
				fmt.Printf("    %s\n", c.Message)
				return nil
			}
		}
		select {
		case err := <-provDone:
			return fmt.Errorf("the provider exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("the provider did not pick up clusterproviderconfig/shared within 2 minutes")
}

// waitForDatabase waits until the example Database is Ready, showing its
// phases as they change.
func waitForDatabase(ctx context.Context, env *testenv.Env, key types.NamespacedName, provDone <-chan error) error {
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		db := &v1alpha1.Database{}
		if err := env.Kube.Client.Get(ctx, key, db); err == nil {
			c := db.GetCondition(xpv2.TypeReady)
			s := fmt.Sprintf("    database/%s: phase=%s ready=%s reason=%s", key.Name, db.Status.AtProvider.Phase, c.Status, c.Reason)
			if s != last {
				fmt.Println(s)
				last = s
			}
			if c.Status == corev1.ConditionTrue {
				fmt.Printf("    %s\n    credential: %s\n", c.Message, db.Status.AtProvider.Credential.OpenBaoURL)
				return nil
			}
		}
		select {
		case err := <-provDone:
			return fmt.Errorf("the provider exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("database %s did not become Ready within 3 minutes", key)
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

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
