package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// WaitFor returns nil once fn succeeds, fn's error at once when it is
// Permanent, and fn's last error, saying it timed out, when time runs out.
func TestWaitFor(t *testing.T) {
	ctx := context.Background()
	n := 0
	if err := WaitFor(ctx, 10*time.Second, func(context.Context) error {
		if n++; n < 3 {
			return ErrNotYet
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("WaitFor = %v after %d calls, want nil after 3", err, n)
	}

	gone := errors.New("the process exited")
	n = 0
	start := time.Now()
	err := WaitFor(ctx, 10*time.Second, func(context.Context) error { n++; return Permanent(gone) })
	if err != gone || n != 1 || time.Since(start) > time.Second { //nolint:errorlint // WaitFor must return the permanent error itself, not a wrapper
		t.Errorf("WaitFor with a permanent error = %v after %d calls and %s, want it at once", err, n, time.Since(start))
	}

	err = WaitFor(ctx, 300*time.Millisecond, func(context.Context) error { return ErrNotYet })
	if !errors.Is(err, ErrNotYet) || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("WaitFor past its timeout = %v, want a timeout wrapping the last error", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = WaitFor(cctx, 0, func(context.Context) error { return ErrNotYet })
	if !errors.Is(err, ErrNotYet) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("WaitFor past its context's deadline = %v, want a timeout wrapping the last error", err)
	}
}
