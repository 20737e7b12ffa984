package database_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// optionsConfig is a second registration of the test server whose new
// databases default to libc C and may ask C.UTF-8, ICU und, builtin
// C.UTF-8, and a libc locale no server has.
const optionsConfig = "with-options"

func ensureOptionsConfig(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pg := env.Postgres
	cfg := &v1alpha1.ClusterProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: optionsConfig},
		Spec: v1alpha1.ProviderConfigSpec{
			Endpoint:    v1alpha1.Endpoint{Host: pg.Host, Hostaddr: pg.Hostaddr, Port: int32(pg.Port)}, //nolint:gosec // test port
			Credentials: v1alpha1.Credentials{SecretRef: v1alpha1.SecretReference{Namespace: testenv.ProviderNamespace, Name: "admin"}},
			DatabaseOptions: &v1alpha1.DatabaseOptionsPolicy{
				Defaults: &v1alpha1.DatabaseOptions{LocaleProvider: v1alpha1.LocaleProviderLibc, Locale: "C"},
				Allowed: &v1alpha1.AllowedDatabaseOptions{
					LocaleProviders: []v1alpha1.LocaleProvider{v1alpha1.LocaleProviderICU, v1alpha1.LocaleProviderBuiltin},
					Locales:         []string{"C.UTF-8", "xx_YY.UTF-8"},
					ICULocales:      []string{"und"},
					BuiltinLocales:  []string{"C.UTF-8"},
				},
			},
		},
	}
	if err := env.Kube.Client.Create(ctx, cfg); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

func onOptionsConfig(opts *v1alpha1.DatabaseOptions) func(*v1alpha1.Database) {
	return func(d *v1alpha1.Database) {
		d.Spec.ProviderConfigReference = &xpv2.Reference{Name: optionsConfig}
		d.Spec.ForProvider.Extensions = nil
		d.Spec.ForProvider.Options = opts
	}
}

// datLocale reads provider, collate, ctype and the ICU or builtin locale
// of a database from pg_database as the superuser.
func datLocale(t *testing.T, db string) []string {
	t.Helper()
	ctx := context.Background()
	c := superConn(t, "postgres")
	defer c.Close(ctx) //nolint:errcheck // test
	var major int
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}
	q := `SELECT 'c', datcollate, datctype, '' FROM pg_database WHERE datname = $1`
	switch {
	case major >= 17:
		q = `SELECT datlocprovider::text, datcollate, datctype, COALESCE(datlocale, '') FROM pg_database WHERE datname = $1`
	case major >= 15:
		q = `SELECT datlocprovider::text, datcollate, datctype, COALESCE(daticulocale, '') FROM pg_database WHERE datname = $1`
	}
	out := make([]string, 4)
	if err := c.QueryRow(ctx, q, db).Scan(&out[0], &out[1], &out[2], &out[3]); err != nil {
		t.Fatalf("pg_database %s: %v", db, err)
	}
	return out
}

func serverMajor(t *testing.T) int {
	t.Helper()
	c := superConn(t, "postgres")
	defer c.Close(context.Background()) //nolint:errcheck // test
	var major int
	if err := c.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}
	return major
}

// TestDatabaseOptionsCreatedShownAndSized: Databases on a config with
// option defaults get the default (libc C) or what they ask within the
// allow-list (C.UTF-8; ICU und on 15+; builtin C.UTF-8 on 17+), as
// pg_database shows; status shows the options, no difference, and the
// size the config measured; the config shows the total and the largest.
func TestDatabaseOptionsCreatedShownAndSized(t *testing.T) {
	testenv.Need(t)
	ensureOptionsConfig(t)
	major := serverMajor(t)
	type want struct {
		d   *v1alpha1.Database
		pg  []string
		obs v1alpha1.LocaleProvider
	}
	cases := []want{
		{d: newDB("optdefault", onOptionsConfig(nil)), pg: []string{"c", "C", "C", ""}, obs: "libc"},
		{d: newDB("optutf8", onOptionsConfig(&v1alpha1.DatabaseOptions{Locale: "C.UTF-8"})), pg: []string{"c", "C.UTF-8", "C.UTF-8", ""}, obs: "libc"},
	}
	if major >= 15 {
		cases = append(cases, want{d: newDB("opticu", onOptionsConfig(&v1alpha1.DatabaseOptions{LocaleProvider: "icu", ICULocale: "und"})), pg: []string{"i", "C", "C", "und"}, obs: "icu"})
	}
	if major >= 17 {
		cases = append(cases, want{d: newDB("optbuiltin", onOptionsConfig(&v1alpha1.DatabaseOptions{LocaleProvider: "builtin", BuiltinLocale: "C.UTF-8"})), pg: []string{"b", "C", "C", "C.UTF-8"}, obs: "builtin"})
	}
	for _, c := range cases {
		apply(t, c.d)
	}
	for _, c := range cases {
		waitDB(t, c.d, "Ready with its options and size", func(d *v1alpha1.Database) bool {
			return ready(d) && d.Status.AtProvider.Options != nil && d.Status.AtProvider.Size != nil
		})
		if got := datLocale(t, c.d.Spec.ForProvider.Database); strings.Join(got, "|") != strings.Join(c.pg, "|") {
			t.Errorf("%s: pg_database has %v, want %v", c.d.Name, got, c.pg)
		}
		o := c.d.Status.AtProvider.Options
		if o.LocaleProvider != c.obs || o.Encoding != "UTF8" || len(o.Differences) != 0 {
			t.Errorf("%s: status.atProvider.options = %+v", c.d.Name, o)
		}
		if cond := c.d.GetCondition(tenancy.ConditionOptionsDiffer); cond.Status != corev1.ConditionFalse {
			t.Errorf("%s: OptionsDiffer = %+v", c.d.Name, cond)
		}
		if s := c.d.Status.AtProvider.Size; s.Bytes < 1<<20 || s.Human == "" {
			t.Errorf("%s: status.atProvider.size = %+v", c.d.Name, s)
		}
	}
	cfg := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: optionsConfig}}
	testenv.Await(t, env.Kube.Client, cfg, 90*time.Second, "the config shows every Database's size", func(c *v1alpha1.ClusterProviderConfig) bool {
		return c.Status.Sizes != nil && c.Status.Sizes.Databases >= len(cases)
	}, func(c *v1alpha1.ClusterProviderConfig) string {
		return fmt.Sprintf("status.sizes: %+v", c.Status.Sizes)
	})
	s := cfg.Status.Sizes
	if s.TotalBytes < int64(len(cases))<<20 || s.Total == "" || len(s.Largest) == 0 || len(s.Largest) > tenancy.Largest || s.Largest[0].Bytes < s.Largest[len(s.Largest)-1].Bytes {
		t.Errorf("config status.sizes = %+v", s)
	}
}

// TestDatabaseOptionsRefusedBeforeAnyWrite: options outside the config's
// allow-list, a libc locale the server lacks, and a provider its major
// does not have are refused with their reason before any write: no
// credential record, role or database.
func TestDatabaseOptionsRefusedBeforeAnyWrite(t *testing.T) {
	testenv.Need(t)
	ensureOptionsConfig(t)
	major := serverMajor(t)
	cases := []struct {
		d      *v1alpha1.Database
		reason string
		msg    string
	}{
		{d: newDB("optdenied", onOptionsConfig(&v1alpha1.DatabaseOptions{Locale: "POSIX"})), reason: tenancy.ReasonDatabaseOptionsNotAllowed, msg: `locale "POSIX" (allowed: C (the default), C.UTF-8, xx_YY.UTF-8)`},
		{d: newDB("optnolocale", onOptionsConfig(&v1alpha1.DatabaseOptions{Locale: "xx_YY.UTF-8"})), reason: tenancy.ReasonDatabaseOptionsUnsupported, msg: `no libc locale "xx_YY.UTF-8"`},
	}
	if major < 17 {
		cases = append(cases, struct {
			d      *v1alpha1.Database
			reason string
			msg    string
		}{d: newDB("optbuiltinold", onOptionsConfig(&v1alpha1.DatabaseOptions{LocaleProvider: "builtin", BuiltinLocale: "C.UTF-8"})), reason: tenancy.ReasonDatabaseOptionsUnsupported, msg: "builtin needs PostgreSQL 17 or later"})
	} else {
		cases = append(cases, struct {
			d      *v1alpha1.Database
			reason string
			msg    string
		}{d: newDB("optnoicu", onOptionsConfig(&v1alpha1.DatabaseOptions{LocaleProvider: "icu", ICULocale: "und", Encoding: "SQL_ASCII"})), reason: tenancy.ReasonDatabaseOptionsNotAllowed, msg: `encoding "SQL_ASCII"`})
	}
	var ds []*v1alpha1.Database
	for _, c := range cases {
		apply(t, c.d)
		ds = append(ds, c.d)
	}
	for _, c := range cases {
		waitDB(t, c.d, c.reason, reason(c.reason))
		if m := c.d.GetCondition(xpv2.TypeReady).Message; !strings.Contains(m, c.msg) || !strings.Contains(m, "nothing was created") {
			t.Errorf("%s: message %q does not say %q", c.d.Name, m, c.msg)
		}
	}
	awaitPolls(t, ds, 2)
	for _, c := range cases {
		n := c.d.Spec.ForProvider.Database
		if k := readKV(t, dbPath(c.d.Name)); k.Exists {
			t.Errorf("%s: a credential record was written for refused options", c.d.Name)
		}
		if s := readPG(t, n, n); s.RoleExists || s.DBExists {
			t.Errorf("%s: a role or database was created for refused options", c.d.Name)
		}
	}
}

// TestImportReportsOptionDifferences: an import whose database has other
// options than spec.forProvider.options asks reports each difference in
// status and the OptionsDiffer condition, and changes nothing.
func TestImportReportsOptionDifferences(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	su := superConn(t, "postgres")
	pw := testenv.RandomSecret("optimp-")
	if err := env.Postgres.CreateRole(ctx, "optimp", pw, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE optimp OWNER optimp TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"); err != nil {
		t.Fatal(err)
	}
	root, _ := env.OpenBao.Client(env.OpenBao.RootToken)
	if _, err := root.KVv2("kv").Put(ctx, "postgresql-databases/imports/optimp", map[string]any{"username": "optimp", "password": pw}); err != nil {
		t.Fatal(err)
	}
	before := datLocale(t, "optimp")
	d := newDB("optimp", func(d *v1alpha1.Database) {
		d.Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionObserve}
		d.Spec.ForProvider.CredentialPath = ptr.To("postgresql-databases/imports/optimp")
		d.Spec.ForProvider.Extensions = nil
		d.Spec.ForProvider.Options = &v1alpha1.DatabaseOptions{Encoding: "UTF8", Locale: "C.UTF-8"}
	})
	apply(t, d)
	waitDB(t, d, "OptionsDiffer", func(d *v1alpha1.Database) bool {
		return d.GetCondition(tenancy.ConditionOptionsDiffer).Status == corev1.ConditionTrue
	})
	o := d.Status.AtProvider.Options
	want := []string{`locale (LC_COLLATE): asked "C.UTF-8", the database has "C"`, `locale (LC_CTYPE): asked "C.UTF-8", the database has "C"`}
	if o == nil || o.Collate != "C" || strings.Join(o.Differences, "|") != strings.Join(want, "|") {
		t.Errorf("status.atProvider.options = %+v, want the differences %q", o, want)
	}
	if m := d.GetCondition(tenancy.ConditionOptionsDiffer).Message; !strings.Contains(m, want[0]) || !strings.Contains(m, "nothing is changed") {
		t.Errorf("OptionsDiffer message %q", m)
	}
	awaitPolls(t, []*v1alpha1.Database{d}, 2)
	if after := datLocale(t, "optimp"); strings.Join(after, "|") != strings.Join(before, "|") {
		t.Errorf("the import changed the database's options: %v → %v", before, after)
	}
}

// updateSpec writes d's spec (as the caller changed it) onto the latest
// version of the object: the provider writes its status meanwhile (a
// Database's first size lands a few seconds after it is Ready).
func updateSpec(ctx context.Context, d *v1alpha1.Database) error {
	spec := d.Spec.DeepCopy()
	return testenv.EditE(ctx, env.Kube.Client, d, func(d *v1alpha1.Database) { d.Spec = *spec.DeepCopy() })
}

// TestAFailingSizeKeepsTheOthersAndIsNamed: while the size statements of
// one database fail, the config's refreshes go on: the failed batch's
// databases are measured alone at the next refresh, the others are
// measured again, the failing one keeps its last size (stale) and
// status.sizes names it with the reason; once it can be measured again
// (after its backoff), it is no longer named.
func TestAFailingSizeKeepsTheOthersAndIsNamed(t *testing.T) {
	testenv.MajorIndependent(t)
	testenv.Need(t)
	keep, failing := newDB("szkeep"), newDB("szfail")
	apply(t, keep)
	apply(t, failing)
	for _, d := range []*v1alpha1.Database{keep, failing} {
		waitDB(t, d, "Ready and sized", func(d *v1alpha1.Database) bool { return ready(d) && d.Status.AtProvider.Size != nil })
	}
	setSizeFault := func(db string) {
		fmu.Lock()
		defer fmu.Unlock()
		sizeFault = db
	}
	setSizeFault("szfail")
	t.Cleanup(func() { setSizeFault("") })

	named := func(s *v1alpha1.ConfigSizes, db string) *v1alpha1.SizeNotMeasured {
		for i := range s.NotMeasuredDatabases {
			if s.NotMeasuredDatabases[i].Database == db {
				return &s.NotMeasuredDatabases[i]
			}
		}
		return nil
	}
	cfg := &v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: configName}}
	show := func(c *v1alpha1.ClusterProviderConfig) string {
		return fmt.Sprintf("status.sizes: %+v", c.Status.Sizes)
	}
	testenv.Await(t, env.Kube.Client, cfg, 90*time.Second, "szfail named alone, szkeep measured", func(c *v1alpha1.ClusterProviderConfig) bool {
		s := c.Status.Sizes
		if s == nil {
			return false
		}
		f := named(s, "szfail")
		// Measured alone: the reason is its own statement's, not its batch's.
		return f != nil && f.Name == "szfail" && strings.Contains(f.Reason, "injected failure measuring szfail") &&
			!strings.Contains(f.Reason, "its batch") && named(s, "szkeep") == nil && s.Stale >= 1
	}, show)
	s := cfg.Status.Sizes
	if f := named(s, "szfail"); f.Since == nil || f.NextAttempt == nil || !f.NextAttempt.After(f.Since.Time) {
		t.Errorf("szfail's failure: %+v, want since and a later next attempt", f)
	}
	if s.NotMeasured < 1 || s.Databases < 2 {
		t.Errorf("status.sizes %+v: the failing database's last size should still count", s)
	}
	for _, x := range []string{env.Postgres.AdminUser, env.Postgres.AdminPassword} {
		if strings.Contains(fmt.Sprint(s), x) {
			t.Error("status.sizes shows the admin's credential")
		}
	}

	setSizeFault("")
	testenv.Await(t, env.Kube.Client, cfg, 3*time.Minute, "szfail measured again after its backoff", func(c *v1alpha1.ClusterProviderConfig) bool {
		return c.Status.Sizes != nil && named(c.Status.Sizes, "szfail") == nil
	}, show)
}
