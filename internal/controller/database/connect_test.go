package database_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// A pause holds the next reconcile that reaches a step until released.
type pause struct{ reached, release chan struct{} }

var (
	pmu    sync.Mutex
	pauses = map[string]*pause{}
)

// pauseNext arms a pause before the next occurrence of step.
func pauseNext(step string) *pause {
	pmu.Lock()
	defer pmu.Unlock()
	p := &pause{reached: make(chan struct{}), release: make(chan struct{})}
	pauses[step] = p
	return p
}

// pauseAt blocks the caller when a pause is armed for step (once).
func pauseAt(step string) {
	pmu.Lock()
	p := pauses[step]
	delete(pauses, step)
	pmu.Unlock()
	if p != nil {
		close(p.reached)
		<-p.release
	}
}

// sessionsOf counts role's sessions in database, as the superuser sees them.
func sessionsOf(t *testing.T, database, role string) int {
	t.Helper()
	c := superConn(t, "postgres")
	defer c.Close(context.Background()) //nolint:errcheck // test
	var n int
	if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND usename = $2`, database, role).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConnectLoopNeverEntersANewDatabase: another provisioned tenant's own
// login polls pg_database and connects in a loop while a new Database is
// provisioned; provisioning is held between the database's creation and
// its CONNECT step while the loop runs. The loop never has a session in
// the new database, and the new Database still becomes Ready.
func TestConnectLoopNeverEntersANewDatabase(t *testing.T) {
	testenv.Need(t)
	attacker := newDB("lurker")
	apply(t, attacker)
	waitDB(t, attacker, "Ready", ready)
	apw := readKV(t, dbPath("lurker")).Data["password"].(string)

	lurker := env.Postgres.Lurk(t, "lurker", apw, "lurker", "prey")
	defer lurker.Stop()

	p := pauseNext(database.StepConnect)
	victim := newDB("prey")
	apply(t, victim)
	select {
	case <-p.reached:
	case <-time.After(90 * time.Second):
		t.Fatal("provisioning never reached the CONNECT step")
	}
	lurker.WaitTries(20, 10*time.Second)
	close(p.release)
	waitDB(t, victim, "Ready", ready)
	time.Sleep(time.Second)
	if n := lurker.Tries.Load(); n < 20 {
		t.Fatalf("the connect loop tried only %d times while provisioning was held", n)
	}
	if n, left := lurker.Sessions.Load(), sessionsOf(t, "prey", "lurker"); n > 0 || left > 0 {
		t.Errorf("another tenant's login had %d session(s) in the new database (%d still there once it was Ready)", n, left)
	}
}

// TestInterruptedBeforeConnectionsAreAllowedFinishes: provisioning
// interrupted after CONNECT is restricted but before the database accepts
// connections (the tenant's login is then refused with 55000 after
// authentication) finishes on a later reconcile, with one password.
func TestInterruptedBeforeConnectionsAreAllowedFinishes(t *testing.T) {
	testenv.Need(t)
	for i, point := range []string{postgres.HookForeignSessions, postgres.HookAllowConnections} {
		name := []string{"halfopen0", "halfopen1"}[i]
		inject(point, 1)
		d := newDB(name)
		apply(t, d)
		waitDB(t, d, "Ready", ready)
		fmu.Lock()
		left := faults[point]
		fmu.Unlock()
		if left != 0 {
			t.Errorf("the fault %q was never hit", point)
		}
		k := readKV(t, dbPath(name))
		if k.Versions != 1 {
			t.Errorf("%s: %d KV versions, want exactly one", name, k.Versions)
		}
		app, err := appLogin(t, name, k.Data["password"].(string), name)
		if err != nil {
			t.Fatalf("%s: the one password does not log in: %v", name, err)
		}
		_ = app.Close(context.Background())
	}
}
