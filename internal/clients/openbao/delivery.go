package openbao

import (
	"context"
	"fmt"

	"github.com/openbao/openbao/api/v2"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// ClaimPath creates the metadata entry of a path that has none, with owner
// as its custom_metadata (metadata check-and-set 0), so that the path is
// marked as the caller's before any data is written. When an entry exists
// (another writer claimed the path first) it returns ErrCASMismatch and
// changes nothing: unlike SetOwner it never merges into someone else's
// entry.
func (c *Client) ClaimPath(ctx context.Context, path string, owner map[string]string) error {
	if err := tenancy.ValidatePath("credential path", path); err != nil {
		return err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	cm := customMetadata(owner)
	err := c.do(ctx, func(cl *api.Client) error { return c.createMetadata(ctx, cl, path, cm) })
	if metadataCASMismatch(err) {
		return ErrCASMismatch
	}
	if err != nil {
		return fmt.Errorf("cannot claim %s/%s: %w", c.opts.KVMount, path, scrub(err))
	}
	return nil
}
