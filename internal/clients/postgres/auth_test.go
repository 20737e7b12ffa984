package postgres_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// impostor is a loopback server that speaks just enough of the PostgreSQL
// protocol to ask a client for its password the way it chooses, and keeps
// every byte the client sends after the startup message.
type impostor struct {
	ln   net.Listener
	ask  pgproto3.BackendMessage
	mu   sync.Mutex
	sent []byte
}

func startImpostor(t *testing.T, ask pgproto3.BackendMessage) *impostor {
	t.Helper()
	_, key, der := newCert(t, "impostor", []string{"localhost"}, false, nil, nil)
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	im := &impostor{ln: ln, ask: ask}
	t.Cleanup(func() { _ = ln.Close() })
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go im.serve(c, cfg)
		}
	}()
	return im
}

func (im *impostor) serve(raw net.Conn, cfg *tls.Config) {
	defer raw.Close() //nolint:errcheck // test server
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	// SSLRequest: length 8, code 80877103.
	var req [8]byte
	if _, err := io.ReadFull(raw, req[:]); err != nil || binary.BigEndian.Uint32(req[4:]) != 80877103 {
		return
	}
	if _, err := raw.Write([]byte{'S'}); err != nil {
		return
	}
	c := tls.Server(raw, cfg)
	b := pgproto3.NewBackend(c, c)
	if _, err := b.ReceiveStartupMessage(); err != nil {
		return
	}
	b.Send(im.ask)
	if _, ok := im.ask.(*pgproto3.AuthenticationOk); ok {
		b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	}
	_ = b.Flush()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		im.mu.Lock()
		im.sent = append(im.sent, buf[:n]...)
		im.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (im *impostor) port() int { return im.ln.Addr().(*net.TCPAddr).Port }

func (im *impostor) received() []byte {
	im.mu.Lock()
	defer im.mu.Unlock()
	return append([]byte(nil), im.sent...)
}

// TestPasswordsAnswerOnlySCRAM: whatever answers at a config's endpoint, the
// admin password and a tenant's password are sent only in answer to a
// SCRAM-SHA-256 challenge: a server that asks for the password in clear
// text or as MD5, or lets the client in without any, gets nothing, and the
// failure says why without the password.
func TestPasswordsAnswerOnlySCRAM(t *testing.T) {
	for name, ask := range map[string]pgproto3.BackendMessage{
		"Cleartext": &pgproto3.AuthenticationCleartextPassword{},
		"MD5":       &pgproto3.AuthenticationMD5Password{Salt: [4]byte{1, 2, 3, 4}},
		"NoAuth":    &pgproto3.AuthenticationOk{},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			im := startImpostor(t, ask)
			adminPW, tenantPW := testenv.RandomSecret("canary-admin-"), testenv.RandomSecret("canary-tenant-")
			m := postgres.NewManager(postgres.Options{ConnectTimeout: 5 * time.Second, CallTimeout: 5 * time.Second})
			t.Cleanup(m.Close)
			tgt := postgres.Target{Host: "localhost", Hostaddr: "127.0.0.1", Port: im.port(), Database: "postgres", SSLMode: postgres.SSLRequire}
			p, _, err := m.Get("t/impostor", "uid", tgt, postgres.Credential{Username: "admin_canary", Password: adminPW})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Check(ctx)
			if err == nil || postgres.ClassOf(err) != postgres.ClassAuthentication || !strings.Contains(err.Error(), "only in answer to SCRAM-SHA-256") {
				t.Errorf("Check against a server asking %s = %v, want a refusal that says SCRAM-SHA-256 only", name, err)
			}
			_, err = p.ConnectAs(ctx, "shop", postgres.Credential{Username: "shop", Password: tenantPW})
			if err == nil {
				t.Errorf("ConnectAs against a server asking %s succeeded", name)
			}
			got := string(im.received())
			for _, pw := range []string{adminPW, tenantPW} {
				if strings.Contains(got, pw) {
					t.Errorf("the password was sent to a server asking %s", name)
				}
				if err != nil && strings.Contains(err.Error(), pw) {
					t.Error("the error names the password")
				}
			}
		})
	}
}
