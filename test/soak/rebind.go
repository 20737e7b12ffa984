package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// A rebind hands a Released Database to a Tenant of another namespace the
// way the admins' runbook does, one step per cycle, each step asked only
// once the one before shows done, with the faults of the cycles in
// between:
//
//  1. the Tenant (reclaim Retain) is deleted: its Database is Released;
//  2. the admin asks for the access cleanup (spec.accessCleanup);
//  3. the admin rotates the password and ends the old sessions
//     (spec.credentialRotation with terminateSessions): the old password
//     must not log in any more;
//  4. the admin presets the claim for the new Tenant (the old Tenant's
//     UID removed with it) and the new Tenant names the Database.
//
// The new Tenant is then a live Tenant like the others: Ready, its Secret
// logging in, and the row the old one wrote still there.
type rebind struct {
	old  *tenant
	step int
	// cleanup is the id of the access cleanup asked.
	cleanup string
	// oldPassword is the password before the rotation.
	oldPassword string
}

const (
	stepReleasing = iota
	stepCleaning
	stepRotating
)

// rebindable: a Tenant of the Retain registration without data roles.
func rebindable(t *tenant) bool { return t.Instance == tenantkit.Instance && !t.DataRole }

// releaseSome deletes k rebindable Tenants: their Databases are Released
// and start their way to a new Tenant.
func (s *soak) releaseSome(ctx context.Context, k int) error {
	for _, t := range s.pick(k, rebindable) {
		if err := s.deleteTenant(ctx, t); err != nil {
			return err
		}
		delete(s.live, t.key())
		s.say("rebind of %s: its Tenant %s deleted (Retain)", t.Database, t.key())
		s.rebinds = append(s.rebinds, &rebind{old: t, step: stepReleasing})
		s.report.Ops.Released++
	}
	return nil
}

func (s *soak) getDatabase(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	db := &unstructured.Unstructured{}
	db.SetAPIVersion(tenantkit.TenantAPI)
	db.SetKind("Database")
	return db, s.kube.Get(ctx, client.ObjectKey{Name: name}, db)
}

// rebindWaiting says what the rebind's last step still waits for ("": it
// is done).
func (s *soak) rebindWaiting(ctx context.Context, r *rebind, seen map[string]*unstructured.Unstructured) (string, error) {
	what := "rebind of " + r.old.Database
	if _, ok := seen[r.old.key()]; ok {
		return what + ": its old Tenant " + r.old.key() + " is still deleting", nil
	}
	db, err := s.getDatabase(ctx, r.old.Database)
	if err != nil {
		return "", fmt.Errorf("cannot read Database %s: %w", r.old.Database, err)
	}
	str := func(path ...string) string { v, _, _ := unstructured.NestedString(db.Object, path...); return v }
	switch r.step {
	case stepReleasing:
		if p := str("status", "binding", "phase"); p != "Released" {
			return fmt.Sprintf("%s: %s, not Released yet", what, p), nil
		}
	case stepCleaning:
		if id := str("status", "atProvider", "accessCleanup", "id"); id != r.cleanup {
			return fmt.Sprintf("%s: access cleanup %s not done (%q)", what, r.cleanup, id), nil
		}
	case stepRotating:
		if id, want := str("status", "atProvider", "credentialRotation", "id"), fmt.Sprintf("soak-%d", r.old.Rotations); id != want {
			return fmt.Sprintf("%s: rotation %s not done (%q)", what, want, id), nil
		}
	}
	return "", nil
}

func (s *soak) patchDatabase(ctx context.Context, name, patch string) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(tenantkit.TenantAPI)
	u.SetKind("Database")
	u.SetName(name)
	p := client.RawPatch(types.MergePatchType, []byte(patch))
	if err := retryAPI(ctx, func(ctx context.Context) error { return s.kube.Patch(ctx, u, p) }); err != nil {
		return fmt.Errorf("patch Database %s: %w", name, err)
	}
	return nil
}

// advanceRebinds takes each rebind whose last step is done one step on.
func (s *soak) advanceRebinds(ctx context.Context) error {
	var left []*rebind
	for _, r := range s.rebinds {
		done, err := s.advance(ctx, r)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// Not a violation by itself: the step is asked again next
			// cycle, and a rebind that never gets on is one that never
			// converges.
			s.say("rebind of %s: %v (asked again next cycle)", r.old.Database, err)
		}
		if !done {
			left = append(left, r)
		}
	}
	s.rebinds = left
	return nil
}

// advance takes one rebind one step on, if its last step is done; done:
// the Database went to its new Tenant.
func (s *soak) advance(ctx context.Context, r *rebind) (bool, error) {
	var waiting string
	err := retryAPI(ctx, func(ctx context.Context) error {
		var err error
		waiting, err = s.rebindWaiting(ctx, r, nil)
		return err
	})
	if err != nil || waiting != "" {
		return false, err
	}
	t := r.old
	switch r.step {
	case stepReleasing:
		id := fmt.Sprintf("soak-cleanup-%d", s.seq+1)
		if err := s.patchDatabase(ctx, t.Database, `{"spec":{"accessCleanup":{"id":"`+id+`"}}}`); err != nil {
			return false, err
		}
		s.seq++
		r.cleanup, r.step = id, stepCleaning
		s.say("rebind of %s: Released; access cleanup %s asked", t.Database, id)
		return false, nil
	case stepCleaning:
		p, err := s.currentPassword(ctx, t.Database)
		if err != nil {
			return false, err
		}
		if err := s.patchDatabase(ctx, t.Database, fmt.Sprintf(`{"spec":{"credentialRotation":{"id":"soak-%d","terminateSessions":true}}}`, t.Rotations+1)); err != nil {
			return false, err
		}
		r.oldPassword = p
		t.Rotations++
		r.step = stepRotating
		s.say("rebind of %s: cleaned; rotation soak-%d asked, ending the old sessions", t.Database, t.Rotations)
		return false, nil
	}
	// Rotated: the old password is refused, then the claim goes to the
	// new Tenant.
	if err := s.loginAs(ctx, t.DBName, r.oldPassword, t.DBName); err == nil {
		s.report.violation("the rebind of %s: the old password still logs in after its rotation", t.Database)
	}
	s.seq++
	n := &tenant{Name: fmt.Sprintf("soak-%d", s.seq), DBName: t.DBName, Database: t.Database, Instance: tenantkit.Instance,
		Static: true, Rotations: t.Rotations, Row: t.Row} // Synced 0: its Secret is seen logging in (a rebind always rotated)
	for i := s.seq; ; i++ {
		if n.NS = nsName(i % s.c.Namespaces); n.NS != t.NS || s.c.Namespaces == 1 {
			break
		}
	}
	if err := s.patchDatabase(ctx, t.Database, fmt.Sprintf(`{"spec":{"claimRef":{"namespace":%q,"name":%q,"uid":null}}}`, n.NS, n.Name)); err != nil {
		return false, err
	}
	u := tenantkit.MustUnstructured(fmt.Sprintf("apiVersion: %s\nkind: Tenant\nmetadata: {name: %s, namespace: %s}\nspec: {databaseRef: %s}\n", tenantkit.TenantAPI, n.Name, n.NS, t.Database))
	if err := retryAPI(ctx, func(ctx context.Context) error { return s.kube.Create(ctx, u) }); err != nil {
		return false, fmt.Errorf("create Tenant %s: %w", n.key(), err)
	}
	s.live[n.key()] = n
	s.say("rebind of %s: rotated; claim preset for %s, which names it", t.Database, n.key())
	s.report.Ops.Rebound++
	return true, nil
}

// currentPassword is the password the Database's credential record holds
// now.
func (s *soak) currentPassword(ctx context.Context, database string) (string, error) {
	root, err := s.e.OpenBao.Client(s.e.OpenBao.RootToken)
	if err != nil {
		return "", err
	}
	var p string
	err = retryAPI(ctx, func(ctx context.Context) error {
		sec, err := root.KVv2(s.e.OpenBao.KVMount).Get(ctx, tenantkit.RecordPath(database))
		if err != nil {
			return err
		}
		p, _ = sec.Data["password"].(string)
		return nil
	})
	if err == nil && p == "" {
		err = fmt.Errorf("the credential record of %s holds no password", database)
	}
	return p, err
}

// loginAs logs in to the server directly with a name and password.
func (s *soak) loginAs(ctx context.Context, user, password, database string) error {
	cfg, err := s.e.Postgres.ConnConfig(user, password, database)
	if err != nil {
		return err
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	return c.Close(context.WithoutCancel(ctx))
}
