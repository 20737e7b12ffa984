package database_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/clients/openbao"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/metrics"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// loginsOf counts the server's logins as role since offset in its log,
// those refused included (log_connections is on in the test server).
func loginsOf(t *testing.T, role string, offset int64) int {
	t.Helper()
	b, err := os.ReadFile(env.Postgres.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	log := string(b[offset:])
	return strings.Count(log, "connection authorized: user="+role+" ") + strings.Count(log, `authentication failed for user "`+role+`"`)
}

// countingKV counts the Database controller's reads of each record from
// the real OpenBao.
type countingKV struct {
	database.KV
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingKV) Read(ctx context.Context, path string) (*openbao.Record, error) {
	c.mu.Lock()
	if c.reads == nil {
		c.reads = map[string]int{}
	}
	c.reads[path]++
	c.mu.Unlock()
	return c.KV.Read(ctx, path)
}

// kvCounter is the counting wrapper around the controller's OpenBao client.
var kvCounter = &countingKV{}

// recordReads is how often the controller has read the record at path.
func recordReads(path string) int {
	kvCounter.mu.Lock()
	defer kvCounter.mu.Unlock()
	return kvCounter.reads[path]
}

func logSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(env.Postgres.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A Ready Database is observed at every poll, but logs in as its role only
// when something the catalog shows changed (here: the role's password
// expiry), not at every poll.
func TestReadyDatabaseLogsInOnlyWhenTheCatalogChanges(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("quiet")
	apply(t, d)
	waitDB(t, d, "Ready", ready)

	// Polls, not time: under load a poll can be late, and a sleep that saw
	// no Observe would prove nothing.
	awaitPolls(t, []*v1alpha1.Database{d}, 4)
	off := logSize(t)
	reads := recordReads(dbPath("quiet"))
	skipped := testutil.ToFloat64(metrics.TenantLogins.WithLabelValues("skipped"))
	remembered := testutil.ToFloat64(metrics.RecordReads.WithLabelValues("memory"))
	awaitPolls(t, []*v1alpha1.Database{d}, 8)
	if n := loginsOf(t, "quiet", off); n != 0 {
		t.Errorf("a Ready Database with nothing changed logged in %d times in 8 polls, want 0", n)
	}
	// Nor is its credential record read: the record kept with the login
	// stands until the login is due again.
	if n := recordReads(dbPath("quiet")) - reads; n != 0 {
		t.Errorf("a Ready Database with nothing changed read its credential record %d times in 8 polls, want 0", n)
	}
	if got := testutil.ToFloat64(metrics.TenantLogins.WithLabelValues("skipped")) - skipped; got < 4 {
		t.Errorf("%v Observes relied on the last proven login in 8 polls, want at least 4 (is the Database still observed?)", got)
	}
	if got := testutil.ToFloat64(metrics.RecordReads.WithLabelValues("memory")) - remembered; got < 4 {
		t.Errorf("%v Observes used the remembered record in 8 polls, want at least 4", got)
	}

	// An expired password: the credential no longer logs in. The catalog
	// shows the expiry, so the next Observe logs in and reports it.
	// The counters are read before the change: the Observe that reports
	// it may run at once.
	su := superConn(t, "postgres")
	off = logSize(t)
	reads = recordReads(dbPath("quiet"))
	refused := testutil.ToFloat64(metrics.LoginFailures.WithLabelValues(metrics.LoginRefused))
	if _, err := su.Exec(ctx, "ALTER ROLE quiet VALID UNTIL '2000-01-01'"); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "not Ready: the credential no longer logs in", func(d *v1alpha1.Database) bool { return !ready(d) })
	if n := loginsOf(t, "quiet", off); n == 0 {
		t.Error("the expiry was reported without a login")
	}
	// The refusal is counted for the alert on refused logins.
	if got := testutil.ToFloat64(metrics.LoginFailures.WithLabelValues(metrics.LoginRefused)) - refused; got < 1 {
		t.Errorf("%v refused logins counted after the expiry, want at least 1", got)
	}
	if n := recordReads(dbPath("quiet")) - reads; n == 0 {
		t.Error("the login after the expiry was made without reading the credential record")
	}
	if _, err := su.Exec(ctx, "ALTER ROLE quiet VALID UNTIL 'infinity'"); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Ready again", ready)
}

// A Ready Database notices a change of its credential record made behind
// its back at the next periodic login check, when it reads the record
// again, not at every poll: between two checks it uses the record it
// proved by its last login.
func TestRecordChangedByHandIsNoticedAtTheLoginCheck(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("bypoll")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	path := dbPath("bypoll")
	k := readKV(t, path)
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	kv := root.KVv2("kv")
	altered := map[string]any{}
	for key, v := range k.Data {
		altered[key] = v
	}
	altered["port"] = "1"
	reads := recordReads(path)
	start := time.Now()
	if _, err := kv.Put(ctx, path, altered); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "the record's port restored", func(*v1alpha1.Database) bool {
		return readKV(t, path).Data["port"] == fmt.Sprint(env.Postgres.Port)
	})
	if took := time.Since(start); took > loginCheck+10*poll {
		t.Errorf("the altered record was restored after %v, more than the login check interval %v", took, loginCheck)
	}
	if n := recordReads(path) - reads; n == 0 {
		t.Error("the record was restored without being read")
	}
}

// A poll that uses the remembered record and finds something to do reads
// the record before it acts: an extension added to a Ready Database is
// installed as the owner with the password from OpenBao, never with the
// remembered record's stand-in, which would be refused.
func TestWorkFoundOnARememberedRecordReadsTheRecordFirst(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("later")
	apply(t, d)
	waitDB(t, d, "Ready", ready)
	awaitPolls(t, []*v1alpha1.Database{d}, 4)
	reads := recordReads(dbPath("later"))
	awaitPolls(t, []*v1alpha1.Database{d}, 4)
	if n := recordReads(dbPath("later")) - reads; n != 0 {
		t.Fatalf("the steady Database read its record %d times in 4 polls: the remembered record is not in use, this test proves nothing", n)
	}
	off := logSize(t)
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	d.Spec.ForProvider.Extensions = append(d.Spec.ForProvider.Extensions, "hstore")
	if err := updateSpec(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Ready with hstore", func(d *v1alpha1.Database) bool {
		return ready(d) && slices.Contains(d.Status.AtProvider.Extensions, "hstore")
	})
	b, err := os.ReadFile(env.Postgres.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b[off:]), `authentication failed for user "later"`); n != 0 {
		t.Errorf("%d logins as the role were refused while the extension was added: a login was made without the password from OpenBao", n)
	}
	if s := readPG(t, "later", "later"); !slices.Contains(s.Extensions, "hstore") {
		t.Errorf("extensions on the server: %v", s.Extensions)
	}
}
