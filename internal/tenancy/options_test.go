package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestResolveOptions(t *testing.T) {
	icuDefault := &v1alpha1.DatabaseOptionsPolicy{
		Defaults: &v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "icu", Locale: "C", ICULocale: "und"},
		Allowed: &v1alpha1.AllowedDatabaseOptions{
			LocaleProviders: []v1alpha1.LocaleProvider{"libc", "builtin"},
			Locales:         []string{"C.UTF-8"},
			ICULocales:      []string{"de-DE"},
			BuiltinLocales:  []string{"C.UTF-8"},
		},
	}
	cases := map[string]struct {
		req    *v1alpha1.DatabaseOptions
		policy *v1alpha1.DatabaseOptionsPolicy
		major  int
		want   v1alpha1.DatabaseOptions
		reason string
		msg    []string
	}{
		"NothingAsked":      {major: 14},
		"DefaultsOnly":      {policy: icuDefault, major: 16, want: *icuDefault.Defaults},
		"DefaultAskedAgain": {req: &v1alpha1.DatabaseOptions{ICULocale: "UND"}, policy: icuDefault, major: 16, want: v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "icu", Locale: "C", ICULocale: "UND"}},
		"AllowedICULocale":  {req: &v1alpha1.DatabaseOptions{ICULocale: "de-DE"}, policy: icuDefault, major: 15, want: v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "icu", Locale: "C", ICULocale: "de-DE"}},
		"AllowedLibc": {req: &v1alpha1.DatabaseOptions{LocaleProvider: "libc", Locale: "C.UTF-8"}, policy: icuDefault, major: 17,
			want: v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "libc", Locale: "C.UTF-8"}},
		"AllowedBuiltin": {req: &v1alpha1.DatabaseOptions{LocaleProvider: "builtin", BuiltinLocale: "C.UTF-8"}, policy: icuDefault, major: 17,
			want: v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "builtin", Locale: "C", BuiltinLocale: "C.UTF-8"}},
		"NotAllowed": {req: &v1alpha1.DatabaseOptions{Encoding: "LATIN1", ICULocale: "fr-FR"}, policy: icuDefault, major: 17,
			want:   v1alpha1.DatabaseOptions{Encoding: "LATIN1", LocaleProvider: "icu", Locale: "C", ICULocale: "fr-FR"},
			reason: ReasonDatabaseOptionsNotAllowed, msg: []string{`encoding "LATIN1" (allowed: UTF8 (the default))`, `icuLocale "fr-FR" (allowed: und (the default), de-DE)`, "spec.databaseOptions.allowed"}},
		"NoPolicyAllowsNothing": {req: &v1alpha1.DatabaseOptions{Locale: "C"}, major: 17, want: v1alpha1.DatabaseOptions{Locale: "C"},
			reason: ReasonDatabaseOptionsNotAllowed, msg: []string{`locale "C" (allowed: template0's (the default))`}},
		"ICUOn14": {req: &v1alpha1.DatabaseOptions{ICULocale: "de-DE"}, policy: icuDefault, major: 14,
			want: v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "icu", Locale: "C", ICULocale: "de-DE"}, reason: ReasonDatabaseOptionsUnsupported, msg: []string{"icu needs PostgreSQL 15 or later; the server runs 14"}},
		"BuiltinOn16": {req: &v1alpha1.DatabaseOptions{LocaleProvider: "builtin", BuiltinLocale: "C.UTF-8"}, policy: icuDefault, major: 16,
			want: v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "builtin", Locale: "C", BuiltinLocale: "C.UTF-8"}, reason: ReasonDatabaseOptionsUnsupported, msg: []string{"builtin needs PostgreSQL 17 or later"}},
		"ICULocaleWithoutICU": {req: &v1alpha1.DatabaseOptions{LocaleProvider: "libc", ICULocale: "de-DE"}, policy: icuDefault, major: 17,
			want: v1alpha1.DatabaseOptions{Encoding: "UTF8", LocaleProvider: "libc", Locale: "C"}, reason: ReasonDatabaseOptionsUnsupported, msg: []string{"icuLocale needs localeProvider icu"}},
		"ICUWithoutLocale": {req: &v1alpha1.DatabaseOptions{LocaleProvider: "icu"},
			policy: &v1alpha1.DatabaseOptionsPolicy{Allowed: &v1alpha1.AllowedDatabaseOptions{LocaleProviders: []v1alpha1.LocaleProvider{"icu"}}}, major: 17,
			want: v1alpha1.DatabaseOptions{LocaleProvider: "icu"}, reason: ReasonDatabaseOptionsUnsupported, msg: []string{"needs an icuLocale"}},
		"BuiltinDefaultLocaleOnlyWithBuiltin": {req: &v1alpha1.DatabaseOptions{LocaleProvider: "libc"},
			policy: &v1alpha1.DatabaseOptionsPolicy{Defaults: &v1alpha1.DatabaseOptions{LocaleProvider: "builtin", BuiltinLocale: "C.UTF-8"}, Allowed: &v1alpha1.AllowedDatabaseOptions{LocaleProviders: []v1alpha1.LocaleProvider{"libc"}}}, major: 17,
			want: v1alpha1.DatabaseOptions{LocaleProvider: "libc"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ResolveOptions(tc.req, tc.policy, tc.major)
			if diff := cmp.Diff(tc.want, got.Effective); diff != "" {
				t.Errorf("Effective: -want +got:\n%s", diff)
			}
			if got.Reason != tc.reason {
				t.Errorf("Reason = %q, want %q (%s)", got.Reason, tc.reason, got.Message)
			}
			for _, m := range tc.msg {
				if !strings.Contains(got.Message, m) {
					t.Errorf("Message %q does not say %q", got.Message, m)
				}
			}
		})
	}
}

func TestOptionsUnsupported(t *testing.T) {
	all := OptionsSupport{Encoding: true, Locale: true, ICULocale: true, BuiltinLocale: true}
	eff := v1alpha1.DatabaseOptions{Encoding: "LATIN9", Locale: "xx_YY", ICULocale: "zz", BuiltinLocale: "Q"}
	cases := map[string]struct {
		eff  v1alpha1.DatabaseOptions
		s    OptionsSupport
		want []string
	}{
		"Supported":     {eff: eff, s: all},
		"Encoding":      {eff: eff, s: OptionsSupport{Locale: true, ICULocale: true, BuiltinLocale: true}, want: []string{`no encoding "LATIN9"`}},
		"Locale":        {eff: eff, s: OptionsSupport{Encoding: true, ICULocale: true, BuiltinLocale: true}, want: []string{`no libc locale "xx_YY" usable with the encoding LATIN9`}},
		"TemplateLoc":   {eff: v1alpha1.DatabaseOptions{Encoding: "LATIN1"}, s: OptionsSupport{Encoding: true, ICULocale: true, BuiltinLocale: true}, want: []string{`template0's locale does not fit the encoding "LATIN1"`}},
		"ICU":           {eff: eff, s: OptionsSupport{Encoding: true, Locale: true, BuiltinLocale: true}, want: []string{`no ICU locale "zz"`}},
		"BuiltinLocale": {eff: eff, s: OptionsSupport{Encoding: true, Locale: true, ICULocale: true}, want: []string{`no builtin locale "Q"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := OptionsUnsupported(tc.eff, tc.s)
			if (got == "") != (len(tc.want) == 0) {
				t.Fatalf("OptionsUnsupported() = %q, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) || !strings.Contains(got, "nothing was created") {
					t.Errorf("%q does not say %q", got, w)
				}
			}
		})
	}
}

func TestOptionsDifferences(t *testing.T) {
	have := v1alpha1.DatabaseOptionsObservation{Encoding: "UTF8", LocaleProvider: "libc", Collate: "C.utf8", Ctype: "C.utf8"}
	cases := map[string]struct {
		want *v1alpha1.DatabaseOptions
		out  []string
	}{
		"NothingAsked":  {},
		"Same":          {want: &v1alpha1.DatabaseOptions{Encoding: "utf8", LocaleProvider: "libc", Locale: "C.UTF-8"}},
		"OtherLocale":   {want: &v1alpha1.DatabaseOptions{Locale: "C"}, out: []string{`locale (LC_COLLATE): asked "C", the database has "C.utf8"`, `locale (LC_CTYPE): asked "C", the database has "C.utf8"`}},
		"OtherProvider": {want: &v1alpha1.DatabaseOptions{LocaleProvider: "icu", ICULocale: "und"}, out: []string{`localeProvider: asked "icu", the database has "libc"`, `icuLocale: asked "und", the database has ""`}},
		"OtherEncoding": {want: &v1alpha1.DatabaseOptions{Encoding: "LATIN1"}, out: []string{`encoding: asked "LATIN1", the database has "UTF8"`}},
		"BuiltinAsked":  {want: &v1alpha1.DatabaseOptions{BuiltinLocale: "C.UTF-8"}, out: []string{`builtinLocale: asked "C.UTF-8", the database has ""`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.out, OptionsDifferences(tc.want, have)); diff != "" {
				t.Error(diff)
			}
		})
	}
	if differ, reason, _ := OptionsCondition(nil); differ || reason != ReasonOptionsMatch {
		t.Errorf("OptionsCondition(nil) = %v, %s", differ, reason)
	}
	if differ, reason, msg := OptionsCondition([]string{"x"}); !differ || reason != ReasonOptionsDiffer || !strings.Contains(msg, "nothing is changed") {
		t.Errorf("OptionsCondition(x) = %v, %s, %s", differ, reason, msg)
	}
}
