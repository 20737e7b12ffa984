package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/config"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/inproc"
)

// These tests run the config controllers in process against a real
// kube-apiserver and a real PostgreSQL server with TLS.

var (
	env    *testenv.Env
	pools  *postgres.Manager
	caFile string // the CA bundle the controllers use; tests may rewrite it
	logs   = &testenv.LogBuffer{}
)

const interval = 2 * time.Second

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.All, &env, startControllers)
}

func startControllers(e *testenv.Env) (func(), error) {
	caFile = filepath.Join(e.Dir, "bundle.pem")
	if err := os.WriteFile(caFile, e.CA.CertPEM, 0o644); err != nil {
		return nil, err
	}
	c, stop, err := inproc.Start(e, inproc.Options{Poll: interval, ConfigInterval: interval, ConfigRetry: time.Second, CABundleFile: caFile, Logs: logs})
	if err != nil {
		return nil, err
	}
	pools = c.Pools
	return stop, nil
}

var seq int

func name(prefix string) string { seq++; return fmt.Sprintf("%s-%d", prefix, seq) }

// adminSecret creates a Secret with a credential in ns.
func adminSecret(t *testing.T, ns, user, password string) string {
	t.Helper()
	n := name("admin")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
		StringData: map[string]string{"username": user, "password": password},
	}
	if err := env.Kube.EnsureNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return n
}

func newCPC(host, secret string) *v1alpha1.ClusterProviderConfig {
	pg := env.Postgres
	return &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name("cpc")},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: host, Hostaddr: pg.Hostaddr, Port: int32(pg.Port)}, //nolint:gosec // test port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: secret}},
		},
	}
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := env.Kube.Client.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls obj until cond holds, failing with the last status seen.
func waitFor(t *testing.T, obj config.Object, what string, cond func(config.Object) bool) {
	t.Helper()
	testenv.Await(t, env.Kube.Client, obj, 60*time.Second, what, cond, func(o config.Object) string {
		st, _ := json.Marshal(o.ConfigStatus())
		return "status: " + string(st)
	})
}

func readyIs(status corev1.ConditionStatus, reason string) func(config.Object) bool {
	return func(o config.Object) bool {
		c := o.GetCondition(xpv2.TypeReady)
		return c.Status == status && string(c.Reason) == reason && o.ConfigStatus().ObservedGeneration == o.GetGeneration()
	}
}

func wantStatus(t *testing.T, o config.Object, phase v1alpha1.ConfigPhase, reason string, msgs ...string) {
	t.Helper()
	st := o.ConfigStatus()
	c := o.GetCondition(xpv2.TypeReady)
	if st.Phase != phase || string(c.Reason) != reason {
		t.Errorf("phase %q reason %q, want %q %q (message %q)", st.Phase, c.Reason, phase, reason, c.Message)
	}
	for _, m := range msgs {
		if !strings.Contains(c.Message, m) {
			t.Errorf("message %q lacks %q", c.Message, m)
		}
	}
	n := 0
	for _, cc := range st.Conditions {
		if cc.Type == xpv2.TypeReady {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d Ready conditions, want exactly one", n)
	}
}

func TestReadyOverVerifyFullByHostAndByHostaddr(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	secret := adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword)
	// By DNS name: the certificate's DNS SAN "localhost" and IP SAN.
	// By address: host is the IP literal itself, verified as an IP SAN.
	for _, host := range []string{pg.Host, pg.Hostaddr} {
		t.Run(host, func(t *testing.T) {
			cpc := newCPC(host, secret)
			create(t, cpc)
			waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
			wantStatus(t, cpc, v1alpha1.ConfigPhaseReady, "Ready", "PostgreSQL "+pg.Version, "TLS, authentication and privileges verified")
			if !strings.HasPrefix(cpc.Status.PostgreSQLVersion, pg.Version+".") {
				t.Errorf("postgresqlVersion %q, want %s.x", cpc.Status.PostgreSQLVersion, pg.Version)
			}
			if cpc.Spec.Endpoint.SSLMode != v1alpha1.SSLModeVerifyFull {
				t.Errorf("sslMode %q, want the default verify-full", cpc.Spec.Endpoint.SSLMode)
			}
			// The non-superuser admin reads the server's system identifier.
			var id string
			if err := pg.SuperConnT(t, "postgres").QueryRow(context.Background(), "SELECT system_identifier::text FROM pg_control_system()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			if cpc.Status.ServerIdentity != id {
				t.Errorf("serverIdentity %q, want the system identifier %q", cpc.Status.ServerIdentity, id)
			}
		})
	}
}

func TestWrongPasswordIsAuthenticationFailed(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, "not-the-password"))
	create(t, cpc)
	waitFor(t, cpc, "AuthenticationFailed", readyIs(corev1.ConditionFalse, "AuthenticationFailed"))
	wantStatus(t, cpc, v1alpha1.ConfigPhaseValidating, "AuthenticationFailed", "password authentication failed", "28P01")
	if strings.Contains(cpc.GetCondition(xpv2.TypeReady).Message, pg.AdminUser) {
		t.Errorf("message names the admin user: %q", cpc.GetCondition(xpv2.TypeReady).Message)
	}
}

func TestHostNotInCertificateIsAuthenticationFailed(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	cpc := newCPC("db.example.org", adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword))
	create(t, cpc)
	waitFor(t, cpc, "AuthenticationFailed", readyIs(corev1.ConditionFalse, "AuthenticationFailed"))
	wantStatus(t, cpc, v1alpha1.ConfigPhaseValidating, "AuthenticationFailed", "TLS verification failed", `does not name host "db.example.org"`)
}

func TestMissingPrivilegeIsInsufficientPrivileges(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	pw := testenv.RandomSecret("weak-")
	if err := pg.CreateRole(ctx, "weak_admin", pw, "CREATEDB NOCREATEROLE"); err != nil {
		t.Fatal(err)
	}
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, "weak_admin", pw))
	create(t, cpc)
	waitFor(t, cpc, "InsufficientPrivileges", readyIs(corev1.ConditionFalse, "InsufficientPrivileges"))
	wantStatus(t, cpc, v1alpha1.ConfigPhaseValidating, "InsufficientPrivileges", "CREATEROLE")
}

func TestSuperuserIsReadyWithAWarningEvent(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, pg.SuperUser, pg.SuperPassword))
	create(t, cpc)
	waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
	wantStatus(t, cpc, v1alpha1.ConfigPhaseReady, "Ready", "is a superuser")
	waitForEvent(t, cpc.GetName(), "SuperuserAdmin", corev1.EventTypeWarning)
}

func TestSecretInAnotherNamespaceIsInvalidSpec(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	pg := env.Postgres
	secret := adminSecret(t, "elsewhere", pg.AdminUser, pg.AdminPassword)
	cpc := newCPC(pg.Host, secret)
	cpc.Spec.Credentials.SecretRef.Namespace = "elsewhere"
	create(t, cpc)
	waitFor(t, cpc, "InvalidSpec", readyIs(corev1.ConditionFalse, "InvalidSpec"))
	wantStatus(t, cpc, v1alpha1.ConfigPhasePending, "InvalidSpec", `must be the provider's namespace "crossplane-system", not "elsewhere"`)
}

func TestSecretLifecycle(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	secretName := name("late-admin")
	cpc := newCPC(pg.Host, secretName)
	create(t, cpc)
	// A first validation without a Secret is never Ready.
	waitFor(t, cpc, "InvalidSpec", readyIs(corev1.ConditionFalse, "InvalidSpec"))
	wantStatus(t, cpc, v1alpha1.ConfigPhasePending, "InvalidSpec", "does not exist")

	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ProviderNamespace, Name: secretName},
		StringData: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword},
	}
	create(t, s)
	waitFor(t, cpc, "Ready once the Secret exists", readyIs(corev1.ConditionTrue, "Ready"))

	// Once a pool works, a missing Secret does not make the config NotReady,
	// but the message says so.
	if err := env.Kube.Client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cpc, "the warning about the missing Secret", func(o config.Object) bool {
		return strings.Contains(o.GetCondition(xpv2.TypeReady).Message, "working connection pool is kept")
	})
	wantStatus(t, cpc, v1alpha1.ConfigPhaseReady, "Ready", "does not exist", "working connection pool is kept")
}

func TestServerOutageAndRecovery(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	pg := env.Postgres
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword))
	create(t, cpc)
	waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
	gen := cpc.GetGeneration()

	pg.Stop()
	restarted := false
	defer func() {
		if !restarted {
			_ = pg.Start(context.Background())
		}
	}()
	waitFor(t, cpc, "DependencyUnavailable", readyIs(corev1.ConditionFalse, "DependencyUnavailable"))
	wantStatus(t, cpc, v1alpha1.ConfigPhaseValidating, "DependencyUnavailable", "localhost (127.0.0.1:")

	if err := pg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitFor(t, cpc, "Ready again", readyIs(corev1.ConditionTrue, "Ready"))
	if cpc.GetGeneration() != gen {
		t.Errorf("generation changed from %d to %d: the object was touched", gen, cpc.GetGeneration())
	}
}

// adminBackends returns the pids of the provider's sessions of a role.
func adminBackends(t *testing.T, role string) []int32 {
	t.Helper()
	ctx := context.Background()
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE usename = $1 AND application_name = $2 ORDER BY pid", role, postgres.ApplicationName)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

func TestCredentialRotationReplacesThePool(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	const role = "rot_admin"
	pw1 := testenv.RandomSecret("rot1-")
	if err := pg.CreateRole(ctx, role, pw1, "CREATEDB CREATEROLE"); err != nil {
		t.Fatal(err)
	}
	secret := adminSecret(t, testenv.ProviderNamespace, role, pw1)
	cpc := newCPC(pg.Host, secret)
	create(t, cpc)
	waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
	// The Ready check's own session may still be ending when Ready is
	// written (a clean-clone CI run saw 2): what settles is one (one
	// pooled connection; only the provider logs in as the role).
	su, err := pg.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(ctx) //nolint:errcheck // test
	testenv.AwaitSessions(t, su, "", role, 1, 15*time.Second)
	before := adminBackends(t, role)
	if len(before) != 1 {
		t.Fatalf("%d provider sessions of %s, want 1 (one pooled connection)", len(before), role)
	}
	closed := pools.Closed()

	// A label and an unrelated key change nothing.
	s := &corev1.Secret{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Namespace: testenv.ProviderNamespace, Name: secret}, s); err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{"touched": "yes"}
	s.Data["unrelated"] = []byte("x")
	// unguarded-update: the test's own admin Secret: the config controller only reads it, and nothing else writes it
	if err := env.Kube.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * interval)
	if got := pools.Closed(); got != closed {
		t.Errorf("a label/unrelated-key change closed %d pool(s)", got-closed)
	}
	if got := adminBackends(t, role); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("sessions changed from %v to %v without a credential change", before, got)
	}

	// Rotate: the password changes in PostgreSQL, then in the Secret.
	pw2 := testenv.RandomSecret("rot2-")
	if err := pg.AlterPassword(ctx, role, pw2); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	s.Data["password"] = []byte(pw2)
	// unguarded-update: the test's own admin Secret: the config controller only reads it, and nothing else writes it
	if err := env.Kube.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, cpc.GetName(), "ConnectionPoolReplaced", corev1.EventTypeNormal)
	waitFor(t, cpc, "Ready with the new credential", readyIs(corev1.ConditionTrue, "Ready"))
	if pools.Closed() <= closed {
		t.Error("the old pool was not closed")
	}
	deadline := time.Now().Add(30 * time.Second)
	var after []int32
	for time.Now().Before(deadline) {
		after = adminBackends(t, role)
		if len(after) == 1 && after[0] != before[0] {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(after) != 1 || after[0] == before[0] {
		t.Errorf("sessions after rotation %v (before %v): want the old one closed and one new", after, before)
	}
}

func TestCABundleChangeAndUntrustedCA(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword))
	create(t, cpc)
	waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))

	// A bundle holding only another CA: the server's certificate does not
	// verify, and the pool is rebuilt from the new bundle without a restart.
	if err := os.WriteFile(caFile, env.OtherCA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.WriteFile(caFile, env.CA.CertPEM, 0o644) }()
	waitFor(t, cpc, "AuthenticationFailed", readyIs(corev1.ConditionFalse, "AuthenticationFailed"))
	wantStatus(t, cpc, v1alpha1.ConfigPhaseValidating, "AuthenticationFailed", "TLS verification failed", "unknown authority")

	if err := os.WriteFile(caFile, env.CA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cpc, "Ready again", readyIs(corev1.ConditionTrue, "Ready"))
}

func TestDeletingConfigInUseBlocksNewDatabases(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword))
	create(t, cpc)
	waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
	newDB := func() *v1alpha1.Database {
		n := name("first")
		return &v1alpha1.Database{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: v1alpha1.DatabaseSpec{
				ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: cpc.GetName()}},
				ForProvider:                v1alpha1.DatabaseParameters{Database: strings.ReplaceAll(n, "-", "_")},
			},
		}
	}
	first := newDB()
	create(t, first)
	waitFor(t, cpc, "one user", func(o config.Object) bool { return o.ConfigStatus().Users == 1 })

	if err := env.Kube.Client.Delete(ctx, cpc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cpc, "phase Deleting", func(o config.Object) bool { return o.ConfigStatus().Phase == v1alpha1.ConfigPhaseDeleting })
	wantStatus(t, cpc, v1alpha1.ConfigPhaseDeleting, "Reconciling", "waiting until its 1 user(s)")

	second := newDB()
	create(t, second)
	deadline := time.Now().Add(30 * time.Second)
	var c xpv2.Condition
	for time.Now().Before(deadline) {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
			t.Fatal(err)
		}
		if c = second.GetCondition(xpv2.TypeReady); c.Reason == "InstanceNotReady" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.Reason != "InstanceNotReady" || !strings.Contains(c.Message, "is being deleted") {
		t.Errorf("new Database's Ready condition %+v, want InstanceNotReady naming the deletion", c)
	}
	time.Sleep(interval)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(cpc), cpc); err != nil {
		t.Fatalf("the config in use was deleted: %v", err)
	}
}

// TestBindingUsageBlocksDeletionToo: a ClusterProviderConfig is also in use
// while a DatabaseBinding records a ProviderConfigUsage naming it in its
// namespace; it goes once the last usage of either kind is gone.
func TestBindingUsageBlocksDeletionToo(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword))
	create(t, cpc)
	waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
	if err := env.Kube.EnsureNamespace(ctx, "team-usage"); err != nil {
		t.Fatal(err)
	}
	// The usage as the typed tracker writes it for a DatabaseBinding.
	usage := &v1alpha1.ProviderConfigUsage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-usage", Name: name("binding-uid"),
			Labels:          map[string]string{xpv2.LabelKeyProviderName: cpc.GetName(), xpv2.LabelKeyProviderKind: v1alpha1.ClusterProviderConfigKind},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.DatabaseBindingKind, Name: "db", UID: "binding-uid", Controller: ptr.To(true)}},
		},
	}
	usage.ProviderConfigReference = xpv2.ProviderConfigReference{Kind: v1alpha1.ClusterProviderConfigKind, Name: cpc.GetName()}
	usage.ResourceReference = xpv2.TypedReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.DatabaseBindingKind, Name: "db"}
	create(t, usage)
	// A usage of another config of the same name but another kind does not count.
	other := usage.DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Namespace: "team-usage", Name: name("other-uid"),
		Labels:          map[string]string{xpv2.LabelKeyProviderName: cpc.GetName(), xpv2.LabelKeyProviderKind: "ProviderConfig"},
		OwnerReferences: usage.OwnerReferences,
	}
	other.ProviderConfigReference.Kind = "ProviderConfig"
	create(t, other)
	waitFor(t, cpc, "one user", func(o config.Object) bool { return o.ConfigStatus().Users == 1 })

	if err := env.Kube.Client.Delete(ctx, cpc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cpc, "phase Deleting", func(o config.Object) bool { return o.ConfigStatus().Phase == v1alpha1.ConfigPhaseDeleting })
	time.Sleep(2 * interval)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(cpc), cpc); err != nil {
		t.Fatalf("the config used by a DatabaseBinding was deleted: %v", err)
	}
	if c := cpc.GetCondition("Terminating"); !strings.Contains(c.Message, "0 Database(s) and 1 DatabaseBinding(s)") {
		t.Errorf("Terminating condition %+v, want it to name the binding", c)
	}

	if err := env.Kube.Client.Delete(ctx, usage); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(cpc), cpc); kerrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("the config was not deleted after its last usage went; finalizers %v", cpc.GetFinalizers())
}

func waitForEvent(t *testing.T, object, reason, typ string) {
	t.Helper()
	if err := testenv.WaitFor(context.Background(), 30*time.Second, func(ctx context.Context) error {
		l := &corev1.EventList{}
		if err := env.Kube.Client.List(ctx, l); err != nil {
			return err
		}
		for _, e := range l.Items {
			if e.InvolvedObject.Name == object && e.Reason == reason && e.Type == typ {
				return nil
			}
		}
		return testenv.ErrNotYet
	}); err != nil {
		t.Errorf("no %s event %q for %s: %v", typ, reason, object, err)
	}
}

// The config's ConnectionBudget condition and status.connections say when
// the connection limits of the roles the admin provisioned add up to more
// than max_connections leaves; Ready is not affected.
func TestConnectionBudgetOvercommitted(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	cpc := newCPC(env.Postgres.Host, adminSecret(t, testenv.ProviderNamespace, env.Postgres.AdminUser, env.Postgres.AdminPassword))
	create(t, cpc)
	budgetIs := func(reason string) func(config.Object) bool {
		return func(o config.Object) bool {
			c := o.GetCondition(tenancy.ConditionConnectionBudget)
			return readyIs(corev1.ConditionTrue, "Ready")(o) && o.ConfigStatus().Connections != nil && (string(c.Reason) == reason) == (reason != "")
		}
	}
	waitFor(t, cpc, "Ready with a connection budget", func(o config.Object) bool {
		return readyIs(corev1.ConditionTrue, "Ready")(o) && o.ConfigStatus().Connections != nil
	})
	sc, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx) //nolint:errcheck // test
	var maxConn int
	if err := sc.QueryRow(ctx, `SELECT current_setting('max_connections')::int`).Scan(&maxConn); err != nil {
		t.Fatal(err)
	}
	// A role the admin is a member of, with a limit as large as the server.
	for _, s := range []string{
		fmt.Sprintf(`CREATE ROLE budget_hog LOGIN CONNECTION LIMIT %d`, maxConn),
		fmt.Sprintf(`GRANT budget_hog TO %s`, pgx.Identifier{env.Postgres.AdminUser}.Sanitize()),
	} {
		if _, err := sc.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, cpc, "ConnectionBudget Overcommitted", budgetIs(tenancy.ReasonOvercommitted))
	c := cpc.GetCondition(tenancy.ConditionConnectionBudget)
	st := cpc.Status.Connections
	if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "more than the") || st.TenantLimits < int64(maxConn) || int(st.MaxConnections) != maxConn || st.Available >= st.MaxConnections {
		t.Errorf("overcommitted: condition %+v, connections %+v", c, st)
	}
	waitForEvent(t, cpc.GetName(), tenancy.ReasonOvercommitted, corev1.EventTypeWarning)
	if _, err := sc.Exec(ctx, `DROP ROLE budget_hog`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cpc, "ConnectionBudget no longer Overcommitted", func(o config.Object) bool {
		c := o.GetCondition(tenancy.ConditionConnectionBudget)
		return c.Reason != "" && string(c.Reason) != tenancy.ReasonOvercommitted
	})

	// With a per-namespace limit and a default connection limit, the
	// budget counts what one namespace may still add.
	testenv.Edit(t, env.Kube.Client, cpc, func(cpc *v1alpha1.ClusterProviderConfig) {
		cpc.Spec.Namespaces = &v1alpha1.NamespacePolicy{MaxTenants: ptr.To[int32](3)}
		cpc.Spec.TenantLimits = &v1alpha1.TenantLimits{ConnectionLimit: ptr.To[int32](2)}
	})
	waitFor(t, cpc, "the namespace allowance in the budget", func(o config.Object) bool {
		st := o.ConfigStatus().Connections
		return st != nil && st.NamespaceAllowance != nil && *st.NamespaceAllowance == 6
	})
	if c := cpc.GetCondition(tenancy.ConditionConnectionBudget); !strings.Contains(c.Message, "one namespace may still add up to 3 databases (spec.namespaces.maxTenants), 6 connections at the default limit of 2") {
		t.Errorf("the budget's message does not count what a namespace may add: %q", c.Message)
	}
}

// TestPublicConnectOnDefaultDatabasesIsAWarning: on a server as initdb
// leaves it, PUBLIC may connect to postgres and template1. The config is
// Ready with a WARNING naming both and the statements to run, the admin
// role's own GRANT first (its sessions are on postgres, where it may
// connect only through PUBLIC); once the admin holds CONNECT of its own the
// warning says so; after the REVOKEs it is gone and the admin still logs
// in. The config is Ready at every read throughout. Then, with the admin's
// own CONNECT revoked too, the warning says it may not connect, and the
// config is InsufficientPrivileges once the provider opens a new session.
func TestPublicConnectOnDefaultDatabasesIsAWarning(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	admin := pgx.Identifier{pg.AdminUser}.Sanitize()
	sc := pg.SuperConnT(t, "postgres")
	exec := func(stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := sc.Exec(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	t.Cleanup(func() {
		exec("GRANT CONNECT ON DATABASE postgres TO PUBLIC", "GRANT CONNECT ON DATABASE template1 TO PUBLIC", "REVOKE CONNECT ON DATABASE postgres FROM "+admin)
	})
	cpc := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword))
	create(t, cpc)
	warned := func(o config.Object) bool {
		return readyIs(corev1.ConditionTrue, "Ready")(o) && strings.Contains(o.GetCondition(xpv2.TypeReady).Message, "PUBLIC may connect")
	}
	waitFor(t, cpc, "Ready with the warning", warned)
	wantStatus(t, cpc, v1alpha1.ConfigPhaseReady, "Ready",
		"WARNING: PUBLIC may connect to postgres and template1 (PostgreSQL's default)",
		"run GRANT CONNECT ON DATABASE postgres TO <the admin role>; REVOKE CONNECT ON DATABASE postgres FROM PUBLIC; GRANT CONNECT ON DATABASE postgres TO <the roles that need it>; REVOKE CONNECT ON DATABASE template1 FROM PUBLIC",
		"sessions are on postgres, where it may connect only through PUBLIC")

	// From here on, every read of the config must find it Ready. The
	// key is taken before: the waits below read into cpc while the
	// goroutine reads.
	key := client.ObjectKeyFromObject(cpc)
	stop, done := make(chan struct{}), make(chan []string)
	go func() {
		var notReady []string
		reads := 0
		for {
			select {
			case <-stop:
				if reads < 10 {
					notReady = append(notReady, fmt.Sprintf("only %d reads", reads))
				}
				done <- notReady
				return
			case <-time.After(100 * time.Millisecond):
			}
			o := &v1alpha1.ClusterProviderConfig{}
			if err := env.Kube.Client.Get(ctx, key, o); err != nil {
				notReady = append(notReady, err.Error())
				continue
			}
			reads++
			if c := o.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
				notReady = append(notReady, fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message))
			}
		}
	}()

	exec("GRANT CONNECT ON DATABASE postgres TO " + admin)
	waitFor(t, cpc, "the admin's own CONNECT", func(o config.Object) bool {
		return warned(o) && strings.Contains(o.GetCondition(xpv2.TypeReady).Message, "where it holds CONNECT of its own")
	})
	if m := cpc.GetCondition(xpv2.TypeReady).Message; strings.Contains(m, "<the admin role>") {
		t.Errorf("the admin holds CONNECT of its own, and the warning still asks for it: %q", m)
	}
	exec("REVOKE CONNECT ON DATABASE postgres FROM PUBLIC", "REVOKE CONNECT ON DATABASE template1 FROM PUBLIC")
	waitFor(t, cpc, "Ready without the warning", func(o config.Object) bool {
		return readyIs(corev1.ConditionTrue, "Ready")(o) && !strings.Contains(o.GetCondition(xpv2.TypeReady).Message, "PUBLIC may connect")
	})
	// A new session of the admin's: its own CONNECT is kept.
	cfg, err := pg.ConnConfig(pg.AdminUser, pg.AdminPassword, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("the admin cannot log in to postgres after the statements the warning names: %v", err)
	}
	_ = c.Close(ctx)
	time.Sleep(2 * interval)
	close(stop)
	if notReady := <-done; len(notReady) > 0 {
		t.Errorf("the config was not Ready at every read: %v", notReady)
	}
	wantStatus(t, cpc, v1alpha1.ConfigPhaseReady, "Ready", "TLS, authentication and privileges verified")
	if m := cpc.GetCondition(xpv2.TypeReady).Message; strings.Contains(m, "WARNING") {
		t.Errorf("a warning is left: %q", m)
	}

	// Without its own CONNECT either, the admin's open sessions go on and
	// the warning says so; its next new session is refused.
	exec("REVOKE CONNECT ON DATABASE postgres FROM " + admin)
	waitFor(t, cpc, "the warning that the admin may not connect", func(o config.Object) bool {
		return readyIs(corev1.ConditionTrue, "Ready")(o) && strings.Contains(o.GetCondition(xpv2.TypeReady).Message, "WARNING: the admin role's sessions are on postgres, where neither it nor PUBLIC holds CONNECT")
	})
	wantStatus(t, cpc, v1alpha1.ConfigPhaseReady, "Ready", "run GRANT CONNECT ON DATABASE postgres TO <the admin role>")
	pools.Remove(memo.PoolRef(v1alpha1.ClusterProviderConfigKind, "", cpc.GetName()))
	waitFor(t, cpc, "InsufficientPrivileges", readyIs(corev1.ConditionFalse, "InsufficientPrivileges"))
	wantStatus(t, cpc, v1alpha1.ConfigPhaseValidating, "InsufficientPrivileges", `permission denied for database "postgres"`)
	exec("GRANT CONNECT ON DATABASE postgres TO " + admin)
	waitFor(t, cpc, "Ready again", readyIs(corev1.ConditionTrue, "Ready"))
}

// The canary runs last (Go runs tests in source order): every credential
// the tests used must be absent from logs, Events and every status.
func TestZZCanaryCredentialsNeverLeak(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	canaryUser, canaryPW := "canary_admin", testenv.RandomSecret("CANARY-")
	if err := pg.CreateRole(ctx, canaryUser, canaryPW, "CREATEDB CREATEROLE"); err != nil {
		t.Fatal(err)
	}
	good := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, canaryUser, canaryPW))
	bad := newCPC(pg.Host, adminSecret(t, testenv.ProviderNamespace, canaryUser, canaryPW+"-wrong"))
	create(t, good)
	create(t, bad)
	waitFor(t, good, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
	waitFor(t, bad, "AuthenticationFailed", readyIs(corev1.ConditionFalse, "AuthenticationFailed"))

	var dump bytes.Buffer
	for _, l := range []client.ObjectList{&v1alpha1.ClusterProviderConfigList{}, &v1alpha1.DatabaseList{}, &v1alpha1.ClusterProviderConfigUsageList{}, &v1alpha1.ProviderConfigUsageList{}, &corev1.EventList{}} {
		if err := env.Kube.Client.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(l)
		dump.Write(b)
	}
	for where, text := range map[string]string{"objects and Events": dump.String(), "logs": logs.String()} {
		for _, secret := range []string{canaryPW, pg.AdminPassword, pg.SuperPassword, canaryUser, pg.AdminUser, pg.SuperUser, "rot1-", "rot2-", "weak-"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain a credential (%.6s…)", where, secret)
			}
		}
	}
	if !strings.Contains(logs.String(), "Config status changed") {
		t.Error("the controller logged nothing: the canary check would prove nothing")
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(bad), bad); kerrors.IsNotFound(err) {
		t.Fatal("object vanished")
	}
}

// TestUnsafeTemplatesAreRefused: a server where a tenant could plant
// objects in a template database is not Ready (UnsafeTemplates, naming the
// statement to run), and becomes Ready once an admin ran it.
func TestUnsafeTemplatesAreRefused(t *testing.T) {
	testenv.Need(t)
	pg := env.Postgres
	ctx := context.Background()
	exec := func(database, stmt string) {
		t.Helper()
		c := pg.SuperConnT(t, database)
		defer c.Close(ctx) //nolint:errcheck // test
		if _, err := c.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	secret := adminSecret(t, testenv.ProviderNamespace, pg.AdminUser, pg.AdminPassword)
	for _, tc := range []struct{ name, database, unsafe, fix, says string }{
		{"template0", "postgres", "ALTER DATABASE template0 ALLOW_CONNECTIONS true", "ALTER DATABASE template0 ALLOW_CONNECTIONS false", "as a superuser, run ALTER DATABASE template0 ALLOW_CONNECTIONS false"},
		{"template1", "template1", "GRANT CREATE ON SCHEMA public TO PUBLIC", "REVOKE CREATE ON SCHEMA public FROM PUBLIC", "connected to template1, run REVOKE CREATE ON SCHEMA public FROM PUBLIC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec(tc.database, tc.unsafe)
			fixed := false
			t.Cleanup(func() {
				if !fixed {
					exec(tc.database, tc.fix)
				}
			})
			cpc := newCPC(pg.Host, secret)
			create(t, cpc)
			waitFor(t, cpc, "UnsafeTemplates", readyIs(corev1.ConditionFalse, "UnsafeTemplates"))
			wantStatus(t, cpc, v1alpha1.ConfigPhaseValidating, "UnsafeTemplates", tc.says)
			exec(tc.database, tc.fix)
			fixed = true
			waitFor(t, cpc, "Ready", readyIs(corev1.ConditionTrue, "Ready"))
		})
	}
}
