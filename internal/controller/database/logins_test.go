package database_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
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

	time.Sleep(4 * poll)
	off := logSize(t)
	skipped := testutil.ToFloat64(metrics.TenantLogins.WithLabelValues("skipped"))
	time.Sleep(8 * poll)
	if n := loginsOf(t, "quiet", off); n != 0 {
		t.Errorf("a Ready Database with nothing changed logged in %d times in 8 polls, want 0", n)
	}
	if got := testutil.ToFloat64(metrics.TenantLogins.WithLabelValues("skipped")) - skipped; got < 4 {
		t.Errorf("%v Observes relied on the last proven login in 8 polls, want at least 4 (is the Database still observed?)", got)
	}

	// An expired password: the credential no longer logs in. The catalog
	// shows the expiry, so the next Observe logs in and reports it.
	su := superConn(t, "postgres")
	off = logSize(t)
	if _, err := su.Exec(ctx, "ALTER ROLE quiet VALID UNTIL '2000-01-01'"); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "not Ready: the credential no longer logs in", func(d *v1alpha1.Database) bool { return !ready(d) })
	if n := loginsOf(t, "quiet", off); n == 0 {
		t.Error("the expiry was reported without a login")
	}
	if _, err := su.Exec(ctx, "ALTER ROLE quiet VALID UNTIL 'infinity'"); err != nil {
		t.Fatal(err)
	}
	waitDB(t, d, "Ready again", ready)
}
