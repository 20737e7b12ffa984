package tenancy

import (
	"fmt"
	"slices"
	"strings"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// Database options: the encoding and locale a new database is created
// with, chosen from the Database's request, the config's defaults and
// template0, within the config's allow-list and what the server supports.

// Reasons and the condition of database options.
const (
	// ReasonDatabaseOptionsNotAllowed: the Database asks an option value
	// that is neither the config's default nor in its allow-list.
	ReasonDatabaseOptionsNotAllowed = "DatabaseOptionsNotAllowed"
	// ReasonDatabaseOptionsUnsupported: the server cannot create a
	// database with the options asked (the provider is too new for its
	// major, or it lacks the encoding or locale).
	ReasonDatabaseOptionsUnsupported = "DatabaseOptionsUnsupported"

	// ConditionOptionsDiffer is True when the database's encoding or
	// locale differ from spec.forProvider.options (an import, or a
	// database changed behind the provider's back).
	ConditionOptionsDiffer = "OptionsDiffer"
	// ReasonOptionsDiffer and ReasonOptionsMatch are its reasons.
	ReasonOptionsDiffer = "OptionsDiffer"
	ReasonOptionsMatch  = "OptionsMatch"
)

// OptionsVerdict is what a new database is created with, or why not.
type OptionsVerdict struct {
	// Effective are the options asked of the server: the Database's, else
	// the config's defaults; an empty field takes template0's setting.
	Effective v1alpha1.DatabaseOptions
	// Reason and Message are set when the options are refused.
	Reason, Message string
}

// ResolveOptions merges the Database's options over the config's
// defaults and checks them against the config's allow-list, the locale
// providers of the server's major and their consistency. Nothing here
// asks the server; OptionsUnsupported judges its answers.
func ResolveOptions(requested *v1alpha1.DatabaseOptions, policy *v1alpha1.DatabaseOptionsPolicy, major int) OptionsVerdict {
	var req, def v1alpha1.DatabaseOptions
	if requested != nil {
		req = *requested
	}
	var allow v1alpha1.AllowedDatabaseOptions
	if policy != nil {
		if policy.Defaults != nil {
			def = *policy.Defaults
		}
		if policy.Allowed != nil {
			allow = *policy.Allowed
		}
	}
	v := OptionsVerdict{Effective: effectiveOptions(req, def)}
	if denied := deniedOptions(req, def, allow); len(denied) > 0 {
		v.Reason = ReasonDatabaseOptionsNotAllowed
		v.Message = "spec.forProvider.options asks what the ClusterProviderConfig does not allow: " + strings.Join(denied, "; ") +
			"; a platform admin may add the values to spec.databaseOptions.allowed of the ClusterProviderConfig; nothing was created"
		return v
	}
	if bad := unusableOptions(req, v.Effective, major); len(bad) > 0 {
		v.Reason = ReasonDatabaseOptionsUnsupported
		v.Message = "the database options cannot be used: " + strings.Join(bad, "; ") + "; nothing was created"
	}
	return v
}

// effectiveOptions are the options asked of the server: each of the
// Database's, else the config's default.
func effectiveOptions(req, def v1alpha1.DatabaseOptions) v1alpha1.DatabaseOptions {
	eff := v1alpha1.DatabaseOptions{
		Encoding:       pick(req.Encoding, def.Encoding),
		LocaleProvider: v1alpha1.LocaleProvider(pick(string(req.LocaleProvider), string(def.LocaleProvider))),
		Locale:         pick(req.Locale, def.Locale),
	}
	// A provider's own locale comes with that provider: the default's
	// only when the provider in effect is the default's.
	switch eff.LocaleProvider {
	case v1alpha1.LocaleProviderICU:
		eff.ICULocale = req.ICULocale
		if eff.ICULocale == "" && def.LocaleProvider == v1alpha1.LocaleProviderICU {
			eff.ICULocale = def.ICULocale
		}
	case v1alpha1.LocaleProviderBuiltin:
		eff.BuiltinLocale = req.BuiltinLocale
		if eff.BuiltinLocale == "" && def.LocaleProvider == v1alpha1.LocaleProviderBuiltin {
			eff.BuiltinLocale = def.BuiltinLocale
		}
	}
	return eff
}

// deniedOptions lists the requested option values that are neither the
// config's default nor in its allow-list.
func deniedOptions(req, def v1alpha1.DatabaseOptions, allow v1alpha1.AllowedDatabaseOptions) []string {
	var denied []string
	deny := func(field, value, dflt string, allowed []string) {
		if value == "" || strings.EqualFold(value, dflt) || slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, value) }) {
			return
		}
		denied = append(denied, fmt.Sprintf("%s %q (allowed: %s)", field, value, allowedList(dflt, allowed)))
	}
	providers := make([]string, 0, len(allow.LocaleProviders))
	for _, p := range allow.LocaleProviders {
		providers = append(providers, string(p))
	}
	deny("encoding", req.Encoding, def.Encoding, allow.Encodings)
	deny("localeProvider", string(req.LocaleProvider), string(def.LocaleProvider), providers)
	deny("locale", req.Locale, def.Locale, allow.Locales)
	defICU, defBuiltin := "", ""
	switch def.LocaleProvider {
	case v1alpha1.LocaleProviderICU:
		defICU = def.ICULocale
	case v1alpha1.LocaleProviderBuiltin:
		defBuiltin = def.BuiltinLocale
	}
	deny("icuLocale", req.ICULocale, defICU, allow.ICULocales)
	deny("builtinLocale", req.BuiltinLocale, defBuiltin, allow.BuiltinLocales)
	return denied
}

// unusableOptions lists why the effective options cannot be used: a
// provider's locale asked without that provider, or a locale provider the
// server's major lacks or that lacks its locale.
func unusableOptions(req, eff v1alpha1.DatabaseOptions, major int) []string {
	var bad []string
	switch {
	case req.ICULocale != "" && eff.LocaleProvider != v1alpha1.LocaleProviderICU:
		bad = append(bad, "icuLocale needs localeProvider icu")
	case req.BuiltinLocale != "" && eff.LocaleProvider != v1alpha1.LocaleProviderBuiltin:
		bad = append(bad, "builtinLocale needs localeProvider builtin")
	}
	switch eff.LocaleProvider {
	case v1alpha1.LocaleProviderICU:
		if major < 15 {
			bad = append(bad, fmt.Sprintf("localeProvider icu needs PostgreSQL 15 or later; the server runs %d", major))
		} else if eff.ICULocale == "" {
			bad = append(bad, "localeProvider icu needs an icuLocale (in spec.forProvider.options or the config's defaults)")
		}
	case v1alpha1.LocaleProviderBuiltin:
		if major < 17 {
			bad = append(bad, fmt.Sprintf("localeProvider builtin needs PostgreSQL 17 or later; the server runs %d", major))
		} else if eff.BuiltinLocale == "" {
			bad = append(bad, "localeProvider builtin needs a builtinLocale (in spec.forProvider.options or the config's defaults)")
		}
	}
	return bad
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func allowedList(dflt string, allowed []string) string {
	var all []string
	if dflt != "" {
		all = append(all, dflt+" (the default)")
	} else {
		all = append(all, "template0's (the default)")
	}
	return strings.Join(append(all, allowed...), ", ")
}

// OptionsSupport is what the server answered about the effective options
// (true when it has them, or when they were not asked).
type OptionsSupport struct {
	Encoding, Locale, ICULocale, BuiltinLocale bool
}

// OptionsUnsupported returns the Message refusing eff on a server that
// answered s, or "" when the server supports them.
func OptionsUnsupported(eff v1alpha1.DatabaseOptions, s OptionsSupport) string {
	var bad []string
	if !s.Encoding {
		bad = append(bad, fmt.Sprintf("the server knows no encoding %q", eff.Encoding))
	}
	if !s.Locale {
		l := eff.Locale
		if l == "" {
			bad = append(bad, fmt.Sprintf("template0's locale does not fit the encoding %q: ask a locale that does", eff.Encoding))
		} else {
			bad = append(bad, fmt.Sprintf("the server has no libc locale %q usable with the encoding %s (pg_collation lists those it has)", l, pick(eff.Encoding, "UTF8")))
		}
	}
	if !s.ICULocale {
		bad = append(bad, fmt.Sprintf("the server has no ICU locale %q (pg_collation lists its ICU collations)", eff.ICULocale))
	}
	if !s.BuiltinLocale {
		bad = append(bad, fmt.Sprintf("the server has no builtin locale %q (pg_collation lists its builtin collations)", eff.BuiltinLocale))
	}
	if len(bad) == 0 {
		return ""
	}
	return "the server does not support the database options: " + strings.Join(bad, "; ") + "; nothing was created"
}

// OptionsDifferences lists, one line each, where the database's options
// (have) differ from those the Database asks (want); only the options it
// asks are compared. Locales compare without case and '-' (C.UTF-8 and
// C.utf8 name the same locale); encodings without case.
func OptionsDifferences(want *v1alpha1.DatabaseOptions, have v1alpha1.DatabaseOptionsObservation) []string {
	if want == nil {
		return nil
	}
	var d []string
	diff := func(field, w, h string) {
		if w != "" && normLocale(w) != normLocale(h) {
			d = append(d, fmt.Sprintf("%s: asked %q, the database has %q", field, w, h))
		}
	}
	diff("encoding", want.Encoding, have.Encoding)
	diff("localeProvider", string(want.LocaleProvider), string(have.LocaleProvider))
	diff("locale (LC_COLLATE)", want.Locale, have.Collate)
	diff("locale (LC_CTYPE)", want.Locale, have.Ctype)
	diff("icuLocale", want.ICULocale, have.ICULocale)
	diff("builtinLocale", want.BuiltinLocale, have.BuiltinLocale)
	return d
}

func normLocale(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "")) }

// OptionsCondition is the OptionsDiffer condition's status, reason and
// message for the differences found.
func OptionsCondition(differences []string) (bool, string, string) {
	if len(differences) == 0 {
		return false, ReasonOptionsMatch, "the database has the encoding and locale spec.forProvider.options asks (or it asks none)"
	}
	return true, ReasonOptionsDiffer, "the database's options differ from spec.forProvider.options: " + strings.Join(differences, "; ") +
		"; nothing is changed (PostgreSQL cannot change a database's encoding or locale): correct spec.forProvider.options on a new Database, or keep the database as it is"
}
