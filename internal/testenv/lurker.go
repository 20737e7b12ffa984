package testenv

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A Lurker is a tenant's own login that polls pg_database for a database
// it must never enter and connects to it in a loop the moment it exists,
// keeping open every session it gets, as an attacker would.
type Lurker struct {
	// Tries counts the connection attempts made once the database existed;
	// Sessions the ones that got a session.
	Tries, Sessions atomic.Int32

	stop chan struct{}
	wg   sync.WaitGroup
}

// Lurk starts a Lurker logging in as role with password: it polls from
// a session in the database home and tries the database target.
func (p *Postgres) Lurk(t *testing.T, role, password, home, target string) *Lurker {
	t.Helper()
	ctx := context.Background()
	connect := func(database string) (*pgx.Conn, error) {
		cfg, err := p.ConnConfig(role, password, database)
		if err != nil {
			return nil, err
		}
		return pgx.ConnectConfig(ctx, cfg)
	}
	poll, err := connect(home)
	if err != nil {
		t.Fatal(err)
	}
	l := &Lurker{stop: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer poll.Close(ctx) //nolint:errcheck // test
		var kept []*pgx.Conn
		defer func() {
			for _, c := range kept {
				_ = c.Close(ctx)
			}
		}()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			var exists bool
			if err := poll.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", target).Scan(&exists); err != nil {
				t.Error(err)
				return
			}
			if !exists {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.Tries.Add(1)
			if c, err := connect(target); err == nil {
				l.Sessions.Add(1)
				kept = append(kept, c)
			}
		}
	}()
	return l
}

// WaitTries waits until the Lurker has tried n times, or for d.
func (l *Lurker) WaitTries(n int32, d time.Duration) {
	deadline := time.Now().Add(d)
	for l.Tries.Load() < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the loop and closes every session the Lurker kept. It may be
// called more than once.
func (l *Lurker) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}
