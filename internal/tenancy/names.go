// Package tenancy is the provider's pure decision core: names, paths,
// ownership and conflict rules, phases. Nothing in it performs I/O.
package tenancy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// identifier is the rule for every PostgreSQL name the provider accepts. The
// CRD schema enforces the same pattern (apis/v1alpha1.IdentifierPattern); it
// is checked again here before any external call.
var identifier = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// ValidIdentifier reports whether s is an acceptable database, role or
// extension name.
func ValidIdentifier(s string) bool { return identifier.MatchString(s) }

// ValidateIdentifier returns an error naming what is wrong with s, or nil.
func ValidateIdentifier(field, s string) error {
	if !ValidIdentifier(s) {
		return fmt.Errorf("%s %q is not a valid identifier: it must match %s", field, s, identifier)
	}
	return nil
}

// reservedNames are PostgreSQL's own database and role names. Role names
// starting with pg_ are reserved by the server (SQLSTATE 42939), and so are
// public and none; a database name is refused on the same rule, because the
// login role defaults to the database name.
var reservedNames = []string{"postgres", "template0", "template1", "public", "none"}

// ValidateName checks a database or login role name: a valid identifier
// that is none of PostgreSQL's own names (pg_*, postgres, template0,
// template1, public, none).
func ValidateName(field, s string) error {
	if err := ValidateIdentifier(field, s); err != nil {
		return err
	}
	if strings.HasPrefix(s, "pg_") || slices.Contains(reservedNames, s) {
		return fmt.Errorf("%s %q is reserved: names starting with pg_ and %s are PostgreSQL's own", field, s, strings.Join(reservedNames, ", "))
	}
	return nil
}

// ValidatePath checks a KV v2 path (or mount) relative to OpenBao's API: no
// leading or trailing slash, no empty, "." or ".." segment, and no data/ or
// metadata/ API layer, which the client adds itself.
func ValidatePath(field, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s must not be empty", field)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%s %q must not start with '/'", field, p)
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("%s %q must not end with '/'", field, p)
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		switch s {
		case "":
			return fmt.Errorf("%s %q must not contain an empty segment", field, p)
		case ".", "..":
			return fmt.Errorf("%s %q must not contain a %q segment", field, p, s)
		}
	}
	if segs[0] == "data" || segs[0] == "metadata" {
		return fmt.Errorf("%s %q must not include the KV v2 %q API layer", field, p, segs[0])
	}
	return nil
}

// ValidateImportPath checks the credential record an import names against
// the tenant base path (--openbao-tenant-base-path): a path equal to it or
// under it is refused. ESO reads <tenant base>/<namespace>/... with the
// identity of that namespace, so an import's record there would be readable
// by the namespace named after its first segment below the base, and the
// provider could overwrite or delete a namespace's delivery copy. Paths are
// compared segment by segment (ValidatePath has refused empty segments), so
// "a/bc" does not lie under "a/b". OpenBao paths are case-sensitive.
//
// A path under the database base path needs no rule of its own: the own
// record of another Database carries this provider's ownership metadata
// naming that Database, and KVForeign refuses it wherever it lies; an
// import whose path holds no record yet reads nothing and writes nothing.
func ValidateImportPath(field, path, tenantBase string) error {
	p, t := strings.Split(path, "/"), strings.Split(strings.Trim(tenantBase, "/"), "/")
	if tenantBase == "" || len(p) < len(t) || !slices.Equal(p[:len(t)], t) {
		return nil
	}
	where := "is the tenant base path"
	if len(p) > len(t) {
		where = fmt.Sprintf("lies under the tenant base path, where the namespace %q reads its delivery copies with its own OpenBao identity", p[len(t)])
	}
	return fmt.Errorf("%s %q %s (--openbao-tenant-base-path %q): an import may not name a record there, and nothing was read from or written to it; "+
		"copy the record to a path outside %q (for example under --openbao-database-base-path, as <database base path>/imports/<name>), "+
		"then delete this Database (with reclaimPolicy Retain, which drops nothing) and create it again naming that path (credentialPath cannot be changed once set)", field, path, where, tenantBase, tenantBase)
}
