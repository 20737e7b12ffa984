package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/openbao/openbao/api/v2"

	"ddupan.top/provider-postgresql-tenant/internal/options"
)

// OpenBao is a real OpenBao server started for one test package: TLS on
// loopback with a certificate from the run's CA, integrated (raft) storage
// in the run's directory, as a production server has it,
// initialised and unsealed, with a KV v2 mount and (once Kubernetes is up)
// the Kubernetes auth method configured against the test kube-apiserver.
type OpenBao struct {
	// Address is https://127.0.0.1:<port>.
	Address string
	// PodAddress is https://<NodeIP>:<port>, where the node's pods reach
	// it (Options.Node; empty without): the endpoint of ServiceAddress.
	PodAddress string
	// ServiceAddress is the --openbao-address of
	// examples/provider/runtime-config.yaml, a cluster DNS name the node
	// resolves to a Service whose endpoint is PodAddress (Options.Node;
	// empty without). The server's certificate carries its name.
	ServiceAddress string
	// CA signed the server certificate.
	CA *CA
	// RootToken is for the test harness only; it is never printed.
	RootToken string
	// KVMount is the KV v2 mount for tenant records ("kv", the provider's
	// default).
	KVMount string
	// AuthMount is the Kubernetes auth mount ("kubernetes").
	AuthMount string
	// TenantBasePath is the provider's default tenant base path.
	TenantBasePath string
	// ProviderRole is the Kubernetes auth role the provider logs in as,
	// bound to ProviderServiceAccount in ProviderNamespace, accepting only
	// tokens whose audience is ProviderAudience.
	ProviderRole string

	// AuditLog is the file audit device's log (Options.OpenBaoAudit;
	// empty without it). Read it with AuditEntries.
	AuditLog string

	logFile string
	proc    *process
	bin     string
	cfgFile string
	unseal  string
}

// The provider's identity in tests.
const (
	ProviderNamespace      = "crossplane-system"
	ProviderServiceAccount = "provider-postgresql-tenant"
	// ProviderAudience is the audience the provider role requires of a
	// service-account token (as the docs tell an admin to configure it); a
	// token with the kube-apiserver's audience is refused.
	ProviderAudience = options.DefaultOpenBaoAudience
)

// startOpenBao starts OpenBao; for a node (Options.Node) it also listens
// on NodeIP, in the certificate too.
func startOpenBao(ctx context.Context, root, binDir string, ca *CA, audit, node, mountKV bool) (*OpenBao, error) {
	bin := filepath.Join(binDir, "bao")
	if _, err := os.Stat(bin); err != nil {
		return nil, missing("OpenBao server", bin, "make tools (hack/install-tools.sh bao)")
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	clusterPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "openbao")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	ips, listen, names := []net.IP{net.ParseIP("127.0.0.1")}, "127.0.0.1", []string{"localhost"}
	var svcAddr string
	if node {
		// Every address of the node's private namespace: loopback and
		// the bridge; and the example's Service name.
		ips, listen = append(ips, net.ParseIP(NodeIP)), "0.0.0.0"
		if svcAddr, err = ExampleOpenBaoAddress(); err != nil {
			return nil, err
		}
		ref, err := serviceOfAddress(svcAddr)
		if err != nil {
			return nil, err
		}
		names = append(names, ref.host, ref.name+"."+ref.namespace+".svc."+ClusterDomain)
	}
	kp, err := ca.issue(dir, "openbao", names, ips)
	if err != nil {
		return nil, err
	}
	b := &OpenBao{
		Address:        fmt.Sprintf("https://127.0.0.1:%d", port),
		CA:             ca,
		KVMount:        "kv",
		AuthMount:      "kubernetes",
		TenantBasePath: "postgresql-tenants",
		ProviderRole:   "provider-postgresql-tenant",
		logFile:        filepath.Join(root, "openbao.log"),
		bin:            bin,
		cfgFile:        filepath.Join(dir, "config.hcl"),
	}
	if node {
		b.PodAddress, b.ServiceAddress = fmt.Sprintf("https://%s:%d", NodeIP, port), svcAddr
	}
	cfg := fmt.Sprintf(`storage "raft" {
  path    = %q
  node_id = "test"
}
listener "tcp" {
  address         = "%s:%d"
  cluster_address = "127.0.0.1:%d"
  tls_cert_file   = %q
  tls_key_file    = %q
}
disable_mlock = true
api_addr      = %q
cluster_addr  = "https://127.0.0.1:%d"
log_level     = "warn"
`, dataDir, listen, port, clusterPort, kp.CertFile, kp.KeyFile, b.Address, clusterPort)
	if audit {
		// OpenBao enables audit devices only from its configuration, not
		// through the API.
		b.AuditLog = filepath.Join(dir, "audit.log")
		cfg += fmt.Sprintf(`audit "file" "requests" {
  options {
    file_path = %q
    mode      = "0600"
  }
}
`, b.AuditLog)
	}
	if err := os.WriteFile(b.cfgFile, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	if err := b.initialise(ctx, mountKV); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

func (b *OpenBao) start(ctx context.Context) error {
	proc, err := startProcess("openbao", b.logFile, exec.Command(b.bin, "server", "-config="+b.cfgFile)) //nolint:gosec,noctx // the pinned binary from the component cache; runs until Stop
	if err != nil {
		return err
	}
	b.proc = proc
	c, err := b.Client("")
	if err != nil {
		return err
	}
	err = WaitFor(ctx, 60*time.Second, func(ctx context.Context) error {
		if proc.exited() {
			return errors.New("openbao exited")
		}
		_, err := c.Sys().SealStatusWithContext(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("openbao did not start: %w\n%s", err, Tail(b.logFile, 20))
	}
	return nil
}

func (b *OpenBao) initialise(ctx context.Context, mountKV bool) error {
	c, err := b.Client("")
	if err != nil {
		return err
	}
	// Initialising bootstraps raft storage and elects the node, with an
	// fsync per write: on a disk busy with another run's files that has
	// taken longer than the client's usual 10 s.
	c.SetClientTimeout(2 * time.Minute)
	init, err := c.Sys().InitWithContext(ctx, &api.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil {
		return fmt.Errorf("cannot initialise openbao: %w", err)
	}
	b.RootToken, b.unseal = init.RootToken, init.Keys[0]
	if _, err := c.Sys().UnsealWithContext(ctx, b.unseal); err != nil {
		return fmt.Errorf("cannot unseal openbao: %w", err)
	}
	c.SetToken(b.RootToken)
	err = WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := c.Sys().ListMountsWithContext(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("openbao not active after unseal: %w", err)
	}
	if !mountKV {
		return nil
	}
	if err := c.Sys().MountWithContext(ctx, b.KVMount, &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		return fmt.Errorf("cannot mount KV v2 at %s: %w", b.KVMount, err)
	}
	// A new KV v2 mount upgrades itself in the background; wait until it
	// answers.
	return WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := c.Logical().ReadWithContext(ctx, b.KVMount+"/config")
		return err
	})
}

// Stop stops the server. Tests that need an outage use Pause/Resume: a
// stopped server would come back sealed.
func (b *OpenBao) Stop() {
	if b.proc != nil {
		b.proc.stop(syscall.SIGTERM)
	}
}

// Pause freezes the server (SIGSTOP): connections hang, as with a network
// outage, and Resume continues with all state intact.
func (b *OpenBao) Pause() error { return b.proc.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (b *OpenBao) Resume() error { return b.proc.cmd.Process.Signal(syscall.SIGCONT) }

// LogFile is the server's log.
func (b *OpenBao) LogFile() string { return b.logFile }

// Client returns an API client that trusts only the run's CA, with token set
// when not empty. It reads no BAO_*/VAULT_* variable (api.NewConfig, not
// api.DefaultConfig): a test that sets them to hostile values still sees
// the real server through it. Do not Clone it (a clone reads them again).
func (b *OpenBao) Client(token string) (*api.Client, error) {
	cfg := api.NewConfig()
	if cfg.Error != nil {
		return nil, cfg.Error
	}
	cfg.Address = b.Address
	cfg.Timeout = 10 * time.Second
	cfg.MaxRetries = 0
	if err := cfg.ConfigureTLS(&api.TLSConfig{CACert: b.CA.CertFile}); err != nil {
		return nil, err
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	c.ClearToken()
	c.ClearNamespace()
	if token != "" {
		c.SetToken(token)
	}
	return c, nil
}

// ProviderPolicy is the OpenBao policy of the provider: the delivery copies
// under the tenant base path and the Databases' own records under the
// provider's default database base path (postgresql-databases), data and
// metadata, nothing else. "patch" on metadata lets an ownership write merge
// its keys instead of replacing the entry.
func (b *OpenBao) ProviderPolicy() string {
	var p string
	for _, base := range []string{b.TenantBasePath, "postgresql-databases"} {
		p += fmt.Sprintf(`path "%[1]s/data/%[2]s/*" {
  capabilities = ["create", "read", "update", "delete"]
}
path "%[1]s/metadata/%[2]s/*" {
  capabilities = ["create", "read", "update", "patch", "delete", "list"]
}
`, b.KVMount, base)
	}
	return p
}

// configureKubernetesAuth enables Kubernetes auth against the test apiserver:
// OpenBao reviews tokens with a reviewer service account bound to
// system:auth-delegator, and the provider role is bound to the provider's
// service account and requires the audience ProviderAudience.
func (b *OpenBao) configureKubernetesAuth(ctx context.Context, k *Kube) error {
	reviewer, err := k.reviewerToken(ctx)
	if err != nil {
		return err
	}
	c, err := b.Client(b.RootToken)
	if err != nil {
		return err
	}
	if err := c.Sys().EnableAuthWithOptionsWithContext(ctx, b.AuthMount, &api.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		return fmt.Errorf("cannot enable kubernetes auth: %w", err)
	}
	if _, err := c.Logical().WriteWithContext(ctx, "auth/"+b.AuthMount+"/config", map[string]any{
		"kubernetes_host":      k.Config.Host,
		"kubernetes_ca_cert":   string(k.Config.CAData),
		"token_reviewer_jwt":   reviewer,
		"disable_local_ca_jwt": true,
	}); err != nil {
		return fmt.Errorf("cannot configure kubernetes auth: %w", err)
	}
	if err := c.Sys().PutPolicyWithContext(ctx, b.ProviderRole, b.ProviderPolicy()); err != nil {
		return fmt.Errorf("cannot write the provider policy: %w", err)
	}
	if _, err := c.Logical().WriteWithContext(ctx, "auth/"+b.AuthMount+"/role/"+b.ProviderRole, map[string]any{
		"bound_service_account_names":      []string{ProviderServiceAccount},
		"bound_service_account_namespaces": []string{ProviderNamespace},
		"audience":                         ProviderAudience,
		"token_policies":                   []string{b.ProviderRole},
		"token_ttl":                        "1h",
	}); err != nil {
		return fmt.Errorf("cannot write the provider role: %w", err)
	}
	return nil
}

// TenantReaderRole is the Kubernetes auth role ESO logs in with, as the
// service account TenantReaderServiceAccount of the ExternalSecret's own
// namespace (ESO's referent authentication).
const (
	TenantReaderRole           = "eso-tenant-reader"
	TenantReaderServiceAccount = "openbao-tenant-reader"
	// TenantReaderAudience is the audience the tenant-reader role
	// requires of ESO's tokens (the ClusterSecretStore's
	// serviceAccountRef.audiences), the provider's too.
	TenantReaderAudience = ProviderAudience
)

// TenantReaderPolicy is templated on the logging-in service account's
// namespace: a namespace can read only <base>/<its namespace>/*.
func (b *OpenBao) TenantReaderPolicy(accessor string) string {
	return fmt.Sprintf(`path "%s/data/%s/{{identity.entity.aliases.%s.metadata.service_account_namespace}}/*" {
  capabilities = ["read"]
}
`, b.KVMount, b.TenantBasePath, accessor)
}

func (b *OpenBao) configureTenantReader(ctx context.Context) error {
	c, err := b.Client(b.RootToken)
	if err != nil {
		return err
	}
	auths, err := c.Sys().ListAuthWithContext(ctx)
	if err != nil {
		return err
	}
	m, ok := auths[b.AuthMount+"/"]
	if !ok {
		return fmt.Errorf("no auth mount %s", b.AuthMount)
	}
	if err := c.Sys().PutPolicyWithContext(ctx, TenantReaderRole, b.TenantReaderPolicy(m.Accessor)); err != nil {
		return fmt.Errorf("cannot write the tenant reader policy: %w", err)
	}
	if _, err := c.Logical().WriteWithContext(ctx, "auth/"+b.AuthMount+"/role/"+TenantReaderRole, map[string]any{
		"bound_service_account_names":      []string{TenantReaderServiceAccount},
		"bound_service_account_namespaces": []string{"*"},
		"audience":                         TenantReaderAudience,
		"token_policies":                   []string{TenantReaderRole},
		"token_ttl":                        "10m",
	}); err != nil {
		return fmt.Errorf("cannot write the tenant reader role: %w", err)
	}
	return nil
}

// AuditEntry is one response the audit device logged: what was asked, and
// the service-account namespace of the Kubernetes login behind the token
// (empty for other tokens).
type AuditEntry struct {
	Operation, Path, ServiceAccountNamespace string
}

// AuditEntries reads the responses the audit device has logged so far
// (Options.OpenBaoAudit). A login response names the service account that
// logged in; every later response names the one its token belongs to.
func (b *OpenBao) AuditEntries() ([]AuditEntry, error) {
	if b.AuditLog == "" {
		return nil, errors.New("openbao has no audit device: start it with Options.OpenBaoAudit")
	}
	f, err := os.Open(b.AuditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readAudit(f)
}

// readAudit parses the complete lines of an audit log. OpenBao writes a
// line while the test reads the file, so the last line may be only partly
// written: a line without its newline is left for the next read.
func readAudit(r io.Reader) ([]AuditEntry, error) {
	var out []AuditEntry
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a partial last line, or none
		}
		if err != nil {
			return out, err
		}
		var l struct {
			Type string `json:"type"`
			Auth struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"auth"`
			Request struct {
				Operation string `json:"operation"`
				Path      string `json:"path"`
			} `json:"request"`
			Response struct {
				Auth struct {
					Metadata map[string]string `json:"metadata"`
				} `json:"auth"`
			} `json:"response"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		if l.Type != "response" {
			continue
		}
		ns := l.Auth.Metadata["service_account_namespace"]
		if ns == "" { // a login: the token it made
			ns = l.Response.Auth.Metadata["service_account_namespace"]
		}
		out = append(out, AuditEntry{Operation: l.Request.Operation, Path: l.Request.Path, ServiceAccountNamespace: ns})
	}
}
