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
	"syscall"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
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
		"NoOpenBao":      {args: nil, want: "--openbao-address is required"},
		"BadBasePath":    {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--openbao-tenant-base-path=/abs"}, want: "--openbao-tenant-base-path"},
		"BadRate":        {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--max-reconcile-rate=0"}, want: "--max-reconcile-rate"},
		"BadConcurrency": {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--max-concurrent-reconciles=-1"}, want: "--max-concurrent-reconciles"},
		"StrayArgument":  {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "extra"}, want: "unexpected arguments"},
		"UnknownFlag":    {args: []string{"--no-such-flag"}, want: "no-such-flag"},
		"EmptyNamespace": {args: []string{"--openbao-address=https://bao:8200", "--openbao-auth-role=r", "--namespace="}, want: "--namespace"},
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
}

// The provider binary starts out of cluster against the test apiserver,
// answers on its health and metrics endpoints, registers its controllers
// behind the safe-start gate, and the usage controller blocks deleting a
// ClusterProviderConfig while a Database uses it.
func TestProviderStartsAndGuardsConfigsInUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kube := env.Kube.Client

	bin := filepath.Join(t.TempDir(), "provider")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	metricsPort, healthPort, pprofPort := freePort(t), freePort(t), freePort(t)
	logFile := filepath.Join(t.TempDir(), "provider.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
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
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("provider log:\n%s", lastLines(string(b), 60))
		}
	}()

	get := func(port int, path string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close() //nolint:errcheck // test
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
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
			return fmt.Errorf("the metrics address serves pprof: HTTP %d (%v)", code, err)
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
			`controller="providerconfig/providerconfig.database.ayatori.ddupan.top"`,
			`controller="managed/database.database.ayatori.ddupan.top"`,
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

	// A Database in an app namespace records its usage of the config.
	if err := env.Kube.EnsureNamespace(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	db := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "netbox"},
		Spec: v1alpha1.DatabaseSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "shared"}},
			ForProvider:         v1alpha1.DatabaseParameters{LoginRole: ptr.To("netbox")},
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

	// Deleting the Database with the default policies (no Delete) completes
	// without touching any server. There is no garbage collector in this
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
		return fmt.Errorf("still there (err %v)", err)
	})
	if err := kube.DeleteAllOf(ctx, &v1alpha1.ProviderConfigUsage{}, client.InNamespace("app")); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, exited, "the unused config is deleted", func() error {
		err := kube.Get(ctx, types.NamespacedName{Name: "shared"}, cpc)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

func eventually(t *testing.T, ctx context.Context, exited <-chan error, what string, fn func() error) {
	t.Helper()
	var err error
	for {
		if err = fn(); err == nil {
			return
		}
		select {
		case e := <-exited:
			t.Fatalf("provider exited (%v) while waiting until %s", e, what)
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
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
