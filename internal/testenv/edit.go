package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The race-free primitives of the project's tests. A controller writes the
// objects a test writes too (its status at least), so a test that reads an
// object, changes it and writes it back loses the race whenever the
// controller wrote in between (a conflict), and a test that asserts a
// controller's first observation instead of waiting for it fails whenever
// the machine is slower than its author's. These are the one way to do
// each; a test in this package refuses a test file that calls Update
// outside them without saying why that object has no other writer.

// editBackoff is how often Edit tries again after a conflict: a dozen times
// over about 10 s, enough for a controller that writes the object in a loop
// on a loaded machine.
var editBackoff = wait.Backoff{Steps: 12, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 2 * time.Second}

// EditE reads obj's latest version from the API server, applies change to
// it and writes it back, reading and changing again when a controller wrote
// the object in between (a conflict). change must be idempotent: it may run
// several times. obj holds the written object on return.
func EditE[T client.Object](ctx context.Context, c client.Client, obj T, change func(T)) error {
	return retry.RetryOnConflict(editBackoff, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(ctx, obj)
	})
}

// EditStatusE is EditE for the status subresource.
func EditStatusE[T client.Object](ctx context.Context, c client.Client, obj T, change func(T)) error {
	return retry.RetryOnConflict(editBackoff, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Status().Update(ctx, obj)
	})
}

// Edit is EditE that fails the test on an error.
func Edit[T client.Object](t testing.TB, c client.Client, obj T, change func(T)) {
	t.Helper()
	if err := EditE(context.Background(), c, obj, change); err != nil {
		t.Fatalf("editing %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// EditStatus is EditStatusE that fails the test on an error.
func EditStatus[T client.Object](t testing.TB, c client.Client, obj T, change func(T)) {
	t.Helper()
	if err := EditStatusE(context.Background(), c, obj, change); err != nil {
		t.Fatalf("editing the status of %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// SessionCount counts the sessions pg_stat_activity shows of role in
// database ("" for either: any), as c's role sees them (a superuser's or
// the admin's connection sees every session), the asking session aside.
func SessionCount(ctx context.Context, c *pgx.Conn, database, role string) (int, error) {
	var n int
	err := c.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity
		WHERE pid <> pg_catalog.pg_backend_pid() AND backend_type = 'client backend'
		  AND ($1 = '' OR datname = $1) AND ($2 = '' OR usename = $2)`, database, role).Scan(&n)
	return n, err
}

// AwaitSessions waits until the sessions of role in database ("" for
// either: any) number want (a session that ends is still listed for a
// moment after its client closed it), and fails the test saying how many
// there still were when timeout passed.
func AwaitSessions(t testing.TB, c *pgx.Conn, database, role string, want int, timeout time.Duration) {
	t.Helper()
	var n int
	err := WaitFor(context.Background(), timeout, func(ctx context.Context) error {
		var err error
		if n, err = SessionCount(ctx, c, database, role); err != nil {
			return err
		}
		if n != want {
			return ErrNotYet
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %d session(s) of role %q in database %q: %v (last count %d)", want, role, database, err, n)
	}
}

// UniqueName is prefix and a random suffix, lowercase letters and digits
// joined by "-": a name no other test, run or earlier leftover uses, valid
// as a Kubernetes object name (DNS-1123) and as a PostgreSQL database or
// role name. prefix is lowercased; the result is at most 40 characters.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	p := strings.ToLower(prefix)
	if len(p) > 31 {
		p = p[:31]
	}
	return strings.TrimRight(p, "-") + "-" + hex.EncodeToString(b)
}

// PausedAnnotation is Crossplane's annotation that stops the reconciles of
// a managed resource: its controller neither observes nor changes it.
const PausedAnnotation = "crossplane.io/paused"

// PauseWhenDone pauses obj (PausedAnnotation) when the test ends, unless it
// is gone by then. What a test leaves behind stays as it left it, for a
// later look, but is no longer polled: in a package whose controllers poll
// every half second, the leftovers of the tests before would otherwise
// make most of the package's work and slow every later test's waits.
func PauseWhenDone[T client.Object](t testing.TB, c client.Client, obj T) {
	t.Helper()
	t.Cleanup(func() {
		err := EditE(context.Background(), c, obj, func(o T) {
			a := o.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[PausedAnnotation] = "true"
			o.SetAnnotations(a)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("pausing %T %s the test left: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	})
}
