package database_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/jackc/pgx/v5"
	"github.com/openbao/openbao/api/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/options"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/inproc"
)

// The Database controller runs in process against a real kube-apiserver, a
// real PostgreSQL server with TLS and a real OpenBao; every test asserts the
// end state in PostgreSQL, OpenBao and the object.

var (
	env  *testenv.Env
	logs = &testenv.LogBuffer{}
	// faults: step name → remaining failures to inject.
	faults = map[string]int{}
	// sizeFault: a database whose size statements fail.
	sizeFault string
	fmu       sync.Mutex
)

const (
	poll = 500 * time.Millisecond
	// loginCheck is the periodic login check: long against the poll, short
	// enough for a test to wait for it.
	loginCheck = 20 * time.Second
	configName = "shared"
)

func hook(step string) error {
	pauseAt(step)
	fmu.Lock()
	defer fmu.Unlock()
	if sizeFault != "" && strings.HasPrefix(step, postgres.HookSizes+":") && slices.Contains(strings.Split(strings.TrimPrefix(step, postgres.HookSizes+":"), ","), sizeFault) {
		return fmt.Errorf("injected failure measuring %s", sizeFault)
	}
	if faults[step] > 0 {
		faults[step]--
		return fmt.Errorf("injected failure before step %s", step)
	}
	return nil
}

func inject(step string, n int) {
	fmu.Lock()
	defer fmu.Unlock()
	faults[step] = n
}

func TestMain(m *testing.M) {
	// With the Tenant kinds' CRDs: a binding keeps its Database Bound only
	// if its Tenant exists and lists it.
	o := testenv.All
	o.TenantCRDs = true
	testenv.Main(m, o, &env, start)
}

func start(e *testenv.Env) (func(), error) {
	ctx := context.Background()
	cl, clo, stopChangeLogs, err := startChangeLogs()
	if err != nil {
		return nil, err
	}
	changes = cl
	_, stopControllers, err := inproc.Start(e, inproc.Options{Writes: writes, ChangeLogs: clo, MinPollInterval: minPoll, PollObserver: polls.observe, Poll: poll, ConfigInterval: 5 * time.Second, ConfigRetry: time.Second, StepHook: hook, PoolHook: hook, Logs: logs,
		LoginCheckInterval: loginCheck, SizeInterval: 2 * time.Second, SizeRetryBase: 3 * time.Second, WrapKV: func(kv database.KV) database.KV { kvCounter.KV = kv; return kvCounter }})
	if err != nil {
		stopChangeLogs()
		return nil, err
	}
	stop := func() { stopControllers(); stopChangeLogs() }

	// The shared server, registered as the platform admin would.
	pg := e.Postgres
	c := e.Kube.Client
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.ProviderNamespace, Name: "admin"},
		StringData: map[string]string{"username": pg.AdminUser, "password": pg.AdminPassword},
	}); err != nil {
		stop()
		return nil, err
	}
	if err := c.Create(ctx, &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: configName},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: pg.Host, Hostaddr: pg.Hostaddr, Port: int32(pg.Port)}, //nolint:gosec // test port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
		},
	}); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// newDB is a provisioning Database named name whose database is name.
func newDB(name string, mut ...func(*v1alpha1.Database)) *v1alpha1.Database {
	d := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.DatabaseSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: configName}},
			ForProvider:                v1alpha1.DatabaseParameters{Database: name, Extensions: []string{"pg_trgm"}},
		},
	}
	for _, m := range mut {
		m(d)
	}
	return d
}

func apply(t *testing.T, d *v1alpha1.Database) {
	t.Helper()
	ctx := context.Background()
	if err := env.Kube.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	testenv.PauseWhenDone(t, env.Kube.Client, d.DeepCopy())
}

func waitDB(t *testing.T, d *v1alpha1.Database, what string, cond func(*v1alpha1.Database) bool) {
	t.Helper()
	testenv.Await(t, env.Kube.Client, d, 90*time.Second, what, cond, func(d *v1alpha1.Database) string {
		b, _ := json.MarshalIndent(d.Status, "", " ")
		return "status:\n" + string(b)
	})
}

func ready(d *v1alpha1.Database) bool {
	return d.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue
}

// syncMessage: the Synced condition reports a reconcile error saying msg
// (while deleting, Crossplane sets Ready to Deleting and reports why the
// deletion does not proceed on Synced).
func syncMessage(msg string) func(*v1alpha1.Database) bool {
	return func(d *v1alpha1.Database) bool {
		c := d.GetCondition(xpv2.TypeSynced)
		return c.Status == corev1.ConditionFalse && strings.Contains(c.Message, msg)
	}
}

func reason(r string) func(*v1alpha1.Database) bool {
	return func(d *v1alpha1.Database) bool { return string(d.GetCondition(xpv2.TypeReady).Reason) == r }
}

func superConn(t *testing.T, db string) *pgx.Conn { return env.Postgres.SuperConnT(t, db) }

// pgState is what the server holds for a tenant, read as the superuser.
type pgState struct {
	DBExists, RoleExists                                             bool
	Owner                                                            string
	Login, Super, CreateDB, CreateRole, Replication, PublicConnected bool
	Verifier                                                         string
	Extensions                                                       []string
}

func readPG(t *testing.T, db, role string) pgState {
	t.Helper()
	ctx := context.Background()
	c, err := env.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx) //nolint:errcheck // test
	var s pgState
	_ = c.QueryRow(ctx, `SELECT true, pg_get_userbyid(datdba),
		has_database_privilege('public', oid, 'CONNECT') FROM pg_database WHERE datname = $1`, db).Scan(&s.DBExists, &s.Owner, &s.PublicConnected)
	_ = c.QueryRow(ctx, `SELECT true, rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication, coalesce(rolpassword, '')
		FROM pg_authid WHERE rolname = $1`, role).Scan(&s.RoleExists, &s.Login, &s.Super, &s.CreateDB, &s.CreateRole, &s.Replication, &s.Verifier)
	if s.DBExists {
		dc, err := env.Postgres.SuperConn(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer dc.Close(ctx) //nolint:errcheck // test
		rows, err := dc.Query(ctx, "SELECT extname FROM pg_extension ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		s.Extensions, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	return s
}

// kvState reads a tenant record as OpenBao's root.
type kvState struct {
	Exists   bool
	Data     map[string]any
	Owner    map[string]any
	Versions int
}

func readKV(t *testing.T, path string) kvState {
	t.Helper()
	root, err := env.OpenBao.Client(env.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	kv := root.KVv2(env.OpenBao.KVMount)
	m, err := kv.GetMetadata(context.Background(), path)
	if err != nil {
		return kvState{}
	}
	s := kvState{Exists: true, Owner: m.CustomMetadata, Versions: len(m.Versions)}
	if sec, err := kv.Get(context.Background(), path); err == nil {
		s.Data = sec.Data
	}
	return s
}

// dbPath is a provisioning Database's own credential record.
func dbPath(name string) string { return options.DefaultDatabaseBasePath + "/" + name }

func appLogin(t *testing.T, user, password, db string) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := env.Postgres.ConnConfig(user, password, db)
	if err != nil {
		t.Fatal(err)
	}
	return pgx.ConnectConfig(context.Background(), cfg)
}

func TestProvisionToReady(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("shop")
	apply(t, d)
	waitDB(t, d, "Ready", ready)

	ap := d.Status.AtProvider
	path := dbPath("shop")
	if ap.Phase != v1alpha1.DatabasePhaseReady || ap.Owner != "shop" || ap.DatabaseOID == 0 || ap.Credential.Path != path ||
		ap.Credential.OpenBaoURL != env.OpenBao.Address+"/v1/kv/data/"+path || !strings.HasPrefix(ap.PostgreSQLVersion, env.Postgres.Version+".") {
		t.Errorf("status.atProvider = %+v", ap)
	}
	if b := d.Status.Binding; b.Phase != v1alpha1.BindingAvailable || b.Claim != "" {
		t.Errorf("status.binding = %+v, want Available without a claim", b)
	}

	s := readPG(t, "shop", "shop")
	if !s.DBExists || s.Owner != "shop" || s.PublicConnected {
		t.Errorf("database: %+v", s)
	}
	if !s.Login || s.Super || s.CreateDB || s.CreateRole || s.Replication || !strings.HasPrefix(s.Verifier, "SCRAM-SHA-256$") {
		t.Errorf("role attributes: %+v", s)
	}
	if !strings.Contains(strings.Join(s.Extensions, ","), "pg_trgm") {
		t.Errorf("extensions %v", s.Extensions)
	}

	k := readKV(t, path)
	if !k.Exists || k.Versions != 1 || len(k.Data) != 7 {
		t.Fatalf("KV record: exists %v, %d versions, %d keys", k.Exists, k.Versions, len(k.Data))
	}
	for key, want := range map[string]string{"username": "shop", "database": "shop", "host": env.Postgres.Host, "hostaddr": env.Postgres.Hostaddr, "port": fmt.Sprint(env.Postgres.Port), "sslmode": "verify-full"} {
		if k.Data[key] != want {
			t.Errorf("KV %s = %v, want %s", key, k.Data[key], want)
		}
	}
	if _, ok := k.Owner["database-namespace"]; ok {
		t.Error("the ownership metadata names a namespace: Databases are cluster-scoped")
	}
	for key, want := range map[string]string{"managed-by": "provider-postgresql-tenant", "database-name": "shop", "database-uid": string(d.GetUID()), "config-name": configName, "database-oid": fmt.Sprint(ap.DatabaseOID)} {
		if k.Owner[key] != want {
			t.Errorf("KV custom_metadata %s = %v, want %s", key, k.Owner[key], want)
		}
	}

	// The app credential works for its own database and nothing more.
	pw := k.Data["password"].(string)
	app, err := appLogin(t, "shop", pw, "shop")
	if err != nil {
		t.Fatalf("app login: %v", err)
	}
	defer app.Close(ctx) //nolint:errcheck // test
	if _, err := app.Exec(ctx, "CREATE TABLE orders (id int)"); err != nil {
		t.Errorf("app cannot create a table: %v", err)
	}
	for _, stmt := range []string{"CREATE DATABASE evil", "CREATE ROLE evil"} {
		if _, err := app.Exec(ctx, stmt); err == nil {
			t.Errorf("app could %s", stmt)
		}
	}
	other := newDB("blog")
	apply(t, other)
	waitDB(t, other, "Ready", ready)
	if c, err := appLogin(t, "shop", pw, "blog"); err == nil {
		_ = c.Close(ctx)
		t.Error("the app connected to another tenant's database")
	}

	// 20 further reconciles change no password and create nothing.
	verifier := s.Verifier
	upToDate := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "External resource is up to date") && strings.Contains(l, string(d.GetUID())) {
				n++
			}
		}
		return n
	}
	observed := func() int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "Database observed") && strings.Contains(l, `"shop"`) {
				n++
			}
		}
		return n
	}
	n0, o0 := upToDate(), observed()
	deadline := time.Now().Add(3 * time.Minute)
	for upToDate() < n0+20 && time.Now().Before(deadline) {
		time.Sleep(poll)
	}
	if got := upToDate() - n0; got < 20 {
		t.Fatalf("only %d further reconciles happened", got)
	}
	// Nothing changed, so nothing is logged as a change.
	if o0 == 0 || observed() != o0 {
		t.Errorf("\"Database observed\" logged %d times before and %d after 20 unchanged reconciles: it must log changes only", o0, observed())
	}
	if s2 := readPG(t, "shop", "shop"); s2.Verifier != verifier {
		t.Error("the role's password changed on a later reconcile")
	}
	if k2 := readKV(t, path); k2.Versions != 1 || k2.Data["password"] != pw {
		t.Errorf("KV after later reconciles: %d versions, password changed %v", k2.Versions, k2.Data["password"] != pw)
	}
}

func TestFaultAfterEachStepConvergesToOnePassword(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	for i, step := range []string{database.StepOwnerMetadata, database.StepCredential, database.StepRole, database.StepDatabase, database.StepRecordOID, database.StepConnect, database.StepExtensions, database.StepCreated} {
		t.Run(step, func(t *testing.T) {
			name := fmt.Sprintf("fault%d", i)
			inject(step, 1)
			d := newDB(name)
			apply(t, d)
			waitDB(t, d, "Ready", ready)
			fmu.Lock()
			left := faults[step]
			fmu.Unlock()
			if left != 0 {
				t.Errorf("the fault before %s was never hit", step)
			}
			k := readKV(t, dbPath(name))
			if k.Versions != 1 {
				t.Errorf("%d KV versions, want exactly one", k.Versions)
			}
			app, err := appLogin(t, name, k.Data["password"].(string), name)
			if err != nil {
				t.Fatalf("the one password does not log in: %v", err)
			}
			_ = app.Close(context.Background())
			// The extension asked for is installed, and the status shows
			// what the role's session read back.
			if s := readPG(t, name, name); !slices.Contains(s.Extensions, "pg_trgm") {
				t.Errorf("extensions in the database after the fault before %s: %v, want pg_trgm", step, s.Extensions)
			}
			if !slices.Contains(d.Status.AtProvider.Extensions, "pg_trgm") {
				t.Errorf("status extensions after the fault before %s: %v, want pg_trgm", step, d.Status.AtProvider.Extensions)
			}
		})
	}
}

// TestDroppedExtensionIsReinstalledAndReadBack: an extension dropped behind
// the provider's back (here as a superuser) is seen at the next login
// check (--login-check-interval; every poll once the catalog changed),
// installed again by the role's own session, and what the status shows is
// what that session read back from pg_extension.
func TestDroppedExtensionIsReinstalledAndReadBack(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("extback")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	if !slices.Contains(d.Status.AtProvider.Extensions, "pg_trgm") {
		t.Fatalf("status extensions %v, want pg_trgm", d.Status.AtProvider.Extensions)
	}
	var oid uint32
	if err := superConn(t, "extback").QueryRow(ctx, "SELECT oid FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	if _, err := superConn(t, "extback").Exec(ctx, "DROP EXTENSION pg_trgm"); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "the extension installed again", func(d *v1alpha1.Database) bool {
		return ready(d) && slices.Contains(readPG(t, "extback", "extback").Extensions, "pg_trgm")
	})
	var again uint32
	if err := superConn(t, "extback").QueryRow(ctx, "SELECT oid FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&again); err != nil {
		t.Fatal(err)
	}
	if again == oid {
		t.Fatalf("pg_trgm has its old OID %d: it was never dropped, so this test proves nothing", oid)
	}
	// The installing session was the role's own: the extension belongs to
	// it, not to the admin.
	var owner string
	if err := superConn(t, "extback").QueryRow(ctx, "SELECT pg_get_userbyid(extowner) FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&owner); err != nil || owner != "extback" {
		t.Errorf("pg_trgm's owner %q (%v), want the role extback", owner, err)
	}
	waitDB(t, d, "the status shows it", func(d *v1alpha1.Database) bool {
		return slices.Contains(d.Status.AtProvider.Extensions, "pg_trgm")
	})
}

func TestConflictsLeaveForeignObjectsUntouched(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	su := superConn(t, "postgres")
	// A database and a role that this provider did not create, and a KV
	// record written by someone else.
	if _, err := su.Exec(ctx, "CREATE ROLE legacy LOGIN PASSWORD NULL"); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE legacy OWNER legacy"); err != nil {
		t.Fatal(err)
	}
	if err := env.Postgres.CreateRole(ctx, "lonely", testenv.RandomSecret("l-"), ""); err != nil {
		t.Fatal(err)
	}
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	if _, err := root.KVv2("kv").Put(ctx, dbPath("taken"), map[string]any{"password": "theirs"}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		d    *v1alpha1.Database
		msg  string
		role string
	}{
		"Database": {d: newDB("legacy", func(d *v1alpha1.Database) { d.Spec.ForProvider.LoginRole = ptr.To("legacy_new") }), msg: `the database "legacy" exists, owned by "legacy"`, role: "legacy_new"},
		"Role":     {d: newDB("lonely"), msg: `the role "lonely" exists`, role: "lonely"},
		"KVRecord": {d: newDB("taken"), msg: "the KV record postgresql-databases/taken exists", role: "taken"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := readPG(t, "legacy", "legacy")
			lonely := readPG(t, "lonely", "lonely")
			apply(t, tc.d)
			waitDB(t, tc.d, "Conflict", reason("Conflict"))
			c := tc.d.GetCondition(xpv2.TypeReady)
			if !strings.Contains(c.Message, tc.msg) || !strings.Contains(c.Message, "import") {
				t.Errorf("message %q lacks %q or how to import", c.Message, tc.msg)
			}
			awaitPolls(t, []*v1alpha1.Database{tc.d}, 4)
			if after := readPG(t, "legacy", "legacy"); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("legacy changed: %+v → %+v", before, after)
			}
			if after := readPG(t, "lonely", "lonely"); after.Verifier != lonely.Verifier || after.DBExists {
				t.Errorf("lonely changed: %+v", after)
			}
			if k := readKV(t, dbPath("taken")); k.Versions != 1 || k.Data["password"] != "theirs" || len(k.Owner) != 0 {
				t.Errorf("foreign KV record changed: %+v", k)
			}
			if name != "KVRecord" {
				// Nothing was written for the conflicting Database either.
				if k := readKV(t, dbPath(tc.d.Name)); k.Exists {
					t.Error("a KV record was written despite the conflict")
				}
				if s := readPG(t, "nope", tc.role); s.RoleExists && name == "Database" {
					t.Error("a role was created despite the conflict")
				}
			}
		})
	}
}

// An interrupted create whose next step cannot be proven after the
// restart: the provider stopped (here: failed) before creating the role,
// and a role of that name was made by hand meanwhile. The Database is a
// Conflict that names what is proven its own (the credential record it
// wrote) and what is not (the role), and the hand-made role is left as it
// was: no password, no LOGIN, no database.
func TestUncertainCreateNamesWhatIsProven(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	const name = "uncertain"
	p := pauseNext(database.StepRole)
	inject(database.StepRole, 1)
	d := newDB(name)
	apply(t, d)
	select {
	case <-p.reached:
	case <-time.After(90 * time.Second):
		t.Fatal("the create never reached the role step")
	}
	su := superConn(t, "postgres")
	if _, err := su.Exec(ctx, "CREATE ROLE "+name+" NOLOGIN"); err != nil {
		close(p.release)
		t.Fatal(err)
	}
	close(p.release)
	waitDB(t, d, "Conflict", reason("Conflict"))
	msg := d.GetCondition(xpv2.TypeReady).Message
	for _, want := range []string{
		`Not proven this Database's: the role "uncertain" exists`,
		"Proven this Database's: its credential record " + dbPath(name),
		"Nothing of it was changed",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Conflict message %q lacks %q", msg, want)
		}
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 4)
	var canLogin, noPassword bool
	if err := su.QueryRow(ctx, "SELECT rolcanlogin, rolpassword IS NULL FROM pg_authid WHERE rolname = $1", name).Scan(&canLogin, &noPassword); err != nil {
		t.Fatal(err)
	}
	if canLogin || !noPassword {
		t.Errorf("the hand-made role was changed: LOGIN %v, a password %v", canLogin, !noPassword)
	}
	if s := readPG(t, name, name); s.DBExists {
		t.Error("a database was created beside an unproven role")
	}
	// Deleted, it drops nothing it cannot prove its own.
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WaitFor(ctx, 90*time.Second, func(ctx context.Context) error {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), &v1alpha1.Database{}); !kerrors.IsNotFound(err) {
			return fmt.Errorf("the Database is still there (%w)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s := readPG(t, "postgres", name); !s.RoleExists {
		t.Error("deleting the Database dropped the hand-made role")
	}
	if _, err := su.Exec(ctx, "DROP ROLE "+name); err != nil {
		t.Fatal(err)
	}
}

func TestTwoDatabasesSameDatabaseNameFirstWins(t *testing.T) {
	testenv.Need(t)
	first := newDB("app-a", func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "contested" })
	apply(t, first)
	waitDB(t, first, "Ready", ready)
	second := newDB("app-b", func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "contested" })
	apply(t, second)
	waitDB(t, second, "Conflict", reason("Conflict"))
	if err := env.Kube.Client.Get(context.Background(), client.ObjectKeyFromObject(first), first); err != nil || !ready(first) {
		t.Errorf("the first Database lost Ready: %v", first.GetCondition(xpv2.TypeReady))
	}
}

func TestUnavailableExtensionRejectedBeforeAnyWrite(t *testing.T) {
	testenv.Need(t)
	d := newDB("ext", func(d *v1alpha1.Database) { d.Spec.ForProvider.Extensions = []string{"pg_trgm", "no_such_extension"} })
	apply(t, d)
	waitDB(t, d, "InvalidSpec", reason("InvalidSpec"))
	if c := d.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, "no_such_extension") || !strings.Contains(c.Message, "not available") {
		t.Errorf("message %q", c.Message)
	}
	if k := readKV(t, dbPath("ext")); k.Exists {
		t.Error("a KV record was written for an unavailable extension")
	}
	if s := readPG(t, "ext", "ext"); s.RoleExists || s.DBExists {
		t.Error("a role or database was created for an unavailable extension")
	}
}

// TestUntrustedExtensionRejectedBeforeAnyWrite: an extension the database
// owner cannot create (it needs a superuser and is not trusted) is refused
// before any write, and so is one whose required extension is not listed.
func TestUntrustedExtensionRejectedBeforeAnyWrite(t *testing.T) {
	testenv.Need(t)
	d := newDB("untrusted", func(d *v1alpha1.Database) {
		d.Spec.ForProvider.Extensions = []string{"pg_trgm", "dblink", "earthdistance"}
	})
	apply(t, d)
	waitDB(t, d, "InvalidSpec", reason("InvalidSpec"))
	c := d.GetCondition(xpv2.TypeReady)
	for _, want := range []string{"[dblink earthdistance] are not trusted", "earthdistance needs cube", "nothing was created"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 2)
	if k := readKV(t, dbPath("untrusted")); k.Exists {
		t.Error("a KV record was written for an untrusted extension")
	}
	if s := readPG(t, "untrusted", "untrusted"); s.RoleExists || s.DBExists {
		t.Error("a role or database was created for an untrusted extension")
	}
}

func TestAvailabilityQueryFailureIsDependencyUnavailable(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	inject(database.StepCheckExtensions, 1000)
	d := newDB("extq")
	apply(t, d)
	waitDB(t, d, "DependencyUnavailable", reason("DependencyUnavailable"))
	if c := d.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, "cannot check pg_available_extensions") {
		t.Errorf("message %q", c.Message)
	}
	if k := readKV(t, dbPath("extq")); k.Exists {
		t.Error("a KV record was written although availability was unknown")
	}
	inject(database.StepCheckExtensions, 0)
	waitDB(t, d, "Ready once the query works", ready)
}

// TestDriftIsRepairedFromTheRecord: drift in the catalog and in the
// record's fields is repaired; the record's password is the truth, so a
// record written with another password (by an OpenBao admin) gives the
// role that password, and a deleted current version is restored from the
// newest earlier one that logs in, without a new password.
func TestDriftIsRepairedFromTheRecord(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("drift")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	path := dbPath("drift")
	k := readKV(t, path)
	pw := k.Data["password"].(string)
	before := readPG(t, "drift", "drift")

	su := superConn(t, "postgres")
	// The database goes to another role the admin administers (a non-
	// superuser admin can only take a database back from a role it is a
	// member of; from a superuser it reports the failure instead).
	for _, stmt := range []string{
		"ALTER ROLE drift CREATEDB",
		"GRANT CONNECT ON DATABASE drift TO PUBLIC",
		"CREATE ROLE intruder NOLOGIN",
		"GRANT intruder TO " + env.Postgres.AdminUser,
		"ALTER DATABASE drift OWNER TO intruder",
	} {
		if _, err := su.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	kv := root.KVv2("kv")
	// An altered record: a wrong port and a password the role does not
	// have.
	altered := map[string]any{}
	for key, v := range k.Data {
		altered[key] = v
	}
	altered["port"], altered["password"] = "1", "not-the-password"
	if _, err := kv.Put(ctx, path, altered); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Ready after repair", func(d *v1alpha1.Database) bool {
		s := readPG(t, "drift", "drift")
		k := readKV(t, path)
		return ready(d) && !s.CreateDB && !s.PublicConnected && s.Owner == "drift" && k.Data["password"] == "not-the-password" && k.Data["port"] == fmt.Sprint(env.Postgres.Port)
	})
	if after := readPG(t, "drift", "drift"); after.Verifier == before.Verifier {
		t.Error("the role kept its password although the record holds another")
	}
	if c, err := appLogin(t, "drift", "not-the-password", "drift"); err != nil {
		t.Errorf("the record's password does not log in after the repair: %v", err)
	} else {
		_ = c.Close(ctx)
	}
	if c, err := appLogin(t, "drift", pw, "drift"); err == nil {
		_ = c.Close(ctx)
		t.Error("the role's earlier password still logs in")
	}
	pw = "not-the-password"
	before = readPG(t, "drift", "drift")

	// The current version deleted: restored from the newest working one.
	if err := kv.Delete(ctx, path); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Ready after the record was restored", func(d *v1alpha1.Database) bool {
		k := readKV(t, path)
		return ready(d) && k.Data["password"] == pw
	})
	if after := readPG(t, "drift", "drift"); after.Verifier != before.Verifier {
		t.Error("the role's password changed when the record was restored")
	}
}

func TestExtensionRemovalIsRefusedAndNothingDropped(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("extrm")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	d.Spec.ForProvider.Extensions = nil
	err := updateSpec(ctx, d)
	if err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("removing an extension: %v, want a refusal", err)
	}
	if s := readPG(t, "extrm", "extrm"); !strings.Contains(strings.Join(s.Extensions, ","), "pg_trgm") {
		t.Errorf("extensions after the refused removal: %v", s.Extensions)
	}
}

func TestStatusWipedIsRebuilt(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	d := newDB("wipe")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	k := readKV(t, dbPath("wipe"))
	// Wipe and forge: a status claiming Ready with nonsense must not skip
	// any verification.
	testenv.EditStatus(t, env.Kube.Client, d, func(d *v1alpha1.Database) {
		d.Status = v1alpha1.DatabaseStatus{}
		d.Status.AtProvider.Phase = v1alpha1.DatabasePhaseReady
		d.Status.AtProvider.Owner = "forged"
	})
	waitDB(t, d, "rebuilt", func(d *v1alpha1.Database) bool {
		return ready(d) && d.Status.AtProvider.Owner == "wipe" && d.Status.AtProvider.DatabaseOID != 0
	})
	if k2 := readKV(t, dbPath("wipe")); k2.Versions != 1 || k2.Data["password"] != k.Data["password"] {
		t.Error("the password changed after the status was wiped")
	}
}

func TestRetainKeepsEverythingAndSameNameConflicts(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("keep")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d)
	s := readPG(t, "keep", "keep")
	k := readKV(t, dbPath("keep"))
	if !s.DBExists || !s.RoleExists || !k.Exists || k.Owner["database-name"] != "keep" {
		t.Fatalf("after a Retain delete: pg %+v, kv exists %v owner %v", s, k.Exists, k.Owner)
	}
	again := newDB("keep")
	apply(t, again)
	waitDB(t, again, "Conflict", reason("Conflict"))
	if c := again.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, "import") {
		t.Errorf("message does not say how to import: %q", c.Message)
	}
	if k2 := readKV(t, dbPath("keep")); k2.Versions != 1 || k2.Owner["database-uid"] != string(d.GetUID()) {
		t.Error("the retained record was re-adopted or rewritten")
	}
}

// adminOptionNeeded: the server is PostgreSQL 16 or later, where a
// CREATEROLE admin needs ADMIN OPTION on roles it did not create.
func adminOptionNeeded() bool {
	m, _ := strconv.Atoi(env.Postgres.Version)
	return m >= 16
}

// grantAdminOption runs, as the superuser, what the docs tell an admin to
// run for a role the provider's admin did not create.
func grantAdminOption(t *testing.T, role string) {
	t.Helper()
	if _, err := superConn(t, "postgres").Exec(context.Background(), "GRANT "+pgx.Identifier{role}.Sanitize()+" TO "+pgx.Identifier{env.Postgres.AdminUser}.Sanitize()+" WITH ADMIN OPTION"); err != nil {
		t.Fatal(err)
	}
}

func waitGone(t *testing.T, d *v1alpha1.Database) {
	t.Helper()
	if testenv.WaitFor(context.Background(), 90*time.Second, func(ctx context.Context) error {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), &v1alpha1.Database{}); !kerrors.IsNotFound(err) {
			return testenv.ErrNotYet
		}
		return nil
	}) == nil {
		return
	}
	cur := &v1alpha1.Database{}
	_ = env.Kube.Client.Get(context.Background(), client.ObjectKeyFromObject(d), cur)
	b, _ := json.Marshal(cur.Status.Conditions)
	t.Fatalf("%s was not deleted; finalizers %v; conditions %s", d.Name, cur.GetFinalizers(), b)
}

func TestDeleteWithLiveSessionAndFailures(t *testing.T) {
	testenv.Need(t)
	// One Database per step, so each waits for one retry only.
	for i, step := range []string{"", database.StepRecordOID, database.StepBlockLogins, database.StepTerminate, database.StepDropDatabase, database.StepDropRole, database.StepDeleteKV} {
		name := fmt.Sprintf("gone%d", i)
		t.Run(name+"-"+step, func(t *testing.T) {
			ctx := context.Background()
			d := newDB(name, func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete })
			apply(t, d)
			waitDB(t, d, "Ready", ready)
			k := readKV(t, dbPath(name))
			app, err := appLogin(t, name, k.Data["password"].(string), name)
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close(ctx) //nolint:errcheck // the server ends it
			if step == database.StepRecordOID {
				// A Database whose role OID was never recorded (created by
				// an older build or interrupted) still deletes its role.
				root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
				m := map[string]any{}
				for k, v := range k.Owner {
					if k != "role-oid" {
						m[k] = v
					}
				}
				if err := root.KVv2("kv").PutMetadata(ctx, dbPath(name), api.KVMetadataPutInput{CustomMetadata: m}); err != nil {
					t.Fatal(err)
				}
			}
			if step != "" {
				inject(step, 1)
			}
			if err := env.Kube.Client.Delete(ctx, d); err != nil {
				t.Fatal(err)
			}
			waitGone(t, d)
			if s := readPG(t, name, name); s.DBExists || s.RoleExists {
				t.Errorf("after Delete: %+v", s)
			}
			if k := readKV(t, dbPath(name)); k.Exists {
				t.Error("the KV record (or a version of it) survived Delete")
			}
			fmu.Lock()
			defer fmu.Unlock()
			if step != "" && faults[step] != 0 {
				t.Errorf("the fault before %s was never hit", step)
			}
		})
	}
}

func TestConcurrentSameNameExactlyOneWins(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	var ds []*v1alpha1.Database
	for _, n := range []string{"race-a", "race-b", "race-c"} {
		ds = append(ds, newDB(n, func(d *v1alpha1.Database) { d.Spec.ForProvider.Database = "raced" }))
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := env.Kube.Client.Create(ctx, d); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	winners, losers := 0, 0
	for _, d := range ds {
		waitDB(t, d, "Ready or Conflict", func(d *v1alpha1.Database) bool { return ready(d) || reason("Conflict")(d) })
		if ready(d) {
			winners++
		} else {
			losers++
		}
	}
	awaitPolls(t, ds, 6)
	winners = 0
	for _, d := range ds {
		if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
		if ready(d) {
			winners++
			k := readKV(t, dbPath(d.Name))
			if c, err := appLogin(t, "raced", k.Data["password"].(string), "raced"); err != nil {
				t.Errorf("the winner's credential does not log in: %v", err)
			} else {
				_ = c.Close(ctx)
			}
		}
	}
	if winners != 1 {
		t.Errorf("%d Databases are Ready for one database name, want exactly 1", winners)
	}
}

func TestImportIsReadOnly(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	su := superConn(t, "postgres")
	pw := testenv.RandomSecret("imp-")
	if err := env.Postgres.CreateRole(ctx, "handmade", pw, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE handmade OWNER handmade"); err != nil {
		t.Fatal(err)
	}
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	if _, err := root.KVv2("kv").Put(ctx, "postgresql-databases/imports/handmade", map[string]any{"username": "handmade", "password": pw}); err != nil {
		t.Fatal(err)
	}
	before := readPG(t, "handmade", "handmade")
	d := newDB("handmade", func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
		d.Spec.ForProvider.CredentialPath = ptr.To("postgresql-databases/imports/handmade")
	})
	apply(t, d)
	waitDB(t, d, "differences reported", reason("ImportDifferences"))
	c := d.GetCondition(xpv2.TypeReady)
	if !strings.Contains(c.Message, "PUBLIC may connect") || !strings.Contains(c.Message, "pg_trgm") {
		t.Errorf("differences: %q", c.Message)
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 4)
	if after := readPG(t, "handmade", "handmade"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the import changed the database: %+v → %+v", before, after)
	}
	if k := readKV(t, "postgresql-databases/imports/handmade"); k.Versions != 1 || len(k.Owner) != 0 {
		t.Error("the import changed the credential record")
	}

	// Switching the import to Update repairs the differences, never the
	// password, and leaves the record alone.
	d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionUpdate}
	if err := updateSpec(ctx, d); err != nil {
		t.Fatal(err)
	}
	if adminOptionNeeded() {
		// From PostgreSQL 16 on, a role the admin did not create needs
		// ADMIN OPTION to be repaired: reported, nothing changed, until
		// the documented grant is made.
		waitDB(t, d, "InsufficientPrivileges", reason("InsufficientPrivileges"))
		if c := d.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, `GRANT "handmade" TO <the admin role> WITH ADMIN OPTION`) {
			t.Errorf("message %q", c.Message)
		}
		awaitPolls(t, []*v1alpha1.Database{d}, 2)
		if after := readPG(t, "handmade", "handmade"); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("an import the admin may not administer was changed: %+v → %+v", before, after)
		}
		grantAdminOption(t, "handmade")
	}
	waitDB(t, d, "Ready after the allowed repairs", ready)
	after := readPG(t, "handmade", "handmade")
	if after.PublicConnected || !strings.Contains(strings.Join(after.Extensions, ","), "pg_trgm") || after.Verifier != before.Verifier || after.Owner != "handmade" {
		t.Errorf("after Update on the import: %+v", after)
	}
	if k := readKV(t, "postgresql-databases/imports/handmade"); k.Versions != 1 || len(k.Owner) != 0 {
		t.Error("the import's Update changed the credential record")
	}
}

func TestImportWithDeleteDropsOnlyWhatItsCredentialProves(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	su := superConn(t, "postgres")
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	for _, name := range []string{"oldapp", "otherapp"} {
		pw := testenv.RandomSecret("old-")
		if err := env.Postgres.CreateRole(ctx, name, pw, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := su.Exec(ctx, "CREATE DATABASE "+name+" OWNER "+name); err != nil {
			t.Fatal(err)
		}
		if name == "otherapp" {
			pw = "a-wrong-password" // the record does not prove this one
		}
		if _, err := root.KVv2("kv").Put(ctx, "postgresql-databases/imports/"+name, map[string]any{"username": name, "password": pw}); err != nil {
			t.Fatal(err)
		}
	}
	var ds []*v1alpha1.Database
	for _, name := range []string{"oldapp", "otherapp"} {
		d := newDB(name, func(d *v1alpha1.Database) {
			d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionDelete}
			d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
			d.Spec.ForProvider.CredentialPath = ptr.To("postgresql-databases/imports/" + d.Name)
			d.Spec.ForProvider.Extensions = nil
		})
		apply(t, d)
		ds = append(ds, d)
	}
	waitDB(t, ds[0], "Ready (proven import)", func(d *v1alpha1.Database) bool { return ready(d) || reason("ImportDifferences")(d) })
	waitDB(t, ds[1], "differences (unproven import)", reason("ImportDifferences"))
	app, err := appLogin(t, "oldapp", readKV(t, "postgresql-databases/imports/oldapp").Data["password"].(string), "oldapp")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // the server ends it
	for _, d := range ds {
		if err := env.Kube.Client.Delete(ctx, d); err != nil {
			t.Fatal(err)
		}
		if d.Name == "oldapp" && adminOptionNeeded() {
			// Nothing is dropped while the role could not be dropped too.
			waitDB(t, d, "the missing ADMIN OPTION reported while deleting", syncMessage("ADMIN OPTION"))
			time.Sleep(2 * poll)
			if s := readPG(t, "oldapp", "oldapp"); !s.DBExists || !s.RoleExists {
				t.Fatalf("part of the import was dropped although its role cannot be: %+v", s)
			}
			grantAdminOption(t, "oldapp")
		}
		waitGone(t, d)
	}
	if s := readPG(t, "oldapp", "oldapp"); s.DBExists || s.RoleExists {
		t.Errorf("the proven import survived its explicit Delete: %+v", s)
	}
	if k := readKV(t, "postgresql-databases/imports/oldapp"); k.Exists {
		t.Error("the proven import's record survived its explicit Delete")
	}
	if s := readPG(t, "otherapp", "otherapp"); !s.DBExists || !s.RoleExists {
		t.Errorf("an import its credential does not prove was dropped: %+v", s)
	}
	if k := readKV(t, "postgresql-databases/imports/otherapp"); !k.Exists {
		t.Error("the unproven import's record was deleted")
	}
}

// binding creates the Tenant ns/tenant and its DatabaseBinding that names
// the Database d (static), as the Tenant's Composition would: controlled
// by the Tenant, listed in its resource references. The Tenant's UID is
// the binding's spec.forProvider.tenant.uid.
func binding(t *testing.T, ns, tenant, d string) *v1alpha1.DatabaseBinding {
	t.Helper()
	ctx := context.Background()
	if err := env.Kube.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	name := testenv.UniqueName("db-" + tenant)
	uid, err := testenv.CreateTenant(ctx, env.Kube.Client, ns, tenant, name)
	if err != nil {
		t.Fatal(err)
	}
	b := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "database.ayatori.ddupan.top/v1alpha1", Kind: "Tenant", Name: tenant, UID: types.UID(uid), Controller: ptr.To(true),
	}}}}
	b.Spec.ForProvider.Tenant = v1alpha1.TenantReference{Name: tenant, UID: uid}
	b.Spec.ForProvider.DatabaseRef = ptr.To(d)
	if err := env.Kube.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// tenantObject is the Tenant ns/name to delete.
func tenantObject(ns, name string) client.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("database.ayatori.ddupan.top/v1alpha1")
	u.SetKind("Tenant")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func phase(p v1alpha1.BindingPhase) func(*v1alpha1.Database) bool {
	return func(d *v1alpha1.Database) bool { return d.Status.Binding.Phase == p }
}

// TestBindingPhaseFollowsBindings: status.binding shows Available, Bound
// and Released from spec.claimRef and the live DatabaseBindings, promptly
// (the Database watches DatabaseBindings); a Released Database stays Ready;
// clearing the claim makes it Available and keeps the released claim.
func TestBindingPhaseFollowsBindings(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	claim := &v1alpha1.ClaimReference{Namespace: "claims-a", Name: "shop"}
	d := newDB("bindphase", func(d *v1alpha1.Database) {
		d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "claims-a", Name: "shop"}
	})
	apply(t, d)
	waitDB(t, d, "Ready and reserved", func(d *v1alpha1.Database) bool {
		return ready(d) && d.Status.Binding.Phase == v1alpha1.BindingAvailable && d.Status.Binding.Claim == "claims-a/shop"
	})

	// The binder writes the claim's UID; the Tenant's binding exists.
	b := binding(t, "claims-a", "shop", d.Name)
	claim.UID = b.Spec.ForProvider.Tenant.UID
	d.Spec.ClaimRef = claim
	if err := updateSpec(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Bound", phase(v1alpha1.BindingBound))

	// A new Tenant of the same name (another UID) does not keep it bound.
	other := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "claims-a", Name: "db-shop-other"}}
	other.Spec.ForProvider.Tenant = v1alpha1.TenantReference{Name: "shop", UID: "uid-bind-2"}
	other.Spec.ForProvider.DatabaseRef = ptr.To(d.Name)
	if err := env.Kube.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := env.Kube.Client.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Released", phase(v1alpha1.BindingReleased))
	if took := time.Since(start); took > 10*poll+5*time.Second {
		t.Errorf("Released shown after %v: the binding's deletion did not start a reconcile", took)
	}
	if !ready(d) || d.Status.Binding.Claim != "claims-a/shop" || d.Status.Binding.ReleasedClaim == nil || d.Status.Binding.ReleasedClaim.UID != claim.UID {
		t.Errorf("a Released Database: ready %v, binding %+v", ready(d), d.Status.Binding)
	}
	_ = env.Kube.Client.Delete(ctx, other)

	// A binding of the released claim's Tenant UID that is not that
	// Tenant's (controlled by an object of an apiVersion nobody serves,
	// the Tenant gone) does not make the Database Bound again.
	if err := env.Kube.Client.Delete(ctx, tenantObject("claims-a", "shop")); err != nil {
		t.Fatal(err)
	}
	forged := &v1alpha1.DatabaseBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "claims-a", Name: "shop", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "forged.example.org/v1", Kind: "Tenant", Name: "shop", UID: types.UID(claim.UID), Controller: ptr.To(true),
	}}}}
	forged.Spec.ForProvider.Tenant = v1alpha1.TenantReference{Name: "shop", UID: claim.UID}
	forged.Spec.ForProvider.DatabaseRef = ptr.To(d.Name)
	if err := env.Kube.Client.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 10)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if d.Status.Binding.Phase != v1alpha1.BindingReleased {
		t.Errorf("a forged binding of the released claim made the Database %q, want Released", d.Status.Binding.Phase)
	}
	_ = env.Kube.Client.Delete(ctx, forged)

	// The Bound and Released Events are in namespace default, which is
	// not the claim's: they name no claim.
	evs := &corev1.EventList{}
	if err := env.Kube.Client.List(ctx, evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Name != d.Name || (e.Reason != "Bound" && e.Reason != "Released") {
			continue
		}
		seen[e.Reason] = true
		if strings.Contains(e.Message, "claims-a") || strings.Contains(e.Message, claim.UID) {
			t.Errorf("the %s Event names the claim: %q", e.Reason, e.Message)
		}
	}
	if !seen["Bound"] {
		var all []string
		for _, e := range evs.Items {
			all = append(all, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+" "+e.Reason)
		}
		t.Errorf("the Database's Events in namespace default: %v of Bound and Released, want at least Bound; all: %v", seen, all)
	}

	// The admin clears the claim: Available again, the released claim kept.
	d.Spec.ClaimRef = nil
	if err := updateSpec(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Available", phase(v1alpha1.BindingAvailable))
	if b := d.Status.Binding; b.Claim != "" || b.ReleasedClaim == nil || b.ReleasedClaim.UID != claim.UID {
		t.Errorf("after clearing the claim: %+v", b)
	}
}

// TestDeletionWaitsWhileBoundAndKeepsTheReclaimPolicyOfItsStart: a deleted
// Database whose claim's Tenant still has a DatabaseBinding waits (Ready
// False BoundToTenant, naming no claim) and drops nothing; the reclaim
// policy in effect when the deletion started decides, whatever
// spec.reclaimPolicy says later.
func TestDeletionWaitsWhileBoundAndKeepsTheReclaimPolicyOfItsStart(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		start, later v1alpha1.ReclaimPolicy
	}{
		{name: "delwait-delete", start: v1alpha1.ReclaimDelete, later: v1alpha1.ReclaimRetain},
		{name: "delwait-retain", start: v1alpha1.ReclaimRetain, later: v1alpha1.ReclaimDelete},
	} {
		t.Run(string(tc.start), func(t *testing.T) {
			b := binding(t, "claims-b", tc.name, tc.name)
			d := newDB(strings.ReplaceAll(tc.name, "-", "_"), func(d *v1alpha1.Database) {
				d.Name = tc.name
				d.Spec.ReclaimPolicy = tc.start
				d.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "claims-b", Name: tc.name, UID: b.Spec.ForProvider.Tenant.UID}
			})
			db := d.Spec.ForProvider.Database
			apply(t, d)
			// The binder protects the Database it bound: the release must
			// lift that protection, or the Database never goes away.
			waitDB(t, d, "Ready, Bound and protected", func(d *v1alpha1.Database) bool {
				return ready(d) && d.Status.Binding.Phase == v1alpha1.BindingBound && controllerutil.ContainsFinalizer(d, tenancy.ClaimProtectionFinalizer)
			})

			if err := env.Kube.Client.Delete(ctx, d); err != nil {
				t.Fatal(err)
			}
			waitDB(t, d, "BoundToTenant", reason("BoundToTenant"))
			// Whether the binder wrote its delivery copy before the
			// deletion started is a race; without one, lifting the
			// protection is all its release has left to do (reclaim
			// Delete on a Database being deleted: nothing to release).
			// The Database is no longer Ready, so no copy is written now.
			root, err := env.OpenBao.Client(env.OpenBao.RootToken)
			if err != nil {
				t.Fatal(err)
			}
			if err := root.KVv2(env.OpenBao.KVMount).DeleteMetadata(ctx, tenancy.DeliveryPath(options.DefaultTenantBasePath, "claims-b", tc.name)); err != nil {
				t.Fatal(err)
			}
			// The message is also an Event, in namespace default: it names
			// no claim.
			if c := d.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionFalse || strings.Contains(c.Message, "claims-b") || strings.Contains(c.Message, b.Spec.ForProvider.Tenant.UID) {
				t.Errorf("Ready %+v, want False naming no claim", c)
			}
			if got, want := d.GetAnnotations()[database.AnnotationReclaimAtDeletion], tenancy.ReclaimRecord(tc.start, string(d.GetUID()), d.GetDeletionTimestamp().Time); got != want {
				t.Errorf("recorded reclaim policy %q, want %q", got, want)
			}
			// The admin changes the reclaim policy after the deletion started.
			d.Spec.ReclaimPolicy = tc.later
			if err := updateSpec(ctx, d); err != nil {
				t.Fatal(err)
			}
			time.Sleep(4 * poll)
			if s := readPG(t, db, db); !s.DBExists || !s.RoleExists {
				t.Fatalf("something was dropped while the Database was bound: %+v", s)
			}
			if k := readKV(t, dbPath(d.Name)); !k.Exists {
				t.Fatal("the record was deleted while the Database was bound")
			}

			// The claim is released: the deletion goes on, as it started.
			if err := env.Kube.Client.Delete(ctx, b); err != nil {
				t.Fatal(err)
			}
			waitGone(t, d)
			s, k := readPG(t, db, db), readKV(t, dbPath(d.Name))
			if tc.start == v1alpha1.ReclaimDelete && (s.DBExists || s.RoleExists || k.Exists) {
				t.Errorf("reclaim Delete at the start, Retain later: pg %+v, kv %v; want everything dropped", s, k.Exists)
			}
			if tc.start == v1alpha1.ReclaimRetain && (!s.DBExists || !s.RoleExists || !k.Exists) {
				t.Errorf("reclaim Retain at the start, Delete later: pg %+v, kv %v; want everything kept", s, k.Exists)
			}
		})
	}
}

// TestImportOfAnotherDatabasesRecordIsRefused: an import naming another
// Database's own record (our ownership metadata, another UID) is a
// Conflict: it neither logs in with it, repairs, nor drops anything, even
// with reclaimPolicy Delete.
func TestImportOfAnotherDatabasesRecordIsRefused(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	victim := newDB("victim")
	apply(t, victim)
	waitDB(t, victim, "Ready", ready)
	before := readKV(t, dbPath("victim"))
	thief := newDB("thief", func(d *v1alpha1.Database) {
		d.Spec.ForProvider.Database = "victim"
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionDelete}
		d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
		d.Spec.ForProvider.CredentialPath = ptr.To(dbPath("victim"))
	})
	apply(t, thief)
	waitDB(t, thief, "Conflict", reason("Conflict"))
	if c := thief.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, "belongs to Database victim") {
		t.Errorf("message %q", c.Message)
	}
	if err := env.Kube.Client.Delete(ctx, thief); err != nil {
		t.Fatal(err)
	}
	waitGone(t, thief)
	if s := readPG(t, "victim", "victim"); !s.DBExists || !s.RoleExists {
		t.Fatalf("the victim's database or role was dropped by the import: %+v", s)
	}
	if k := readKV(t, dbPath("victim")); !k.Exists || k.Versions != before.Versions || fmt.Sprint(k.Owner) != fmt.Sprint(before.Owner) {
		t.Errorf("the victim's record changed: %+v", k)
	}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil || !ready(victim) {
		t.Errorf("the victim lost Ready: %v %+v", err, victim.GetCondition(xpv2.TypeReady))
	}
}

// TestImportUnderTheTenantBasePathIsRefused: an import naming a record
// under --openbao-tenant-base-path, where a namespace's ESO identity reads
// delivery copies, is InvalidSpec before anything is read or written: the
// record keeps its one version and no metadata, the credential in it never
// logs in and nothing is repaired (the import may Update), and the
// Database can be deleted, dropping nothing.
func TestImportUnderTheTenantBasePathIsRefused(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	su := superConn(t, "postgres")
	pw := testenv.RandomSecret("tb-")
	if err := env.Postgres.CreateRole(ctx, "undertenants", pw, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE undertenants OWNER undertenants"); err != nil {
		t.Fatal(err)
	}
	path := env.OpenBao.TenantBasePath + "/legacy/undertenants"
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	if _, err := root.KVv2("kv").Put(ctx, path, map[string]any{"username": "undertenants", "password": pw}); err != nil {
		t.Fatal(err)
	}
	before := readPG(t, "undertenants", "undertenants")
	d := newDB("undertenants", func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionUpdate}
		d.Spec.ForProvider.CredentialPath = ptr.To(path)
	})
	apply(t, d)
	waitDB(t, d, "InvalidSpec", reason("InvalidSpec"))
	c := d.GetCondition(xpv2.TypeReady)
	for _, want := range []string{path, `the namespace "legacy"`, "--openbao-tenant-base-path", "nothing was read from or written to it"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	time.Sleep(3 * poll)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if r := d.GetCondition(xpv2.TypeReady).Reason; r != "InvalidSpec" {
		t.Errorf("reason %q after more polls, want InvalidSpec", r)
	}
	if d.Status.AtProvider.Credential.Path != "" || d.Status.AtProvider.DatabaseOID != 0 {
		t.Errorf("the refused import reports a credential or a database: %+v", d.Status.AtProvider)
	}
	if k := readKV(t, path); k.Versions != 1 || len(k.Owner) != 0 {
		t.Errorf("the record under the tenant base path changed: %+v", k)
	}
	if after := readPG(t, "undertenants", "undertenants"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the refused import changed the database: %+v -> %+v", before, after)
	}
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d)
	if s := readPG(t, "undertenants", "undertenants"); !s.DBExists || !s.RoleExists {
		t.Errorf("deleting the refused import dropped something: %+v", s)
	}
}

// TestChangedNamesAreImmutableField: the names are fixed at the first
// write. A record whose database field no longer matches, or a login role
// set after provisioning (the schema allows setting it once), is reported
// ImmutableField: nothing is written or created, and a deletion drops
// nothing and keeps the finalizer.
func TestChangedNamesAreImmutableField(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	kv := root.KVv2("kv")

	// The record's database field edited: reported, not "repaired".
	d := newDB("renamed")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	k := readKV(t, dbPath("renamed"))
	edited := map[string]any{}
	for key, v := range k.Data {
		edited[key] = v
	}
	edited["database"] = "elsewhere"
	if _, err := kv.Put(ctx, dbPath("renamed"), edited); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "ImmutableField", reason("ImmutableField"))
	if c := d.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, `spec.forProvider.database is "renamed" but this Database provisioned "elsewhere"`) {
		t.Errorf("message %q", c.Message)
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 3)
	if k2 := readKV(t, dbPath("renamed")); k2.Versions != k.Versions+1 || k2.Data["database"] != "elsewhere" {
		t.Errorf("the record was rewritten: %d versions (want %d), database %v", k2.Versions, k.Versions+1, k2.Data["database"])
	}
	if _, err := kv.Put(ctx, dbPath("renamed"), k.Data); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Ready once the record's names are back", ready)

	// A login role set after provisioning.
	r := newDB("relogin", func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete })
	apply(t, r)
	waitDB(t, r, "Ready", ready)
	kr := readKV(t, dbPath("relogin"))
	r.Spec.ForProvider.LoginRole = ptr.To("relogin_owner")
	if err := updateSpec(ctx, r); err != nil {
		t.Fatal(err)
	}
	waitDB(t, r, "ImmutableField", reason("ImmutableField"))
	if c := r.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, `is "relogin_owner" but this Database provisioned "relogin"`) {
		t.Errorf("message %q", c.Message)
	}
	awaitPolls(t, []*v1alpha1.Database{r}, 3)
	if s := readPG(t, "nope", "relogin_owner"); s.RoleExists {
		t.Error("a role was created under the changed name")
	}
	if k2 := readKV(t, dbPath("relogin")); k2.Versions != kr.Versions || k2.Data["username"] != "relogin" {
		t.Errorf("the record was rewritten: %+v", k2)
	}
	if err := env.Kube.Client.Delete(ctx, r); err != nil {
		t.Fatal(err)
	}
	waitDB(t, r, "deletion refused", syncMessage("cannot delete: the login role"))
	if c := r.GetCondition(xpv2.TypeSynced); !strings.Contains(c.Message, "remove its finalizer by hand") {
		t.Errorf("the refusal does not say how to let the Database go: %q", c.Message)
	}
	time.Sleep(2 * poll)
	if s := readPG(t, "relogin", "relogin"); !s.DBExists || !s.RoleExists {
		t.Fatalf("something was dropped although the names changed: %+v", s)
	}
	if k := readKV(t, dbPath("relogin")); !k.Exists {
		t.Fatal("the record was deleted although the names changed")
	}
}

// TestVanishedDatabaseIsNotRecreated: a database this Database provisioned
// (its OID on record) that is dropped behind the provider's back is
// reported DatabaseVanished and not created again empty; deleting the
// Database (reclaim Delete) removes its role and record.
func TestVanishedDatabaseIsNotRecreated(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("vanish", func(d *v1alpha1.Database) { d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete })
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	k := readKV(t, dbPath("vanish"))
	if _, err := superConn(t, "postgres").Exec(ctx, "DROP DATABASE vanish WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "DatabaseVanished", reason("DatabaseVanished"))
	if c := d.GetCondition(xpv2.TypeReady); !strings.Contains(c.Message, "Restore it from a backup") || !strings.Contains(c.Message, "delete this Database") {
		t.Errorf("message %q", c.Message)
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 4)
	if s := readPG(t, "vanish", "vanish"); s.DBExists {
		t.Fatal("the vanished database was created again")
	}
	if k2 := readKV(t, dbPath("vanish")); k2.Versions != k.Versions || fmt.Sprint(k2.Owner) != fmt.Sprint(k.Owner) {
		t.Errorf("the record was rewritten: %+v", k2)
	}
	if err := env.Kube.Client.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d)
	if s := readPG(t, "vanish", "vanish"); s.RoleExists {
		t.Error("the role survived the Delete")
	}
	if k := readKV(t, dbPath("vanish")); k.Exists {
		t.Error("the record survived the Delete")
	}
}

// The canary runs last: no credential of the run appears in logs, Events,
// conditions or any object.
func TestZZCanary(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	var secrets []string
	l := &v1alpha1.DatabaseList{}
	if err := env.Kube.Client.List(ctx, l); err != nil {
		t.Fatal(err)
	}
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	for _, d := range l.Items {
		if s, err := root.KVv2("kv").Get(ctx, dbPath(d.Name)); err == nil {
			if p, ok := s.Data["password"].(string); ok {
				secrets = append(secrets, p)
			}
		}
	}
	if len(secrets) < 3 {
		t.Fatalf("only %d tenant passwords to look for: the check would prove little", len(secrets))
	}
	secrets = append(secrets, env.Postgres.AdminPassword, env.Postgres.AdminUser, env.Postgres.SuperPassword, env.OpenBao.RootToken)
	var dump bytes.Buffer
	for _, list := range []client.ObjectList{&v1alpha1.DatabaseList{}, &v1alpha1.ClusterProviderConfigList{}, &v1alpha1.ClusterProviderConfigUsageList{}, &corev1.EventList{}} {
		if err := env.Kube.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(list)
		dump.Write(b)
	}
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var scrape strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			scrape.WriteString(mf.GetName())
			for _, l := range m.GetLabel() {
				scrape.WriteString(" " + l.GetName() + "=" + l.GetValue())
			}
			scrape.WriteString("\n")
		}
	}
	if !strings.Contains(scrape.String(), "provider_postgresql_tenant_failures_total class=Conflict kind=database") {
		t.Error("the failure-class counter did not count the conflicts")
	}
	for where, text := range map[string]string{"objects, conditions and Events": dump.String(), "logs": logs.String(), "metrics": scrape.String()} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s contain a credential (%.4s…)", where, s)
			}
		}
	}
	if !strings.Contains(dump.String(), "ProvisioningStarted") {
		t.Error("no provisioning Event recorded: the check would prove little")
	}

}

// TestEndpointChangeSendsNoPasswordAndDropsNothing: after a config's
// endpoint changes (here: the same server under another name, which the
// provider cannot tell from another server), a Database neither logs in
// with its tenant's password, nor rewrites its record, nor drops anything
// when deleted, until the endpoint is the recorded one again.
func TestEndpointChangeSendsNoPasswordAndDropsNothing(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	pg := env.Postgres
	c := env.Kube.Client
	cfg := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "moving"},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: pg.Host, Hostaddr: pg.Hostaddr, Port: int32(pg.Port)}, //nolint:gosec // test port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
		},
	}
	if err := c.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cfg) })
	setHost := func(host string) {
		t.Helper()
		// The config's controller writes its status meanwhile.
		cur := &v1alpha1.ClusterProviderConfig{}
		cur.SetName(cfg.GetName())
		testenv.Edit(t, c, cur, func(cur *v1alpha1.ClusterProviderConfig) { cur.Spec.Endpoint.Host = host })
	}
	d := newDB("moving", func(d *v1alpha1.Database) {
		d.Spec.ProviderConfigReference.Name = "moving"
		d.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
	})
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	before := readKV(t, dbPath("moving"))

	setHost(pg.Hostaddr)
	waitDB(t, d, "EndpointChanged", reason("EndpointChanged"))
	if m := d.GetCondition(xpv2.TypeReady).Message; !strings.Contains(m, `host "localhost" (now "127.0.0.1")`) {
		t.Errorf("message %q", m)
	}
	seen, _ := os.ReadFile(pg.LogFile())
	awaitPolls(t, []*v1alpha1.Database{d}, 3)
	if now, _ := os.ReadFile(pg.LogFile()); len(now) > len(seen) && strings.Contains(string(now[len(seen):]), "connection authorized: user=moving ") {
		t.Error("the provider logged in as the tenant's role at the changed endpoint")
	}
	if k := readKV(t, dbPath("moving")); k.Versions != before.Versions || k.Data["host"] != "localhost" {
		t.Errorf("the record was rewritten after the endpoint changed: %+v", k)
	}

	if err := c.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "deletion refused", syncMessage("cannot delete: the credential was recorded for host"))
	time.Sleep(2 * poll)
	if s := readPG(t, "moving", "moving"); !s.DBExists || !s.RoleExists {
		t.Fatalf("something was dropped at a changed endpoint: %+v", s)
	}
	if k := readKV(t, dbPath("moving")); !k.Exists {
		t.Fatal("the record was deleted at a changed endpoint")
	}

	setHost(pg.Host)
	waitGone(t, d)
	if s := readPG(t, "moving", "moving"); s.DBExists || s.RoleExists {
		t.Errorf("after the endpoint came back, the explicit Delete did not finish: %+v", s)
	}
}
