package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
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
// well inside SizeStatementTimeout.
const SizeBatch = 500

// SizeStatementTimeout bounds one size statement on the server
// (statement_timeout, set for its transaction only): a database with very
// many files cannot hold an admin connection for longer.
const SizeStatementTimeout = 10 * time.Second

// HookSizes is the fault-injection point before each size statement; the
// point passed to the hook is HookSizes, a colon, and the batch's
// databases joined by commas.
const HookSizes = "before measuring sizes"

// DatabaseSizes measures the databases named (qDatabaseSizes), one
// statement per SizeBatch of them: bytes by database name, for those that
// exist and the admin may measure. Any failure fails the whole call.
func (p *Pool) DatabaseSizes(ctx context.Context, databases []string) (map[string]int64, error) {
	out := make(map[string]int64, len(databases))
	for start := 0; start < len(databases); start += SizeBatch {
		if _, err := p.databaseSizes(ctx, databases[start:min(start+SizeBatch, len(databases))], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MeasureSizes runs one size statement per batch, each in its own
// transaction bounded by SizeStatementTimeout, and reports each batch's
// outcome. A statement the server fails (it timed out, or any other
// error the server reports for it) fails its batch only; the others keep
// their results. A failure that is not the statement's (the server cannot
// be reached, the pool cannot connect, ctx ended) stops the refresh: the
// batches not run are NotAttempted and problem says why. Messages name
// databases and causes, never the admin's name or a password.
func (p *Pool) MeasureSizes(ctx context.Context, batches [][]string) (outcomes []tenancy.SizeOutcome, problem string) {
	for i, b := range batches {
		if problem != "" {
			outcomes = append(outcomes, tenancy.SizeOutcome{Databases: b, NotAttempted: true})
			continue
		}
		o := tenancy.SizeOutcome{Databases: b, Sizes: make(map[string]int64, len(b))}
		statement, err := p.databaseSizes(ctx, b, o.Sizes)
		switch {
		case err == nil:
		case statement:
			o.Sizes = nil
			o.Err = sizeFailure(err)
		default:
			o.Sizes, o.NotAttempted = nil, true
			problem = fmt.Sprintf("the refresh stopped at statement %d of %d: %v", i+1, len(batches), err)
		}
		outcomes = append(outcomes, o)
	}
	return outcomes, problem
}

// sizeFailure says why a size statement failed.
func sizeFailure(err error) string {
	var pe *Error
	if errors.As(err, &pe) && pe.SQLState == "57014" {
		return fmt.Sprintf("measuring took longer than %s and was cancelled (statement_timeout): a database with very many files (tables, indexes, TOAST) takes long to measure", SizeStatementTimeout)
	}
	return err.Error()
}

// databaseSizes runs one size statement in a transaction of its own with
// SizeStatementTimeout. statement reports whether a failure was the
// statement's (the server answered it with an error, or the fault hook
// failed it) rather than the connection's.
func (p *Pool) databaseSizes(ctx context.Context, databases []string, out map[string]int64) (statement bool, err error) {
	ctx, cancel := p.withTimeout(ctx)
	defer cancel()
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return false, p.classify(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only; a failed Rollback closes the connection
	if _, err := tx.Exec(ctx, qSetLocalStatementTimeout, strconv.FormatInt(SizeStatementTimeout.Milliseconds(), 10)); err != nil {
		return isServerError(err), p.classify(err)
	}
	if p.faults != nil {
		if err := p.hook(HookSizes + ":" + strings.Join(databases, ",")); err != nil {
			return true, p.classify(err)
		}
	}
	rows, err := tx.Query(ctx, qDatabaseSizes, databases)
	if err != nil {
		return isServerError(err), p.classify(err)
	}
	var name string
	var size int64
	if _, err = pgx.ForEachRow(rows, []any{&name, &size}, func() error {
		out[name] = size
		return nil
	}); err != nil {
		return isServerError(err), p.classify(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return isServerError(err), p.classify(err)
	}
	return false, nil
}

// isServerError: the server answered with an error (a SQLSTATE), so the
// connection works and the statement failed.
func isServerError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}
