// Package openbao is the provider's door to OpenBao: Kubernetes-auth login
// with token renewal, and the KV v2 operations a tenant credential needs
// (read, create with check-and-set 0 and ownership metadata, restore, delete
// of every version). Every path is validated before it is used.
//
// The client is configured from Options only: no BAO_* or VAULT_* variable
// (address, agent address, TLS, CA, token, namespace, proxy, wrapping,
// retries, rate limit) and no HTTP(S)_PROXY changes where it connects, what
// it trusts or what it sends.
package openbao

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/openbao/openbao/api/v2"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Options configure a Client.
type Options struct {
	// Address of OpenBao, e.g. https://openbao.openbao.svc:8200. Only
	// https:// unless AllowInsecureHTTP.
	Address string
	// AllowInsecureHTTP accepts an http:// Address: local development only
	// (the login token and every credential would cross the network in
	// clear).
	AllowInsecureHTTP bool
	// CABundleFile is a PEM file of CAs trusted for OpenBao's TLS: the only
	// CAs trusted when set; the system roots when empty.
	CABundleFile string
	// AuthMount and AuthRole of the Kubernetes auth method.
	AuthMount, AuthRole string
	// ServiceAccountTokenFile is the projected token used to log in; it is
	// re-read at every login, so a rotated token is picked up.
	ServiceAccountTokenFile string
	// TokenFile, for local development only, holds an OpenBao token used
	// instead of Kubernetes auth.
	TokenFile string
	// KVMount is the KV v2 mount of tenant records.
	KVMount string
	// Timeout bounds every request.
	Timeout time.Duration
}

// Errors a caller acts on.
var (
	// ErrCASMismatch: a check-and-set write lost (the record exists or
	// changed since it was read). Nothing was written.
	ErrCASMismatch = errors.New("check-and-set mismatch: the record changed or already exists")
)

// Record is a KV v2 record as read.
type Record struct {
	// Data of the current version; nil when the path has metadata only
	// (no version, or the current version deleted).
	Data map[string]string
	// Version is the current version (0 when none).
	Version int
	// Owner is the record's custom_metadata.
	Owner map[string]string
	// Created is when the current version was written (zero when
	// unknown).
	Created time.Time
}

// Client talks to one OpenBao.
type Client struct {
	opts Options
	// anon logs in; it never carries a token.
	anon *api.Client
	// api makes every other request with the token set under mu.
	api *api.Client

	mu     sync.Mutex
	token  string
	expiry time.Time     // zero: does not expire
	ttl    time.Duration // the token's TTL when last set
	renew  bool
}

// New returns a client. It does not log in until the first call.
func New(o Options) (*Client, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if err := CheckAddress(o.Address, o.AllowInsecureHTTP); err != nil {
		return nil, err
	}
	if err := tenancy.ValidatePath("KV mount", o.KVMount); err != nil {
		return nil, err
	}
	if o.TokenFile == "" {
		if err := tenancy.ValidatePath("auth mount", o.AuthMount); err != nil {
			return nil, err
		}
		if o.AuthRole == "" {
			return nil, errors.New("an OpenBao Kubernetes auth role is required")
		}
		if o.ServiceAccountTokenFile == "" {
			return nil, errors.New("a service-account token file is required for OpenBao Kubernetes auth")
		}
	}
	anon, err := newAPIClient(o)
	if err != nil {
		return nil, err
	}
	c, err := newAPIClient(o)
	if err != nil {
		return nil, err
	}
	return &Client{opts: o, anon: anon, api: c}, nil
}

// CheckAddress accepts an https:// OpenBao address, or an http:// one only
// when allowInsecureHTTP (local development).
func CheckAddress(address string, allowInsecureHTTP bool) error {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the OpenBao address %q is not a scheme://host[:port] URL", address)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowInsecureHTTP {
			return nil
		}
		return fmt.Errorf("the OpenBao address %q is http://: the provider's OpenBao token and every tenant credential would cross the network in clear; use https:// (plain http is only for local development, and must be allowed explicitly)", address)
	default:
		return fmt.Errorf("the OpenBao address %q must be an https:// URL", address)
	}
}

// newAPIClient builds an API client from o alone. api.DefaultConfig and
// api.Client.Clone read the environment (BAO_ADDR, BAO_AGENT_ADDR,
// BAO_SKIP_VERIFY, BAO_CACERT, BAO_TOKEN, BAO_NAMESPACE, BAO_WRAP_TTL,
// proxies, ...), so neither is ever used: the config starts from
// api.NewConfig (DisableEnvironment), and every client is built here.
func newAPIClient(o Options) (*api.Client, error) {
	cfg := api.NewConfig()
	if cfg.Error != nil {
		return nil, cfg.Error
	}
	if !cfg.DisableEnvironment {
		return nil, errors.New("the OpenBao API config reads the environment")
	}
	cfg.Address = o.Address
	cfg.AgentAddress = ""
	cfg.Timeout = o.Timeout
	cfg.MaxRetries = 0
	cfg.Limiter = nil
	cfg.SRVLookup = false
	tr, ok := cfg.HttpClient.Transport.(*http.Transport)
	if !ok {
		return nil, errors.New("unexpected HTTP transport in the OpenBao API config")
	}
	// Connect to Address itself, never through a proxy named by
	// HTTP_PROXY/HTTPS_PROXY (cleanhttp's default).
	tr.Proxy = nil
	if o.CABundleFile != "" {
		if err := cfg.ConfigureTLS(&api.TLSConfig{CACert: o.CABundleFile}); err != nil {
			return nil, fmt.Errorf("cannot use the CA bundle for OpenBao: %w", err)
		}
	}
	if tc := tr.TLSClientConfig; tc == nil || tc.InsecureSkipVerify {
		return nil, errors.New("the OpenBao TLS config does not verify the server")
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	c.ClearToken()
	c.ClearNamespace()
	// Never ask for response wrapping (BAO_WRAP_TTL is ignored anyway).
	c.SetWrappingLookupFunc(func(string, string) string { return "" })
	return c, nil
}

// ConsumerURL returns <consumerAddress>/v1/<mount>/data/<path>.
func ConsumerURL(consumerAddress, mount, path string) string {
	return strings.TrimRight(consumerAddress, "/") + "/v1/" + mount + "/data/" + path
}

// login obtains a token (Kubernetes auth, or the dev token file).
func (c *Client) login(ctx context.Context) error {
	if c.opts.TokenFile != "" {
		b, err := os.ReadFile(c.opts.TokenFile)
		if err != nil {
			return fmt.Errorf("cannot read the OpenBao token file: %w", err)
		}
		c.token, c.expiry, c.renew = strings.TrimSpace(string(b)), time.Time{}, false
		c.api.SetToken(c.token)
		return nil
	}
	jwt, err := os.ReadFile(c.opts.ServiceAccountTokenFile)
	if err != nil {
		return fmt.Errorf("cannot read the service-account token for OpenBao login (a projected token with the audience of the OpenBao role): %w", err)
	}
	s, err := c.anon.Logical().WriteWithContext(ctx, "auth/"+c.opts.AuthMount+"/login", map[string]any{
		"role": c.opts.AuthRole,
		"jwt":  strings.TrimSpace(string(jwt)),
	})
	if err != nil {
		return fmt.Errorf("OpenBao Kubernetes auth login (mount %s, role %s) failed: %w", c.opts.AuthMount, c.opts.AuthRole, scrub(err))
	}
	if s == nil || s.Auth == nil || s.Auth.ClientToken == "" {
		return errors.New("OpenBao Kubernetes auth login returned no token")
	}
	c.setToken(s.Auth.ClientToken, s.Auth.LeaseDuration, s.Auth.Renewable)
	return nil
}

func (c *Client) setToken(tok string, ttlSeconds int, renewable bool) {
	c.token, c.renew = tok, renewable
	c.api.SetToken(tok)
	c.ttl = time.Duration(ttlSeconds) * time.Second
	if ttlSeconds > 0 {
		c.expiry = time.Now().Add(c.ttl)
	} else {
		c.expiry = time.Time{}
	}
}

// ensureToken makes sure a token with time left is set: it renews a
// renewable token in the last third of its life and logs in again when
// renewal is refused or the token is gone.
func (c *Client) ensureToken(ctx context.Context) (*api.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == "" {
		if err := c.login(ctx); err != nil {
			return nil, err
		}
	} else if !c.expiry.IsZero() {
		left := time.Until(c.expiry)
		if left < time.Minute || (c.renew && left < c.ttl/3) {
			if !c.renewSelf(ctx) {
				if err := c.login(ctx); err != nil {
					return nil, err
				}
			}
		}
	}
	return c.api, nil
}

func (c *Client) renewSelf(ctx context.Context) bool {
	if !c.renew {
		return false
	}
	s, err := c.api.Auth().Token().RenewSelfWithContext(ctx, 0)
	if err != nil || s == nil || s.Auth == nil {
		return false
	}
	c.setToken(c.token, s.Auth.LeaseDuration, s.Auth.Renewable)
	return true
}

// forget drops the token after a permission error, so the next call logs
// in again (the token may have been revoked).
func (c *Client) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.token = ""
}

// do runs fn with a logged-in client, retrying once after a fresh login
// when OpenBao answers 403 (a revoked or expired token).
func (c *Client) do(ctx context.Context, fn func(cl *api.Client) error) error {
	for attempt := 0; ; attempt++ {
		cl, err := c.ensureToken(ctx)
		if err != nil {
			return err
		}
		err = fn(cl)
		var re *api.ResponseError
		if attempt == 0 && errors.As(err, &re) && re.StatusCode == 403 {
			c.forget()
			continue
		}
		return err
	}
}

func (c *Client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.Timeout)
}

// Read returns the record at path, or nil when nothing (no data, no
// metadata) is there. One request when the record has a current version.
func (c *Client) Read(ctx context.Context, path string) (*Record, error) {
	if err := tenancy.ValidatePath("credential path", path); err != nil {
		return nil, err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	var rec *Record
	err := c.do(ctx, func(cl *api.Client) error {
		kv := cl.KVv2(c.opts.KVMount)
		s, err := kv.Get(ctx, path)
		if err == nil {
			rec = &Record{Data: stringMap(s.Data), Owner: stringMap(s.CustomMetadata)}
			if s.VersionMetadata != nil {
				rec.Version, rec.Created = s.VersionMetadata.Version, s.VersionMetadata.CreatedTime
			}
			return nil
		}
		if !errors.Is(err, api.ErrSecretNotFound) {
			return err
		}
		// No readable current version: there may still be metadata (an
		// interrupted create, or a deleted version).
		m, err := kv.GetMetadata(ctx, path)
		if errors.Is(err, api.ErrSecretNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		rec = &Record{Version: m.CurrentVersion, Owner: stringMap(m.CustomMetadata)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read %s/%s: %w", c.opts.KVMount, path, scrub(err))
	}
	return rec, nil
}

// ReadVersion returns the data of one version, or nil when that version is
// deleted, destroyed or absent.
func (c *Client) ReadVersion(ctx context.Context, path string, version int) (map[string]string, error) {
	if err := tenancy.ValidatePath("credential path", path); err != nil {
		return nil, err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	var data map[string]string
	err := c.do(ctx, func(cl *api.Client) error {
		s, err := cl.KVv2(c.opts.KVMount).GetVersion(ctx, path, version)
		if errors.Is(err, api.ErrSecretNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		data = stringMap(s.Data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read version %d of %s/%s: %w", version, c.opts.KVMount, path, scrub(err))
	}
	return data, nil
}

// SetOwner sets the given keys of the record's custom_metadata (creating
// the metadata entry when there is none). It changes nothing else: other
// custom_metadata keys and the entry's max_versions, cas_required,
// delete_version_after and metadata_cas_required stay as they are, so two
// writers setting different keys (two replicas during a rolling update)
// both keep theirs, and an admin's settings survive. Callers write it only
// on a path that is absent or already theirs.
//
// An existing entry is changed with a JSON merge PATCH, which OpenBao
// applies under the key's lock (the provider's policy needs "patch" on the
// metadata path). A missing one is created with only custom_metadata and
// metadata_cas 0, so a concurrent creation is never overwritten: the loser
// merges into the winner's entry instead.
func (c *Client) SetOwner(ctx context.Context, path string, owner map[string]string) error {
	if err := tenancy.ValidatePath("credential path", path); err != nil {
		return err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	cm := customMetadata(owner)
	err := c.do(ctx, func(cl *api.Client) error {
		for attempt := 0; attempt < 3; attempt++ {
			err := c.patchMetadata(ctx, cl, path, cm)
			if !isStatus(err, http.StatusNotFound) {
				return err
			}
			err = c.createMetadata(ctx, cl, path, cm)
			if !metadataCASMismatch(err) {
				return err
			}
			// Created by someone else in between: merge into theirs.
		}
		return errors.New("the metadata entry kept appearing and disappearing")
	})
	if err != nil {
		err = scrub(err)
		var se *StatusError
		if errors.As(err, &se) && se.Code == http.StatusForbidden && se.Method == http.MethodPatch {
			return fmt.Errorf("cannot write the ownership metadata of %s/%s: %w (the provider's OpenBao policy must grant \"patch\" on the metadata of its base path, see docs/install.md)", c.opts.KVMount, path, err)
		}
		return fmt.Errorf("cannot write the ownership metadata of %s/%s: %w", c.opts.KVMount, path, err)
	}
	return nil
}

// patchMetadata merges cm into the custom_metadata of an existing entry
// (404 when there is none): the client's JSON merge PATCH of the metadata
// endpoint with custom_metadata only.
func (c *Client) patchMetadata(ctx context.Context, cl *api.Client, path string, cm map[string]any) error {
	if len(cm) == 0 {
		// An empty map would be sent as null, which deletes every key.
		return errors.New("no ownership keys to write")
	}
	return cl.KVv2(c.opts.KVMount).PatchMetadata(ctx, path, api.KVMetadataPatchInput{CustomMetadata: cm})
}

// createMetadata creates the entry with custom_metadata cm only if none
// exists (metadata_cas 0); nothing else is set, so the mount's defaults
// apply.
func (c *Client) createMetadata(ctx context.Context, cl *api.Client, path string, cm map[string]any) error {
	_, err := cl.Logical().WriteWithContext(ctx, c.opts.KVMount+"/metadata/"+path, map[string]any{
		"custom_metadata": cm,
		"metadata_cas":    0,
	})
	return err
}

func isStatus(err error, code int) bool {
	var re *api.ResponseError
	return errors.As(err, &re) && re.StatusCode == code
}

// metadataCASMismatch: a metadata write with metadata_cas lost.
func metadataCASMismatch(err error) bool {
	var re *api.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
		return false
	}
	for _, e := range re.Errors {
		if strings.Contains(e, "metadata check-and-set") {
			return true
		}
	}
	return false
}

// Write writes data as a new version with check-and-set cas: 0 creates the
// first version only if none exists, n replaces exactly version n. A lost
// check-and-set returns ErrCASMismatch. It returns the new version.
func (c *Client) Write(ctx context.Context, path string, data map[string]string, cas int) (int, error) {
	if err := tenancy.ValidatePath("credential path", path); err != nil {
		return 0, err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	d := make(map[string]any, len(data))
	for k, v := range data {
		d[k] = v
	}
	var version int
	err := c.do(ctx, func(cl *api.Client) error {
		s, err := cl.KVv2(c.opts.KVMount).Put(ctx, path, d, api.WithCheckAndSet(cas))
		if err != nil {
			return err
		}
		if s.VersionMetadata != nil {
			version = s.VersionMetadata.Version
		}
		return nil
	})
	if err != nil {
		if strings.Contains(err.Error(), "check-and-set parameter did not match") {
			return 0, ErrCASMismatch
		}
		return 0, fmt.Errorf("cannot write %s/%s: %w", c.opts.KVMount, path, scrub(err))
	}
	return version, nil
}

// Delete removes the record with every version and its metadata, then
// reads back its absence.
func (c *Client) Delete(ctx context.Context, path string) error {
	if err := tenancy.ValidatePath("credential path", path); err != nil {
		return err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	err := c.do(ctx, func(cl *api.Client) error { return cl.KVv2(c.opts.KVMount).DeleteMetadata(ctx, path) })
	if err != nil {
		return fmt.Errorf("cannot delete %s/%s: %w", c.opts.KVMount, path, scrub(err))
	}
	rec, err := c.Read(ctx, path)
	if err != nil {
		return err
	}
	if rec != nil {
		return fmt.Errorf("%s/%s still exists after deleting it", c.opts.KVMount, path)
	}
	return nil
}

func stringMap(m map[string]any) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		} else if v != nil {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// scrub keeps OpenBao's status and error list but drops request details
// (URLs are fine, bodies could echo data). An answer that is not OpenBao's
// JSON error list (a proxy, a load balancer) is reported by size only.
func scrub(err error) error {
	var re *api.ResponseError
	if errors.As(err, &re) {
		errs := re.Errors
		if re.RawError {
			n := 0
			for _, e := range errs {
				n += len(e)
			}
			errs = []string{fmt.Sprintf("an answer that is not OpenBao's (%d bytes, not shown)", n)}
		}
		return &StatusError{Code: re.StatusCode, Method: re.HTTPMethod, Errors: errs}
	}
	return err
}

// StatusError is an answer from OpenBao other than success: the status and
// OpenBao's error list, without request or response bodies.
type StatusError struct {
	Code   int
	Method string
	Errors []string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("OpenBao answered %d %s: %s", e.Code, e.Method, strings.Join(e.Errors, "; "))
}

// Unavailable reports whether err means OpenBao could not serve the request
// now (a 5xx answer such as sealed or standby, or no answer at all) rather
// than refusing it (4xx).
func Unavailable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}

// customMetadata is owner as the custom_metadata of a KV metadata request.
func customMetadata(owner map[string]string) map[string]any {
	cm := make(map[string]any, len(owner))
	for k, v := range owner {
		cm[k] = v
	}
	return cm
}
