package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
	"ddupan.top/provider-postgresql-tenant/internal/testenv/tenantkit"
)

// The provider's process is killed from outside (SIGKILL to its
// container's PID, as the kernel's OOM killer would) while a Tenant is
// provisioning: the kubelet restarts the container in the same Pod, and
// the Tenant reaches Ready with the end state of an undisturbed one.
func TestKubeletRestartsTheProviderKilledMidProvisioning(t *testing.T) {
	testenv.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "podkill", "podkill"
	pod, st, err := prov.Pod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := prov.Pid(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tenantkit.CreateTenant(ctx, t, env, api, ns, name, "{instanceRef: "+tenantkit.Instance+", extensions: [pg_trgm]}")
	// The provider has begun: the binding made the Tenant's Database.
	db := dynDB(ctx, t, ns, name)
	waitFor(ctx, t, "the Tenant's Database", func() bool {
		_, err := tenantkit.Get(ctx, env.Kube.Client, api, "Database", "", db)
		return err == nil
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	tn, err := tenantkit.Get(ctx, env.Kube.Client, api, "Tenant", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if tenantkit.Ready(tn) == "True" {
		t.Fatal("the Tenant was Ready before the kill: the test proves nothing")
	}
	var last corev1.ContainerStatus
	waitFor(ctx, t, "the kubelet restarting the container in the same Pod, Ready", func() bool {
		p, s, err := prov.Pod(ctx)
		if err != nil || p.UID != pod.UID {
			return false
		}
		last = s
		return s.RestartCount > st.RestartCount && s.ContainerID != st.ContainerID && s.Ready
	}, func() string { return tenantkit.Describe(context.Background(), env, api, ns, name) })
	if term := last.LastTerminationState.Terminated; term == nil || term.ExitCode != 137 || term.ContainerID != st.ContainerID {
		t.Errorf("the container's last termination: %+v, want the SIGKILL (exit code 137) of %s", term, st.ContainerID)
	}
	tenantkit.WaitTenantReady(ctx, t, env, api, ns, name)
	endState(ctx, t, ns, name, name)
}
