package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/scram"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// pgDatabase reads a database's encoding and locale from pg_database as
// the bootstrap superuser: provider ('c', 'i', 'b'), collate, ctype and
// the ICU or builtin locale.
func pgDatabase(t *testing.T, major int, database string) []string {
	t.Helper()
	c := env.Postgres.SuperConnT(t, "postgres")
	defer c.Close(context.Background()) //nolint:errcheck // test
	q := `SELECT pg_encoding_to_char(encoding), 'c', datcollate, datctype, '' FROM pg_database WHERE datname = $1`
	switch {
	case major >= 17:
		q = `SELECT pg_encoding_to_char(encoding), datlocprovider::text, datcollate, datctype, COALESCE(datlocale, '') FROM pg_database WHERE datname = $1`
	case major >= 15:
		q = `SELECT pg_encoding_to_char(encoding), datlocprovider::text, datcollate, datctype, COALESCE(daticulocale, '') FROM pg_database WHERE datname = $1`
	}
	var enc, prov, coll, ctype, loc string
	if err := c.QueryRow(context.Background(), q, database).Scan(&enc, &prov, &coll, &ctype, &loc); err != nil {
		t.Fatalf("reading pg_database for %s: %v", database, err)
	}
	return []string{enc, prov, coll, ctype, loc}
}

// TestDatabaseOptionsReadBackFromPgDatabase creates databases with a
// libc locale other than template0's (C, and C.UTF-8 as the server's
// C.utf8), an ICU locale (15+) and the builtin C.UTF-8 (17+), each
// checked first as the provider checks them, and reads each back from
// pg_database.
func TestDatabaseOptionsReadBackFromPgDatabase(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	major, err := p.Major(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		o     postgres.CreateOptions
		min   int
		want  []string
		wantR postgres.DatabaseOptions
	}
	cases := map[string]tc{
		"libc_c": {o: postgres.CreateOptions{Provider: "libc", Locale: "C"}, min: 14,
			want: []string{"UTF8", "c", "C", "C", ""}, wantR: postgres.DatabaseOptions{Encoding: "UTF8", Provider: "libc", Collate: "C", Ctype: "C"}},
		"libc_c_utf8": {o: postgres.CreateOptions{Provider: "libc", Locale: "C.UTF-8"}, min: 14,
			want: []string{"UTF8", "c", "C.UTF-8", "C.UTF-8", ""}, wantR: postgres.DatabaseOptions{Encoding: "UTF8", Provider: "libc", Collate: "C.UTF-8", Ctype: "C.UTF-8"}},
		"sql_ascii_c": {o: postgres.CreateOptions{Encoding: "SQL_ASCII", Provider: "libc", Locale: "C"}, min: 14,
			want: []string{"SQL_ASCII", "c", "C", "C", ""}, wantR: postgres.DatabaseOptions{Encoding: "SQL_ASCII", Provider: "libc", Collate: "C", Ctype: "C"}},
		"icu_und": {o: postgres.CreateOptions{Provider: "icu", ICULocale: "und", Locale: "C"}, min: 15,
			want: []string{"UTF8", "i", "C", "C", "und"}, wantR: postgres.DatabaseOptions{Encoding: "UTF8", Provider: "icu", Collate: "C", Ctype: "C", Locale: "und"}},
		"icu_de": {o: postgres.CreateOptions{Provider: "icu", ICULocale: "de-DE", Locale: "C"}, min: 15,
			want: []string{"UTF8", "i", "C", "C", "de-DE"}, wantR: postgres.DatabaseOptions{Encoding: "UTF8", Provider: "icu", Collate: "C", Ctype: "C", Locale: "de-DE"}},
		"builtin_c_utf8": {o: postgres.CreateOptions{Provider: "builtin", BuiltinLocale: "C.UTF-8", Locale: "C"}, min: 17,
			want: []string{"UTF8", "b", "C", "C", "C.UTF-8"}, wantR: postgres.DatabaseOptions{Encoding: "UTF8", Provider: "builtin", Collate: "C", Ctype: "C", Locale: "C.UTF-8"}},
	}
	ran := 0
	for name, c := range cases {
		if major < c.min {
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			s, err := p.CheckOptions(ctx, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if s != (postgres.OptionsSupport{Encoding: true, Locale: true, ICULocale: true, BuiltinLocale: true}) {
				t.Fatalf("CheckOptions(%+v) = %+v: the server should support them", c.o, s)
			}
			db := "opt_" + name
			v, err := scram.Verifier(testenv.RandomSecret("opt-"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CreateRole(ctx, db, v); err != nil {
				t.Fatal(err)
			}
			if err := p.CreateDatabaseWith(ctx, db, db, c.o); err != nil {
				t.Fatalf("CreateDatabaseWith(%+v): %v", c.o, err)
			}
			if diff := cmp.Diff(c.want, pgDatabase(t, major, db)); diff != "" {
				t.Errorf("pg_database (encoding, provider, collate, ctype, locale): -want +got:\n%s", diff)
			}
			got, err := p.ReadDatabaseOptions(ctx, db)
			if err != nil || got == nil {
				t.Fatalf("ReadDatabaseOptions: %v, %v", got, err)
			}
			if diff := cmp.Diff(c.wantR, *got); diff != "" {
				t.Errorf("ReadDatabaseOptions: -want +got:\n%s", diff)
			}
		})
	}
	t.Logf("PostgreSQL %d: %d option sets created and read back", major, ran)
	if none, err := p.ReadDatabaseOptions(ctx, "opt_never_created"); none != nil || err != nil {
		t.Errorf("ReadDatabaseOptions of a missing database = %+v, %v; want nil, nil", none, err)
	}
}

// TestUnsupportedOptionsAreAnswered: the server's answer to options it
// cannot serve is false for exactly the option it lacks, on every major.
func TestUnsupportedOptionsAreAnswered(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	major, err := p.Major(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := postgres.OptionsSupport{Encoding: true, Locale: true, ICULocale: true, BuiltinLocale: true}
	cases := map[string]struct {
		o    postgres.CreateOptions
		min  int
		want postgres.OptionsSupport
	}{
		"UnknownEncoding":    {o: postgres.CreateOptions{Encoding: "NO_SUCH_ENCODING", Locale: "C"}, want: postgres.OptionsSupport{Locale: true, ICULocale: true, BuiltinLocale: true}},
		"UnknownLibcLocale":  {o: postgres.CreateOptions{Locale: "xx_YY.UTF-8"}, want: postgres.OptionsSupport{Encoding: true, ICULocale: true, BuiltinLocale: true}},
		"LocaleNotEncoding":  {o: postgres.CreateOptions{Encoding: "LATIN1", Locale: "C.UTF-8"}, want: postgres.OptionsSupport{Encoding: true, ICULocale: true, BuiltinLocale: true}},
		"CFitsAnyEncoding":   {o: postgres.CreateOptions{Encoding: "LATIN1", Locale: "C"}, want: all},
		"UnknownICULocale":   {o: postgres.CreateOptions{Provider: "icu", ICULocale: "zz-Nowhere"}, min: 15, want: postgres.OptionsSupport{Encoding: true, Locale: true, BuiltinLocale: true}},
		"UnknownBuiltin":     {o: postgres.CreateOptions{Provider: "builtin", BuiltinLocale: "en_US"}, min: 17, want: postgres.OptionsSupport{Encoding: true, Locale: true, ICULocale: true}},
		"BuiltinBefore17":    {o: postgres.CreateOptions{Provider: "builtin", BuiltinLocale: "C.UTF-8"}, want: map[bool]postgres.OptionsSupport{true: all, false: {Encoding: true, Locale: true, ICULocale: true}}[major >= 17]},
		"QuoteIsJustAString": {o: postgres.CreateOptions{Locale: "C'; DROP DATABASE postgres; --"}, want: postgres.OptionsSupport{Encoding: true, ICULocale: true, BuiltinLocale: true}},
	}
	for name, c := range cases {
		if major < c.min {
			continue
		}
		t.Run(name, func(t *testing.T) {
			got, err := p.CheckOptions(ctx, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("CheckOptions(%+v) on %d = %+v, want %+v", c.o, major, got, c.want)
			}
		})
	}
}

// TestDatabaseSizesInOneStatement measures the provider's databases in
// one statement; a database the admin may not measure (no CONNECT, no
// pg_read_all_stats) and one that does not exist are left out without
// failing the others.
func TestDatabaseSizesInOneStatement(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	p := adminPool(t)
	var names []string
	for i := range 3 {
		n := fmt.Sprintf("sized_%d", i)
		createRoleAndDatabase(t, p, n, testenv.RandomSecret("sized-"))
		names = append(names, n)
	}
	superExec(t, "postgres", "CREATE DATABASE sized_foreign", "REVOKE CONNECT ON DATABASE sized_foreign FROM PUBLIC")
	got, err := p.DatabaseSizes(ctx, append(names, "sized_foreign", "sized_missing"))
	if err != nil {
		t.Fatalf("DatabaseSizes: %v", err)
	}
	if len(got) != len(names) {
		t.Errorf("measured %v, want exactly %v", got, names)
	}
	for _, n := range names {
		if got[n] < 1<<20 {
			t.Errorf("%s measured %d bytes; a database copied from template0 has several MB", n, got[n])
		}
	}
}

// BenchmarkDatabaseSizes measures the size statement over
// PPT_BENCH_SIZE_DATABASES (default 100) empty databases copied from
// template0, owned by roles the admin is a member of, as the provider's
// are: one op is one refresh of one config (performance.md).
func BenchmarkDatabaseSizes(b *testing.B) {
	testenv.Need(b)
	n := 100
	if v := os.Getenv("PPT_BENCH_SIZE_DATABASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	m := postgres.NewManager(postgres.Options{CABundleFile: bundle(b, env.CA.CertPEM)})
	defer m.Close()
	p, _, err := m.Get("b/sizes", "uid", target(env.Postgres.Host, postgres.SSLVerifyFull), admin())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	v, err := scram.Verifier(testenv.RandomSecret("bsize-"))
	if err != nil {
		b.Fatal(err)
	}
	if err := p.CreateRole(ctx, "bsize", v); err != nil {
		b.Fatal(err)
	}
	names := make([]string, n)
	start := time.Now()
	for i := range names {
		names[i] = fmt.Sprintf("bsize_%05d", i)
		if err := p.CreateDatabase(ctx, names[i], "bsize"); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("created %d databases in %v", n, time.Since(start).Round(time.Second))
	cpu0, err := env.Postgres.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var total int64
	for b.Loop() {
		got, err := p.DatabaseSizes(ctx, names)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != n {
			b.Fatalf("measured %d of %d databases", len(got), n)
		}
		total = 0
		for _, s := range got {
			total += s
		}
	}
	b.StopTimer()
	cpu1, err := env.Postgres.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/database")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N)/float64(n), "server-cpu-µs/database")
	b.Logf("%d databases, %d bytes in all", n, total)
}
