// Package options holds the provider's deployment configuration: the values
// that come from command-line flags (set through a DeploymentRuntimeConfig),
// never from custom resources.
package options

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// OpenBao configures where tenant credentials are stored.
type OpenBao struct {
	// Address the provider uses to reach OpenBao.
	Address string
	// ConsumerAddress is the address consumers (ESO, VMs) use; it only
	// appears in status.atProvider.credential.openBaoURL. Defaults to Address.
	ConsumerAddress string
	// AuthMount is the mount of the Kubernetes auth method.
	AuthMount string
	// AuthRole is the Kubernetes auth role the provider logs in as.
	AuthRole string
	// KVMount is the KV v2 mount holding tenant records.
	KVMount string
	// TenantBasePath is the path under KVMount below which records are
	// derived as <base>/<namespace>/<name>.
	TenantBasePath string
	// TokenFile, for local development only, replaces Kubernetes auth with a
	// token read from a file.
	TokenFile string
	// ServiceAccountTokenFile is the projected service-account token used for
	// Kubernetes auth.
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
}

// Defaults of the flags.
const (
	DefaultNamespace       = "crossplane-system"
	DefaultAuthMount       = "kubernetes"
	DefaultKVMount         = "kv"
	DefaultTenantBasePath  = "postgresql-tenants"
	DefaultSATokenFile     = "/var/run/secrets/kubernetes.io/serviceaccount/token"
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
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace must not be empty (it defaults to $POD_NAMESPACE)"))
	}
	if o.OpenBao.Address == "" {
		errs = append(errs, errors.New(errOpenBaoAddrRequired))
	} else if err := validURL(o.OpenBao.Address); err != nil {
		errs = append(errs, fmt.Errorf("--openbao-address: %w", err))
	}
	if o.OpenBao.ConsumerAddress != "" {
		if err := validURL(o.OpenBao.ConsumerAddress); err != nil {
			errs = append(errs, fmt.Errorf("--openbao-consumer-address: %w", err))
		}
	}
	if o.OpenBao.TokenFile == "" && o.OpenBao.AuthRole == "" {
		errs = append(errs, errors.New("--openbao-auth-role is required for Kubernetes auth (or --openbao-token-file, for local development only)"))
	}
	for flag, p := range map[string]string{
		"--openbao-auth-mount":       o.OpenBao.AuthMount,
		"--openbao-kv-mount":         o.OpenBao.KVMount,
		"--openbao-tenant-base-path": o.OpenBao.TenantBasePath,
	} {
		if err := tenancy.ValidatePath(flag, p); err != nil {
			errs = append(errs, err)
		}
	}
	if o.CABundle != "" {
		if _, err := os.Stat(o.CABundle); err != nil {
			errs = append(errs, fmt.Errorf("--ca-bundle: %w", err))
		}
	}
	return errors.Join(errs...)
}

func validURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q must be an http:// or https:// URL", s)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" {
		return fmt.Errorf("%q must be scheme://host[:port] without credentials or query", s)
	}
	return nil
}
