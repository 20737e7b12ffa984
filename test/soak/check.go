package main

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/openbao/openbao/api/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// check verifies, after the last fault and a last convergence, what must
// hold whatever failed; each breach is a violation in the report.
func (s *soak) check(ctx context.Context) error {
	if _, err := s.converge(ctx, "the last fault"); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	s.checkRows(cctx)
	if err := s.checkVersions(cctx); err != nil {
		return err
	}
	if err := s.checkServer(cctx); err != nil {
		return err
	}
	if err := s.checkObjects(cctx); err != nil {
		return err
	}
	found, err := tenantkit.Leaks(cctx, s.e, min(len(s.live), 1), nil, "soak-")
	if err != nil {
		return fmt.Errorf("the credential canary could not look: %w", err)
	}
	for _, f := range found {
		s.report.violation("a credential leaked: %s", f)
	}
	return s.checkPanics()
}

// checkRows: every live Tenant's Secret logs in, and the row written when
// it was first Ready is still there.
func (s *soak) checkRows(ctx context.Context) {
	for _, t := range s.sorted() {
		err := s.withSecret(ctx, t, func(c *pgx.Conn) error {
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM soak`).Scan(&n); err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("%d rows, want the one written when it was first Ready", n)
			}
			return nil
		})
		if err != nil {
			s.report.violation("Tenant %s: its Secret and row: %v", t.key(), err)
			continue
		}
		s.report.Ops.RowsChecked++
	}
}

// checkVersions: the credential record of each live Tenant's Database
// holds one password, plus one per rotation asked.
func (s *soak) checkVersions(ctx context.Context) error {
	root, err := s.e.OpenBao.Client(s.e.OpenBao.RootToken)
	if err != nil {
		return err
	}
	kv := root.KVv2(s.e.OpenBao.KVMount)
	for _, t := range append(s.sorted(), s.retained()...) {
		path := tenantkit.RecordPath(t.Database)
		m, err := kv.GetMetadata(ctx, path)
		if err != nil {
			s.report.violation("Database %s of %s has no credential record: %v", t.Database, t.key(), err)
			continue
		}
		passwords := passwordsIn(ctx, kv, path, m.CurrentVersion)
		if want := 1 + t.Rotations; len(passwords) != want {
			s.report.violation("Database %s of %s: %d passwords in its record's %d versions, want %d (1 and %d rotations asked)", t.Database, t.key(), len(passwords), m.CurrentVersion, want, t.Rotations)
		}
		if t.DataRole {
			s.checkDataRoleVersions(ctx, kv, t, path+"/roles/ro")
		}
	}
	return nil
}

// passwordsIn are the distinct passwords of versions 1 to current of the
// record at path (a version deleted or unreadable counts none).
func passwordsIn(ctx context.Context, kv *api.KVv2, path string, current int) map[string]bool {
	passwords := map[string]bool{}
	for v := 1; v <= current; v++ {
		sec, err := kv.GetVersion(ctx, path, v)
		if err != nil || sec == nil || sec.Data == nil {
			continue
		}
		if p, ok := sec.Data["password"].(string); ok {
			passwords[p] = true
		}
	}
	return passwords
}

// checkDataRoleVersions: a data role's record holds one password, plus at
// most one per rotation asked (a rotation asked while the previous one's
// grace runs waits, and then answers the latest id): never a second
// password for one rotation.
func (s *soak) checkDataRoleVersions(ctx context.Context, kv *api.KVv2, t *tenant, path string) {
	m, err := kv.GetMetadata(ctx, path)
	if err != nil {
		s.report.violation("the data role of %s has no credential record: %v", t.key(), err)
		return
	}
	if n := len(passwordsIn(ctx, kv, path, m.CurrentVersion)); n < 1 || n > 1+t.Rotations {
		s.report.violation("the data role ro of %s has %d passwords in its record's %d versions, want 1 to %d (1 and %d rotations asked)", t.key(), n, m.CurrentVersion, 1+t.Rotations, t.Rotations)
	}
}

// graceSlack is how long after its grace a previous login may still log
// in before the check calls it left behind: the reconcile that ends it
// runs about a second after the grace, a poll interval at worst.
const graceSlack = 2 * time.Minute

// checkDataRoleLogins: of a data role's roles (its own and its two
// members), exactly one logs in, or two while the previous login's grace
// (as its Database's status shows it) runs: no login is left past its
// grace.
func (s *soak) checkDataRoleLogins(ctx context.Context, c *pgx.Conn, t *tenant) {
	role := t.DBName + "_ro"
	var logins []string
	rows, err := c.Query(ctx, `SELECT rolname FROM pg_roles WHERE rolcanlogin AND rolname = ANY($1)`, []string{role, role + "_1", role + "_2"})
	if err == nil {
		logins, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		s.report.violation("the logins of the data role of %s: %v", t.key(), err)
		return
	}
	ends := time.Time{}
	if db, err := s.getDatabase(ctx, t.Database); err == nil {
		roles, _, _ := unstructured.NestedSlice(db.Object, "status", "atProvider", "dataRoles")
		for _, r := range roles {
			if m, ok := r.(map[string]any); ok && m["name"] == "ro" {
				if v, ok := m["previousLoginEndsAt"].(string); ok {
					ends, _ = time.Parse(time.RFC3339, v)
				}
			}
		}
	}
	switch {
	case len(logins) == 0:
		s.report.violation("no role of the data role of %s logs in", t.key())
	case len(logins) > 2, len(logins) == 2 && time.Now().After(ends.Add(graceSlack)):
		s.report.violation("the data role ro of %s: %v log in, past the previous login's grace (ends %v)", t.key(), logins, ends)
	}
}

// checkServer: the server holds exactly the live Tenants' databases and
// roles, and the Released ones on their way to a new Tenant: nothing
// dropped that was not deleted with reclaim Delete, nothing left of what
// was.
func (s *soak) checkServer(ctx context.Context) error {
	c, err := s.e.Postgres.SuperConn(ctx, "postgres")
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx)) //nolint:errcheck // a check's session
	want := map[string]bool{}
	wantRoles := map[string]bool{}
	// mayHave: a data role's second login member, made at its first
	// rotation.
	mayHave := map[string]bool{}
	for _, t := range append(s.sorted(), s.retained()...) {
		want[t.DBName] = true
		wantRoles[t.DBName] = true
		if t.DataRole {
			wantRoles[t.DBName+"_ro"], wantRoles[t.DBName+"_ro_1"] = true, true
			mayHave[t.DBName+"_ro_2"] = true
		}
	}
	for _, t := range s.sorted() {
		if t.DataRole {
			s.checkDataRoleLogins(ctx, c, t)
		}
	}
	for _, q := range []struct{ what, sql string }{
		{"database", `SELECT datname FROM pg_database WHERE datname LIKE 'soak\_%'`},
		{"role", `SELECT rolname FROM pg_roles WHERE rolname LIKE 'soak\_%'`},
	} {
		rows, err := c.Query(ctx, q.sql)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		expect := want
		if q.what == "role" {
			expect = wantRoles
		}
		got := map[string]bool{}
		for _, n := range names {
			got[n] = true
			if !expect[n] && (q.what != "role" || !mayHave[n]) {
				s.report.violation("the server has the %s %s, which no live Tenant has", q.what, n)
			}
		}
		for n := range expect {
			if !got[n] {
				s.report.violation("the %s %s of a live Tenant is gone from the server", q.what, n)
			}
		}
	}
	return nil
}

// checkObjects: one Database per live Tenant (none for a deleted one), the
// Released ones still claimed by the Tenant that released them; no record
// of a deleted one.
func (s *soak) checkObjects(ctx context.Context) error {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(tenantkit.TenantAPI)
	l.SetKind("DatabaseList")
	if err := s.kube.List(ctx, l); err != nil {
		return err
	}
	byTenant := map[string]string{}
	for _, d := range l.Items {
		ns, _, _ := unstructured.NestedString(d.Object, "spec", "claimRef", "namespace")
		name, _, _ := unstructured.NestedString(d.Object, "spec", "claimRef", "name")
		if !strings.HasPrefix(ns, "soak-") {
			continue
		}
		key := ns + "/" + name
		if other, ok := byTenant[key]; ok {
			s.report.violation("Tenant %s has two Databases: %s and %s", key, other, d.GetName())
		}
		byTenant[key] = d.GetName()
		if _, live := s.live[key]; !live && !s.releasedBy(key, d.GetName()) {
			s.report.violation("Database %s is left of the deleted Tenant %s", d.GetName(), key)
		}
	}
	for key, t := range s.live {
		if byTenant[key] != t.Database {
			s.report.violation("the live Tenant %s has the Database %q, not %s", key, byTenant[key], t.Database)
		}
	}
	root, err := s.e.OpenBao.Client(s.e.OpenBao.RootToken)
	if err != nil {
		return err
	}
	kv := root.KVv2(s.e.OpenBao.KVMount)
	for _, t := range s.gone {
		if t.Database == "" {
			continue
		}
		if m, err := kv.GetMetadata(ctx, tenantkit.RecordPath(t.Database)); err == nil && m != nil && len(m.Versions) > 0 {
			s.report.violation("the credential record of %s's deleted Database %s is still there", t.key(), t.Database)
		}
	}
	return nil
}

// retained are the Tenants whose Released Database is on its way to a
// new Tenant.
func (s *soak) retained() []*tenant {
	ts := make([]*tenant, 0, len(s.rebinds))
	for _, r := range s.rebinds {
		ts = append(ts, r.old)
	}
	return ts
}

// releasedBy: the Tenant key released the Database db, which is on its
// way to a new Tenant.
func (s *soak) releasedBy(key, db string) bool {
	for _, r := range s.rebinds {
		if r.old.key() == key && r.old.Database == db {
			return true
		}
	}
	return false
}

// panicLine is a Go panic's first line, or a fatal runtime error.
var panicLine = regexp.MustCompile(`(^|[^a-zA-Z])(panic: |fatal error: )`)

// checkPanics: no process of ours (the provider and the function, in
// every container run the kubelet kept a log of) panicked. The kubelet
// keeps the logs of a container's current and previous runs only, so the
// run checks after every cycle (a cycle restarts each container at most
// once) as well as at the end; a panic is reported once.
func (s *soak) checkPanics() error {
	var logs []string
	roots := []string{s.e.Dir}
	if s.e.Node != nil {
		roots = append(roots, s.e.Node.PodLogs)
	}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil //nolint:nilerr // a file that went away while walking
			}
			if !d.IsDir() && strings.HasSuffix(p, ".log") && (strings.Contains(p, "provider") || strings.Contains(p, "function")) {
				logs = append(logs, p)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(logs) == 0 {
		s.report.violation("no log of the provider or the function was found under %s: the panic check would prove nothing", s.e.Dir)
	}
	s.report.LogsScanned = len(logs)
	for _, p := range logs {
		f, err := os.Open(p) //nolint:gosec // the run's own logs
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if panicLine.MatchString(sc.Text()) {
				if v := filepath.Base(p) + ": " + sc.Text(); !s.panics[v] {
					s.panics[v] = true
					s.report.violation("%s", v)
				}
				break
			}
		}
		_ = f.Close()
	}
	return nil
}
