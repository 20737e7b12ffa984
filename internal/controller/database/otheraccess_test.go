package database_test

import (
	"context"
	"strings"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

func otherAccess(d *v1alpha1.Database) xpv2.Condition {
	return d.GetCondition(tenancy.ConditionOtherAccess)
}

// TestOtherAccessIsShownAndNotRevoked: the owner tenant, with its own
// credential, grants CONNECT on its database to another role, and the
// role is granted to another role. The Database shows both in
// status.atProvider.otherAccess and in the OtherAccess condition (True,
// naming them), stays Ready with a Ready message that names neither, and
// revokes nothing. Once an admin revokes them, the condition is False and
// the field gone.
func TestOtherAccessIsShownAndNotRevoked(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	d := newDB("oadb")
	apply(t, d)
	waitDB(t, d, "Ready with no other access", func(d *v1alpha1.Database) bool {
		c := otherAccess(d)
		return ready(d) && c.Status == corev1.ConditionFalse && c.Reason == tenancy.ReasonOwnerOnly && d.Status.AtProvider.OtherAccess == nil
	})
	pw, _ := readKV(t, dbPath("oadb")).Data["password"].(string)

	su := superConn(t, "postgres")
	if _, err := su.Exec(ctx, "CREATE ROLE oa_other NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	app, err := appLogin(t, "oadb", pw, "oadb")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx) //nolint:errcheck // test connection
	if _, err := app.Exec(ctx, "GRANT CONNECT ON DATABASE oadb TO oa_other"); err != nil {
		t.Fatalf("as the owner tenant: %v", err)
	}
	// On 14 the tenant may grant its own role; from 15 on only a role
	// with ADMIN OPTION (or, before 16, CREATEROLE) may: the superuser
	// stands for both.
	if _, err := su.Exec(ctx, "GRANT oadb TO oa_other"); err != nil {
		t.Fatal(err)
	}

	waitDB(t, d, "OtherAccess True naming the grantee and the member", func(d *v1alpha1.Database) bool {
		c := otherAccess(d)
		return c.Status == corev1.ConditionTrue && c.Reason == tenancy.ReasonOtherRolesHaveAccess && d.Status.AtProvider.OtherAccess != nil &&
			len(d.Status.AtProvider.OtherAccess.Members) == 1
	})
	got := &v1alpha1.Database{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
		t.Fatal(err)
	}
	oa := got.Status.AtProvider.OtherAccess
	if diff := cmp.Diff([]v1alpha1.DatabaseGrantee{{Role: "oa_other", Privileges: []string{"CONNECT"}}}, oa.Grantees); diff != "" {
		t.Errorf("status.atProvider.otherAccess.grantees: -want +got:\n%s", diff)
	}
	if len(oa.Members) != 1 || oa.Members[0].Role != "oa_other" || oa.Members[0].AdminOption {
		t.Errorf("status.atProvider.otherAccess.members = %+v, want oa_other without ADMIN OPTION", oa.Members)
	}
	msg := otherAccess(got).Message
	for _, s := range []string{`"oa_other" holds CONNECT on the database`, `"oa_other" is a member of "oadb"`, "revokes nothing"} {
		if !strings.Contains(msg, s) {
			t.Errorf("OtherAccess message %q lacks %q", msg, s)
		}
	}
	r := got.GetCondition(xpv2.TypeReady)
	if r.Status != corev1.ConditionTrue || strings.Contains(r.Message, "oa_other") {
		t.Errorf("Ready = %s %q: other access must neither make a Database un-Ready nor reach its Ready message (relayed to the Tenant)", r.Status, r.Message)
	}

	// Nothing was revoked.
	var connect, member bool
	if err := su.QueryRow(ctx, "SELECT has_database_privilege('oa_other', 'oadb', 'CONNECT'), pg_has_role('oa_other', 'oadb', 'MEMBER')").Scan(&connect, &member); err != nil {
		t.Fatal(err)
	}
	if !connect || !member {
		t.Errorf("the provider revoked other access: CONNECT %t, membership %t", connect, member)
	}

	for _, stmt := range []string{"REVOKE ALL ON DATABASE oadb FROM oa_other CASCADE", "REVOKE oadb FROM oa_other"} {
		if _, err := su.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	waitDB(t, d, "OtherAccess False once revoked", func(d *v1alpha1.Database) bool {
		c := otherAccess(d)
		return ready(d) && c.Status == corev1.ConditionFalse && d.Status.AtProvider.OtherAccess == nil
	})
}
