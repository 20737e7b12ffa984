package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.NodeMain(m, options, &env)
}

// The short soak: eight cycles with a fixed seed (their faults of several
// kinds), on the stack the long run uses, and more until it has made
// every kind of change: counted, not timed, so a loaded machine takes
// longer, not less. A
// regression that breaks an invariant under faults shows here; the
// figures come from the long run (docs/reliability.md). Then each check is
// shown able to fail: what it looks for is planted, and it must say so.
func TestSoakShort(t *testing.T) {
	testenv.Need(t)
	c := defaultConfig()
	c.Seed, c.Duration, c.MaxWave, c.MaxLive, c.MaxFault, c.Settle = 20261205, 0, 6, 12, 8*time.Second, 3*time.Minute
	c.MinCycles, c.MaxCycles, c.Cover = 8, 40, true
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	s, r, err := soakOn(ctx, env, c, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Table())
	if u := r.uncovered(); len(u) > 0 || r.Ops.RowsChecked == 0 {
		t.Errorf("the soak did too little to prove anything in %d cycles: none %v; %+v, faults %v", c.MaxCycles, u, r.Ops, r.Injected)
	}
	for _, v := range r.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	if t.Failed() {
		return
	}
	checksCatchWhatIsPlanted(ctx, t, s)
}

// checksCatchWhatIsPlanted plants, after a clean run, one breach of each
// invariant the final checks look for, and wants each reported: a lost
// row, a password made twice, a database and a role no Tenant has, the
// credential record of a deleted Tenant, a panic in the provider's log,
// a data role's record with more passwords than rotations and a login of
// it left logging in with no grace running.
func checksCatchWhatIsPlanted(ctx context.Context, t *testing.T, s *soak) {
	dr := dataRoleTenant(ctx, t, s)
	live := s.sorted()
	if len(live) < 3 || len(s.gone) == 0 {
		t.Fatalf("the run left %d live and %d deleted Tenants: too few to plant in", len(live), len(s.gone))
	}
	// Each planted breach in a Tenant of its own.
	others := slices.DeleteFunc(slices.Clone(live), func(l *tenant) bool { return l == dr })
	lost, twice := others[0], others[1]
	if err := s.withSecret(ctx, lost, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM soak`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	root, err := s.e.OpenBao.Client(s.e.OpenBao.RootToken)
	if err != nil {
		t.Fatal(err)
	}
	kv := root.KVv2(s.e.OpenBao.KVMount)
	if _, err := kv.Patch(ctx, tenantkit.RecordPath(twice.Database), map[string]any{"password": "planted-second-password"}); err != nil {
		t.Fatal(err)
	}
	deleted := s.gone[0]
	if _, err := kv.Put(ctx, tenantkit.RecordPath(deleted.Database), map[string]any{"planted": "yes"}); err != nil {
		t.Fatal(err)
	}
	su, err := s.e.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(context.WithoutCancel(ctx)) //nolint:errcheck // test session
	for _, q := range []string{`CREATE DATABASE soak_planted`, `CREATE ROLE soak_planted_role`} {
		if _, err := su.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.e.Dir, "provider-planted.log"), []byte("starting\npanic: planted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A data role: more passwords in its record than rotations asked, and
	// its second member logging in with no grace running.
	for i := range dr.Rotations + 1 {
		if _, err := kv.Patch(ctx, tenantkit.RecordPath(dr.Database)+"/roles/ro", map[string]any{"password": fmt.Sprintf("planted-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	member := dr.DBName + "_ro_2"
	if _, err := su.Exec(ctx, `CREATE ROLE `+member+` LOGIN`); err != nil {
		if _, err := su.Exec(ctx, `ALTER ROLE `+member+` LOGIN`); err != nil {
			t.Fatal(err)
		}
	}

	s.report.Violations = nil
	s.checkRows(ctx)
	for _, check := range []func(context.Context) error{s.checkVersions, s.checkServer, s.checkObjects} {
		if err := check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.checkPanics(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.report.Violations, "\n")
	for what, want := range map[string]string{
		"the lost row":                   "Tenant " + lost.key() + ": its Secret and row: 0 rows",
		"the password made twice":        "Database " + twice.Database + " of " + twice.key() + ": ",
		"the database of no Tenant":      "the database soak_planted",
		"the role of no Tenant":          "the role soak_planted_role",
		"the deleted Tenant's record":    "the credential record of " + deleted.key(),
		"the panic in the provider log":  "provider-planted.log: panic: planted",
		"the data role's extra password": "the data role ro of " + dr.key() + " has ",
		"the login past its grace":       "the data role ro of " + dr.key() + ": [",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("%s was planted, but no check said %q; they said:\n%s", what, want, got)
		}
	}
}

// dataRoleTenant is a live Tenant with a data role, made (and converged)
// when the run left none.
func dataRoleTenant(ctx context.Context, t *testing.T, s *soak) *tenant {
	t.Helper()
	find := func() *tenant {
		for _, l := range s.sorted() {
			if l.DataRole {
				return l
			}
		}
		return nil
	}
	if dr := find(); dr != nil {
		return dr
	}
	// One in three new Tenants has a data role.
	for i := 0; i < 3 && find() == nil; i++ {
		if err := s.createWave(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.converge(ctx, "a Tenant with a data role to plant in"); err != nil {
		t.Fatal(err)
	}
	dr := find()
	if dr == nil {
		t.Fatal("no live Tenant with a data role to plant in")
	}
	return dr
}
