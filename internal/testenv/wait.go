package testenv

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// pollInterval is how often WaitFor tries again.
const pollInterval = 100 * time.Millisecond

// WaitFor is the one polling helper of the project's tests and test
// environment: it calls fn every 100 ms until fn returns nil (then it returns
// nil), fn returns a Permanent error (then it returns that error at once), or
// ctx ends or timeout passes (0: no limit beyond ctx's); then it returns the
// last error of fn, saying it timed out.
func WaitFor(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if p := (*permanent)(nil); errors.As(err, &p) {
			return p.err
		}
		select {
		case <-ctx.Done():
			if timeout > 0 {
				return fmt.Errorf("timed out after %s: %w", timeout, err)
			}
			return fmt.Errorf("timed out (%w): %w", ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}

// ErrNotYet is the error of a poll whose condition does not hold yet.
var ErrNotYet = errors.New("not yet")

// Permanent marks an error after which waiting is pointless (e.g. the
// process waited on exited): WaitFor returns err at once.
func Permanent(err error) error { return &permanent{err} }

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }
