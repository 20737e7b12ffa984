package openbao

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// A claim creates the metadata entry of a free path and never touches an
// entry that exists: of two concurrent claimers exactly one wins, and the
// loser changes nothing.
func TestClaimPathNeverMergesIntoAnother(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	c := newClient(t)
	mine := map[string]string{"managed-by": "provider-postgresql-tenant", "binding-uid": "b-1"}
	theirs := map[string]string{"managed-by": "provider-postgresql-tenant", "binding-uid": "b-2"}

	t.Run("Free", func(t *testing.T) {
		p := freshPath("claim")
		if err := c.ClaimPath(ctx, p, mine); err != nil {
			t.Fatal(err)
		}
		rec, err := c.Read(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&Record{Owner: mine}, rec, ignoreCreated); diff != "" {
			t.Errorf("record after the claim: -want +got:\n%s", diff)
		}
	})

	t.Run("Taken", func(t *testing.T) {
		p := freshPath("claim")
		if err := c.SetOwner(ctx, p, theirs); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(ctx, p, map[string]string{"k": "v"}, 0); err != nil {
			t.Fatal(err)
		}
		if err := c.ClaimPath(ctx, p, mine); !errors.Is(err, ErrCASMismatch) {
			t.Fatalf("ClaimPath(taken) = %v; want ErrCASMismatch", err)
		}
		rec, err := c.Read(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&Record{Owner: theirs, Data: map[string]string{"k": "v"}, Version: 1}, rec, ignoreCreated); diff != "" {
			t.Errorf("a lost claim changed the record: -want +got:\n%s", diff)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		for i := 0; i < 10; i++ {
			p := freshPath("claimrace")
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, 2)
			for j, owner := range []map[string]string{mine, theirs} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[j] = c.ClaimPath(ctx, p, owner)
				}()
			}
			close(start)
			wg.Wait()
			won := 0
			var winner map[string]string
			for j, err := range errs {
				switch {
				case err == nil:
					won++
					winner = []map[string]string{mine, theirs}[j]
				case !errors.Is(err, ErrCASMismatch):
					t.Fatal(err)
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d claims won; want exactly 1 (%v)", i, won, errs)
			}
			rec, err := c.Read(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(winner, rec.Owner); diff != "" {
				t.Fatalf("round %d: the loser changed the winner's metadata: -want +got:\n%s", i, diff)
			}
		}
	})
}
