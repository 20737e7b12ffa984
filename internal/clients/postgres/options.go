package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// CreateOptions are the encoding and locale a Database asks for its new
// database; an empty field is not asked (template0's setting applies).
type CreateOptions struct {
	Encoding string
	// Provider is "libc", "icu" or "builtin".
	Provider      string
	Locale        string
	ICULocale     string
	BuiltinLocale string
}

// over returns template0's locale t with what o asks instead: the
// encoding; the libc locale (LC_COLLATE and LC_CTYPE); the provider with
// its own locale (template0's ICU rules apply only to template0's own ICU
// locale).
func (o CreateOptions) over(t Locale) Locale {
	l := t
	if o.Encoding != "" {
		l.Encoding = o.Encoding
	}
	if o.Locale != "" {
		l.Collate, l.Ctype = o.Locale, o.Locale
	}
	switch o.Provider {
	case "libc":
		l.Provider, l.Locale, l.ICURules = "c", "", ""
	case "icu":
		if t.Provider != "i" || o.ICULocale != t.Locale {
			l.ICURules = ""
		}
		l.Provider, l.Locale = "i", o.ICULocale
	case "builtin":
		l.Provider, l.Locale, l.ICURules = "b", o.BuiltinLocale, ""
	}
	return l
}

// OptionsSupport is what the server says of the options a Database asks:
// whether it knows the encoding and has each asked locale.
type OptionsSupport struct {
	Encoding, Locale, ICULocale, BuiltinLocale bool
}

// CheckOptions asks the server whether it supports o (qOptionsSupport).
// When an encoding is asked without a libc locale, template0's LC_COLLATE
// is checked against that encoding.
func (p *Pool) CheckOptions(ctx context.Context, o CreateOptions) (OptionsSupport, error) {
	var s OptionsSupport
	major, err := p.Major(ctx)
	if err != nil {
		return s, err
	}
	libc := o.Locale
	if libc == "" && o.Encoding != "" {
		t, err := p.databaseLocale(ctx, major)
		if err != nil {
			return s, err
		}
		libc = t.Collate
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	err = p.pool.QueryRow(ctx, qOptionsSupportFor(major), nullable(o.Encoding), nullable(libc), nullable(o.ICULocale), nullable(o.BuiltinLocale)).
		Scan(&s.Encoding, &s.Locale, &s.ICULocale, &s.BuiltinLocale)
	if err != nil {
		return s, p.classify(err)
	}
	return s, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// DatabaseOptions are the encoding and locale a database has.
type DatabaseOptions struct {
	Encoding string
	// Provider is "libc", "icu" or "builtin".
	Provider       string
	Collate, Ctype string
	// Locale is the ICU or builtin locale.
	Locale string
}

// ReadDatabaseOptions reads database's encoding and locale; nil when it
// does not exist.
func (p *Pool) ReadDatabaseOptions(ctx context.Context, database string) (*DatabaseOptions, error) {
	major, err := p.Major(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	var d DatabaseOptions
	var prov string
	var loc *string
	err = p.pool.QueryRow(ctx, qDatabaseLocaleFor(major), database).Scan(&d.Encoding, &d.Collate, &d.Ctype, &prov, &loc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, p.classify(err)
	}
	d.Provider = map[string]string{"c": "libc", "i": "icu", "b": "builtin"}[prov]
	if d.Provider == "" {
		d.Provider = prov
	}
	if d.Provider != "libc" {
		d.Locale = deref(loc)
	}
	return &d, nil
}

// CreateDatabaseWith is CreateDatabase with the options o asks over
// template0's (CreateOptions.over).
func (p *Pool) CreateDatabaseWith(ctx context.Context, database, owner string, o CreateOptions) error {
	d, r, err := dbAndRole(database, owner)
	if err != nil {
		return err
	}
	major, err := p.Major(ctx)
	if err != nil {
		return err
	}
	t, err := p.databaseLocale(ctx, major)
	if err != nil {
		return err
	}
	opts, err := databaseOptions(o.over(t), major)
	if err != nil {
		return &Error{Class: ClassInvalid, msg: fmt.Sprintf("cannot state the encoding and locale of the new database: %v; the provider creates every database from template0 with template0's locale unless the Database asks another, so template0's locale settings must be valid", err)}
	}
	return p.asMember(ctx, owner, execOn(fmt.Sprintf(qCreateDatabase, d, r, opts)))
}

// SizeBatch is how many databases one size statement measures: the
// server stats every file of each (about 4.5 ms a database copied from
// template0 on a loaded 2-core machine, performance.md), so a batch stays
// well inside the pool's call timeout.
const SizeBatch = 500

// DatabaseSizes measures the databases named (qDatabaseSizes), one
// statement per SizeBatch of them: bytes by database name, for those that
// exist and the admin may measure.
func (p *Pool) DatabaseSizes(ctx context.Context, databases []string) (map[string]int64, error) {
	out := make(map[string]int64, len(databases))
	for start := 0; start < len(databases); start += SizeBatch {
		if err := p.databaseSizes(ctx, databases[start:min(start+SizeBatch, len(databases))], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *Pool) databaseSizes(ctx context.Context, databases []string, out map[string]int64) error {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	rows, err := p.pool.Query(ctx, qDatabaseSizes, databases)
	if err != nil {
		return p.classify(err)
	}
	var name string
	var size int64
	_, err = pgx.ForEachRow(rows, []any{&name, &size}, func() error {
		out[name] = size
		return nil
	})
	if err != nil {
		return p.classify(err)
	}
	return nil
}
