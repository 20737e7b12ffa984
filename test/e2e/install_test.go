package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// The provider's Pod runs as the service account of its package's runtime
// config (its projected API token authenticates as it, and nothing gives
// it another identity), with exactly the ClusterRole Crossplane's RBAC manager generated
// for its revision plus what package/rbac tells an admin to apply: nothing
// the suite passes could be owed to an admin identity.
func TestProviderRunsWithTheGeneratedRBAC(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x := env.Crossplane
	pod, _, err := prov.Pod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != x.ProviderServiceAccount || x.ProviderServiceAccount == "" {
		t.Fatalf("the provider's Pod runs as service account %q, not the runtime config's %q", pod.Spec.ServiceAccountName, x.ProviderServiceAccount)
	}
	for _, c := range pod.Spec.Containers {
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--kubeconfig") {
				t.Errorf("container %s passes %s: want the Pod's in-cluster identity", c.Name, a)
			}
		}
		for _, e := range c.Env {
			if e.Name == "KUBECONFIG" {
				t.Errorf("container %s sets KUBECONFIG: want the Pod's in-cluster identity", c.Name)
			}
		}
	}
	// The API token the kubelet projected into the Pod (its
	// kube-api-access volume): what the provider's in-cluster client sends.
	toks, _ := filepath.Glob(filepath.Join(env.Node.KubeletRoot, "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "kube-api-access-*", "token"))
	if len(toks) != 1 {
		t.Fatalf("the Pod's projected API tokens: %v, want one", toks)
	}
	tok, err := os.ReadFile(toks[0])
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Kube.Config)
	cfg.BearerToken = strings.TrimSpace(string(tok))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "system:serviceaccount:" + testenv.CrossplaneNamespace + ":" + x.ProviderServiceAccount
	if got := who.Status.UserInfo.Username; got != want {
		t.Errorf("the provider authenticates as %q, want %q", got, want)
	}
	if slices.Contains(who.Status.UserInfo.Groups, "system:masters") {
		t.Errorf("the provider's identity is in system:masters: %v", who.Status.UserInfo.Groups)
	}
	roles, err := env.Kube.ClusterRolesBoundTo(ctx, testenv.CrossplaneNamespace, x.ProviderServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(roles)
	wantRoles := []string{"crossplane:provider:" + x.ProviderRevision + ":system", "provider-postgresql-tenant:reclaim", "provider-postgresql-tenant:tenants"}
	slices.Sort(wantRoles)
	if !slices.Equal(roles, wantRoles) {
		t.Errorf("ClusterRoles bound to the provider's service account: %v, want exactly %v", roles, wantRoles)
	}
	// And the generated role is what it is: no delete on the provider's
	// own kinds (which is why package/rbac grants delete on Databases).
	gen := &rbacv1.ClusterRole{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: "crossplane:provider:" + x.ProviderRevision + ":system"}, gen); err != nil {
		t.Fatal(err)
	}
	for _, r := range gen.Rules {
		if slices.Contains(r.APIGroups, "database.ayatori.ddupan.top") && slices.Contains(r.Resources, "databases") && slices.Contains(r.Verbs, "delete") {
			t.Errorf("the generated role now grants delete on databases (%v): package/rbac/provider-reclaim.yaml and the docs are out of date", r)
		}
	}
}

// The permission package/rbac/provider-reclaim.yaml grants is needed and
// its absence loses nothing: without it, a Tenant released from a Delete
// Database stays with the binding reporting the refusal (Synced=False
// naming the missing permission), the Database, its database and role stay;
// once it is granted again the release completes and drops them.
func TestReclaimDeleteWaitsForItsPermission(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	crb := &rbacv1.ClusterRoleBinding{}
	if err := env.Kube.Client.Get(ctx, client.ObjectKey{Name: "provider-postgresql-tenant:reclaim"}, crb); err != nil {
		t.Fatal(err)
	}
	restore := crb.DeepCopy()
	restore.ResourceVersion, restore.UID = "", ""
	restored := false
	put := func() {
		if restored {
			return
		}
		if err := env.Kube.Client.Create(context.Background(), restore); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("cannot restore the reclaim binding: %v", err)
		}
		restored = true
	}
	defer put()

	ns, name, db := "reclaim-rbac", "reclaim-rbac", "reclaim_rbac"
	tenantkit.NewTenant(ctx, t, env, api, ns, name, "{instanceRef: "+tenantkit.DeleteInstance+", database: "+db+", loginRole: "+db+"}")
	dbName := dynDB(ctx, t, ns, name)
	if err := env.Kube.Client.Delete(ctx, crb); err != nil {
		t.Fatal(err)
	}
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Client.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the binding reporting the missing permission", func() bool {
		b, err := tenantkit.Get(ctx, env.Kube.Client, api, "DatabaseBinding", ns, name)
		if err != nil {
			return false
		}
		st, _, msg := tenantkit.Condition(b, "Synced")
		return st == "False" && strings.Contains(msg, "forbidden") && strings.Contains(msg, `cannot delete resource "databases"`)
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	if _, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", dbName); err != nil {
		t.Fatalf("the Database went without the permission: %v", err)
	}
	if hasDB, role := tenantkit.ServerHas(ctx, t, env, db, db); !hasDB || !role {
		t.Fatalf("without the permission: database %v, role %v", hasDB, role)
	}
	put()
	waitFor(ctx, t, "the Database's deletion once permitted", func() bool {
		_, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", dbName)
		return apierrors.IsNotFound(err)
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	waitFor(ctx, t, "the database and role dropped", func() bool {
		hasDB, role := tenantkit.ServerHas(ctx, t, env, db, db)
		return !hasDB && !role
	}, func() string { return dbName })
}
