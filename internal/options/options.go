// Package options holds the provider's deployment configuration: the values
// that come from command-line flags (set through a DeploymentRuntimeConfig),
// never from custom resources.
package options

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// OpenBao configures where tenant credentials are stored.
type OpenBao struct {
	// Address the provider uses to reach OpenBao: https:// unless
	// AllowInsecureHTTP.
	Address string
	// AllowInsecureHTTP accepts http:// addresses: local development only.
	AllowInsecureHTTP bool
	// ConsumerAddress is the address consumers (ESO, VMs) use; it only
	// appears in status.atProvider.credential.openBaoURL. Defaults to Address.
	ConsumerAddress string
	// AuthMount is the mount of the Kubernetes auth method.
	AuthMount string
	// AuthRole is the Kubernetes auth role the provider logs in as.
	AuthRole string
	// KVMount is the KV v2 mount holding tenant records.
	KVMount string
	// DatabaseBasePath is the path under KVMount below which a Database's
	// own credential record lives, keyed by the Database's name:
	// <base>/<database-name>. Only the provider reads and writes it.
	DatabaseBasePath string
	// TenantBasePath is the path under KVMount below which the delivery
	// copy of a bound Database's credential lives, for the Tenant's
	// namespace to read: <base>/<namespace>/<tenant-name>. It exists only
	// while the binding does.
	TenantBasePath string
	// TokenFile, for local development only, replaces Kubernetes auth with a
	// token read from a file.
	TokenFile string
	// ServiceAccountTokenFile is the projected service-account token used for
	// Kubernetes auth; its audience is the OpenBao role's (not the
	// kube-apiserver's), so it is useless against the API server and the
	// API server's token is useless against OpenBao.
	ServiceAccountTokenFile string
}

// Options is the whole deployment configuration.
type Options struct {
	// Namespace is the provider's own namespace. The admin Secret of a
	// ClusterProviderConfig must live here.
	Namespace string
	// CABundle is a PEM file of CAs trusted for PostgreSQL and OpenBao TLS.
	CABundle string
	OpenBao  OpenBao
	// LoginCheckInterval is how often a Ready Database reads its
	// credential record and proves it by logging in as its role when
	// nothing the catalog shows has changed (0: at every poll).
	LoginCheckInterval time.Duration
	// SizeRefreshInterval is how often, at most, the sizes of one
	// config's databases are measured (one statement per config); 0 is
	// the default, 5 minutes.
	SizeRefreshInterval time.Duration
	// MinPollInterval is the shortest poll interval a resource may ask
	// for with the crossplane.io/poll-interval annotation; shorter values
	// are raised to it (0: no floor).
	MinPollInterval time.Duration
}

// DefaultMinPollInterval is MinPollInterval's default.
const DefaultMinPollInterval = 10 * time.Second

// DefaultLoginCheckInterval is LoginCheckInterval's default: one login per
// Database per hour, where logging in at every poll made 60.
const DefaultLoginCheckInterval = time.Hour

// Defaults of the flags.
const (
	DefaultNamespace      = "crossplane-system"
	DefaultAuthMount      = "kubernetes"
	DefaultKVMount        = "kv"
	DefaultTenantBasePath = "postgresql-tenants"
	// DefaultDatabaseBasePath is where Databases' own records live.
	DefaultDatabaseBasePath = "postgresql-databases"
	// DefaultSATokenFile is where examples/provider/runtime-config.yaml
	// mounts a projected service-account token with audience
	// DefaultOpenBaoAudience.
	DefaultSATokenFile = "/var/run/secrets/openbao/serviceaccount/token" //nolint:gosec // the path of a mounted token, not a token
	// DefaultOpenBaoAudience is the audience of that token, and the
	// audience the OpenBao Kubernetes auth role should require.
	DefaultOpenBaoAudience = "openbao"
	EnvPodNamespace        = "POD_NAMESPACE"
	errOpenBaoAddrRequired = "--openbao-address is required: the provider stores every tenant credential in OpenBao"
)

// DefaultNamespaceFromEnv returns POD_NAMESPACE when set, else the default.
func DefaultNamespaceFromEnv() string {
	if ns := os.Getenv(EnvPodNamespace); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// Complete fills derived defaults.
func (o *Options) Complete() {
	if o.OpenBao.ConsumerAddress == "" {
		o.OpenBao.ConsumerAddress = o.OpenBao.Address
	}
	o.OpenBao.Address = strings.TrimRight(o.OpenBao.Address, "/")
	o.OpenBao.ConsumerAddress = strings.TrimRight(o.OpenBao.ConsumerAddress, "/")
}

// Validate returns every problem with the options at once, each naming the
// flag to fix.
func (o *Options) Validate() error {
	var errs []error
	if o.MinPollInterval < 0 {
		errs = append(errs, errors.New("--min-poll-interval must not be negative"))
	}
	if o.LoginCheckInterval < 0 {
		errs = append(errs, errors.New("--login-check-interval must not be negative (0: log in at every poll)"))
	}
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace must not be empty (it defaults to $POD_NAMESPACE)"))
	}
	if o.OpenBao.Address == "" {
		errs = append(errs, errors.New(errOpenBaoAddrRequired))
	} else if err := validURL(o.OpenBao.Address, o.OpenBao.AllowInsecureHTTP); err != nil {
		errs = append(errs, fmt.Errorf("--openbao-address: %w", err))
	}
	if o.OpenBao.ConsumerAddress != "" {
		if err := validURL(o.OpenBao.ConsumerAddress, o.OpenBao.AllowInsecureHTTP); err != nil {
			errs = append(errs, fmt.Errorf("--openbao-consumer-address: %w", err))
		}
	}
	if o.OpenBao.TokenFile == "" && o.OpenBao.AuthRole == "" {
		errs = append(errs, errors.New("--openbao-auth-role is required for Kubernetes auth (or --openbao-token-file, for local development only)"))
	}
	if o.OpenBao.TokenFile == "" && o.OpenBao.ServiceAccountTokenFile == "" {
		errs = append(errs, errors.New("--openbao-sa-token-file must not be empty: it names the projected service-account token (audience of the OpenBao role) used for Kubernetes auth"))
	}
	for flag, p := range map[string]string{
		"--openbao-auth-mount":         o.OpenBao.AuthMount,
		"--openbao-kv-mount":           o.OpenBao.KVMount,
		"--openbao-tenant-base-path":   o.OpenBao.TenantBasePath,
		"--openbao-database-base-path": o.OpenBao.DatabaseBasePath,
	} {
		if err := tenancy.ValidatePath(flag, p); err != nil {
			errs = append(errs, err)
		}
	}
	if err := overlappingBasePaths(o.OpenBao.TenantBasePath, o.OpenBao.DatabaseBasePath); err != nil {
		errs = append(errs, err)
	}
	if o.CABundle != "" {
		if _, err := os.Stat(o.CABundle); err != nil {
			errs = append(errs, fmt.Errorf("--ca-bundle: %w", err))
		}
	}
	return errors.Join(errs...)
}

// validURL accepts https://host[:port][/path], and http:// only when
// allowHTTP (--openbao-allow-insecure-http, local development only).
func validURL(s string, allowHTTP bool) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	case u.Scheme == "http":
		return fmt.Errorf("%q is http://: OpenBao addresses must be https:// (the provider's OpenBao token and every tenant credential would cross the network in clear); --openbao-allow-insecure-http allows http for local development only", s)
	default:
		return fmt.Errorf("%q must be an https:// URL", s)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" {
		return fmt.Errorf("%q must be scheme://host[:port] without credentials or query", s)
	}
	return nil
}

// overlappingBasePaths refuses a tenant base path and a database base path
// of which one is the other or lies under it. ESO reads
// <tenant base>/<namespace>/... for a namespace: with the database base
// path at <tenant base>/x, a namespace named x would read every Database's
// own record; with the tenant base path under the database base path, or
// equal to it, delivery copies and Databases' own records would share one
// subtree, and a Database's name would decide what a namespace can read.
// Paths are compared segment by segment after normalisation (leading,
// trailing and repeated slashes ignored), so "a/b" lies under "a" and
// "a/b/", but not under "a/bc". OpenBao paths are case-sensitive.
func overlappingBasePaths(tenant, database string) error {
	t, d := pathSegments(tenant), pathSegments(database)
	if len(t) == 0 || len(d) == 0 {
		return nil // reported as empty by ValidatePath
	}
	const fix = "choose two base paths neither of which contains the other (the defaults are %q and %q)"
	fixed := fmt.Sprintf(fix, DefaultTenantBasePath, DefaultDatabaseBasePath)
	switch {
	case slices.Equal(t, d):
		return fmt.Errorf("--openbao-tenant-base-path %q and --openbao-database-base-path %q are the same path: namespaces' delivery copies and Databases' own records would share one subtree, and a Database's name would decide what a namespace can read; %s", tenant, database, fixed)
	case hasPrefix(d, t):
		return fmt.Errorf("--openbao-database-base-path %q lies under --openbao-tenant-base-path %q: a namespace named %q would read every Database's own record (ESO reads <tenant base path>/<namespace>/...); %s", database, tenant, d[len(t)], fixed)
	case hasPrefix(t, d):
		return fmt.Errorf("--openbao-tenant-base-path %q lies under --openbao-database-base-path %q: namespaces' delivery copies would sit among Databases' own records, and a Database named %q would own the path above every delivery copy; %s", tenant, database, t[len(d)], fixed)
	}
	return nil
}

// pathSegments splits a KV path into its non-empty segments.
func pathSegments(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// hasPrefix is true when the segments of p start with those of prefix (and
// p is longer).
func hasPrefix(p, prefix []string) bool {
	return len(p) > len(prefix) && slices.Equal(p[:len(prefix)], prefix)
}
