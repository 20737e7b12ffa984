package testenv

import (
	"context"
	"net"
	"testing"
	"time"
)

// A port picked free can be bound by another environment before the
// server binds it: the server is started again on another one. Here the
// first port picked is one this test holds.
func TestPostgresStartsOnAnotherPortWhenItsPortIsTaken(t *testing.T) {
	MajorIndependent(t)
	Need(t)
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck // test
	taken := l.Addr().(*net.TCPAddr).Port
	picks := 0
	freePort = func() (int, error) {
		picks++
		if picks == 1 {
			return taken, nil
		}
		return FreePort()
	}
	defer func() { freePort = FreePort }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := env.StartPostgres(ctx, "port-taken")
	if err != nil {
		t.Fatalf("StartPostgres with its first port taken: %v", err)
	}
	defer p.Stop()
	if p.Port == taken || picks != 2 {
		t.Errorf("the server runs on port %d after %d picks; want another port than the taken %d, after 2", p.Port, picks, taken)
	}
	c, err := p.SuperConn(ctx, "postgres")
	if err != nil {
		t.Fatalf("logging in on port %d: %v", p.Port, err)
	}
	_ = c.Close(ctx)
}
