package postgres

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDatabaseOptions(t *testing.T) {
	libc := Locale{Collate: "C", Ctype: "C", Provider: "c"}
	cases := map[string]struct {
		l     Locale
		major int
		want  string
		err   string
	}{
		"14":         {l: Locale{Collate: "en_US.UTF-8", Ctype: "en_US.UTF-8", Provider: "c"}, major: 14, want: `TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'en_US.UTF-8' LC_CTYPE 'en_US.UTF-8'`},
		"15Libc":     {l: libc, major: 15, want: `TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' LOCALE_PROVIDER libc`},
		"15ICU":      {l: Locale{Collate: "C", Ctype: "C", Provider: "i", Locale: "und", ICURules: "&a < g"}, major: 15, want: `TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' LOCALE_PROVIDER icu ICU_LOCALE 'und'`},
		"16ICURules": {l: Locale{Collate: "C", Ctype: "C", Provider: "i", Locale: "und", ICURules: "&a < g"}, major: 16, want: `TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' LOCALE_PROVIDER icu ICU_LOCALE 'und' ICU_RULES '&a < g'`},
		"17Builtin":  {l: Locale{Collate: "C", Ctype: "C", Provider: "b", Locale: "C.UTF-8"}, major: 17, want: `TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' LOCALE_PROVIDER builtin BUILTIN_LOCALE 'C.UTF-8'`},
		"Quote":      {l: Locale{Collate: "it's", Ctype: "C", Provider: "c"}, major: 18, want: `TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'it''s' LC_CTYPE 'C' LOCALE_PROVIDER libc`},
		"Backslash":  {l: Locale{Collate: `a\'`, Ctype: "C", Provider: "c"}, major: 17, err: "backslash"},
		"Empty":      {l: Locale{Ctype: "C", Provider: "c"}, major: 17, err: "LC_COLLATE is empty"},
		"ICUNoLoc":   {l: Locale{Collate: "C", Ctype: "C", Provider: "i"}, major: 17, err: "ICU_LOCALE is empty"},
		"Builtin16":  {l: Locale{Collate: "C", Ctype: "C", Provider: "b", Locale: "C"}, major: 16, err: "builtin"},
		"Unknown":    {l: Locale{Collate: "C", Ctype: "C", Provider: "x"}, major: 17, err: "unknown locale provider"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := databaseOptions(tc.l, tc.major)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("databaseOptions() = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestCreateOptionsOverTemplate0(t *testing.T) {
	icu := Locale{Collate: "en_US.UTF-8", Ctype: "en_US.UTF-8", Provider: "i", Locale: "und", ICURules: "&a < g"}
	cases := map[string]struct {
		o    CreateOptions
		want Locale
	}{
		"Nothing":  {want: icu},
		"Encoding": {o: CreateOptions{Encoding: "LATIN1", Locale: "C"}, want: Locale{Encoding: "LATIN1", Collate: "C", Ctype: "C", Provider: "i", Locale: "und", ICURules: "&a < g"}},
		"Libc":     {o: CreateOptions{Provider: "libc", Locale: "C.UTF-8"}, want: Locale{Collate: "C.UTF-8", Ctype: "C.UTF-8", Provider: "c"}},
		"SameICU":  {o: CreateOptions{Provider: "icu", ICULocale: "und"}, want: icu},
		"OtherICU": {o: CreateOptions{Provider: "icu", ICULocale: "de-DE"}, want: Locale{Collate: "en_US.UTF-8", Ctype: "en_US.UTF-8", Provider: "i", Locale: "de-DE"}},
		"Builtin":  {o: CreateOptions{Provider: "builtin", BuiltinLocale: "C.UTF-8", Locale: "C"}, want: Locale{Collate: "C", Ctype: "C", Provider: "b", Locale: "C.UTF-8"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.o.over(icu)); diff != "" {
				t.Error(diff)
			}
		})
	}
	got, err := databaseOptions(Locale{Encoding: "LATIN1", Collate: "C", Ctype: "C", Provider: "c"}, 17)
	if err != nil || got != `TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' LOCALE_PROVIDER libc` {
		t.Errorf("databaseOptions(LATIN1) = %q, %v", got, err)
	}
}
