package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// TestAFailingSizeBatchCostsOnlyItself: of three size statements, the one
// that fails (here by the fault hook) and the one the server cancels at
// SizeStatementTimeout (its query waits on a lock a superuser holds on
// pg_database for longer) are reported with their reason, and the
// batches around them keep their sizes; the refresh is not stopped.
func TestAFailingSizeBatchCostsOnlyItself(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	var hook func(string) error
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(t, env.CA.CertPEM), Hook: func(point string) error {
		if hook != nil {
			return hook(point)
		}
		return nil
	}})
	t.Cleanup(m.Close)
	p, _, err := m.Get("t/sizes", "uid-sizes", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"szk_a", "szk_b", "szk_bad", "szk_slow", "szk_c"} {
		createRoleAndDatabase(t, p, n, testenv.RandomSecret("szk-"))
	}
	lockErr := make(chan error, 1)
	hook = func(point string) error {
		if !strings.HasPrefix(point, postgres.HookSizes+":") {
			return nil
		}
		switch {
		case strings.Contains(point, "szk_bad"):
			return errors.New("injected failure of the size statement")
		case strings.Contains(point, "szk_slow"):
			// Hold pg_database locked past the statement timeout.
			c, err := env.Postgres.SuperConn(ctx, "postgres")
			if err != nil {
				return err
			}
			tx, err := c.Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, "LOCK TABLE pg_catalog.pg_database IN ACCESS EXCLUSIVE MODE")
			}
			if err != nil {
				_ = c.Close(ctx)
				return err
			}
			go func() {
				time.Sleep(postgres.SizeStatementTimeout + 2*time.Second)
				lockErr <- tx.Rollback(ctx)
				_ = c.Close(ctx)
			}()
		}
		return nil
	}
	batches := [][]string{{"szk_a", "szk_b"}, {"szk_bad"}, {"szk_slow"}, {"szk_c", "szk_missing"}}
	start := time.Now()
	got, problem := p.MeasureSizes(ctx, batches)
	took := time.Since(start)
	hook = nil
	select {
	case err := <-lockErr:
		if err != nil {
			t.Fatalf("releasing the lock: %v", err)
		}
	case <-time.After(postgres.SizeStatementTimeout + 5*time.Second):
		t.Error("the batch after the failing one never ran")
	}
	if problem != "" {
		t.Errorf("problem %q: a failed statement stopped the refresh", problem)
	}
	if len(got) != len(batches) {
		t.Fatalf("%d outcomes for %d batches: %+v", len(got), len(batches), got)
	}
	for _, i := range []int{0, 3} {
		o := got[i]
		if o.Err != "" || o.NotAttempted {
			t.Errorf("batch %v: %+v, want measured", o.Databases, o)
		}
		for _, d := range o.Databases {
			if d != "szk_missing" && o.Sizes[d] < 1<<20 {
				t.Errorf("%s measured %d bytes, want its size", d, o.Sizes[d])
			}
		}
		if _, ok := o.Sizes["szk_missing"]; ok {
			t.Error("a database that does not exist was measured")
		}
	}
	if o := got[1]; !strings.Contains(o.Err, "injected failure") || len(o.Sizes) != 0 || o.NotAttempted {
		t.Errorf("the failing batch: %+v", o)
	}
	if o := got[2]; !strings.Contains(o.Err, "statement_timeout") || len(o.Sizes) != 0 || o.NotAttempted {
		t.Errorf("the batch held past the statement timeout: %+v", o)
	}
	if took < postgres.SizeStatementTimeout || took > postgres.SizeStatementTimeout+30*time.Second {
		t.Errorf("the refresh took %s; the slow batch should end at the statement timeout (%s)", took, postgres.SizeStatementTimeout)
	}
	for _, o := range got {
		for _, s := range []string{env.Postgres.AdminUser, env.Postgres.AdminPassword} {
			if strings.Contains(o.Err, s) {
				t.Errorf("a failure names the admin's credential: %q", o.Err)
			}
		}
	}

	// Merged, the sizes of the failing batches are the last known ones and
	// the others' are new.
	prev := tenancy.SizeState{At: start.Add(-time.Hour), Sizes: map[string]tenancy.MeasuredSize{"szk_bad": {Bytes: 7, At: start.Add(-time.Hour)}}}
	next := tenancy.MergeSizes(prev, []string{"szk_a", "szk_b", "szk_bad", "szk_slow", "szk_c"}, got, problem, start, 0)
	if next.Sizes["szk_bad"].Bytes != 7 || next.Sizes["szk_a"].Bytes < 1<<20 || next.Sizes["szk_c"].Bytes < 1<<20 || next.Failed["szk_slow"].Failures != 1 {
		t.Errorf("merged state: %+v", next)
	}
}
