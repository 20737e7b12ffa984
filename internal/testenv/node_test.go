package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The node's kubelet and kube-proxy install firewall chains in the network
// namespace they run in, and its servers listen on every address: none of
// it may start outside the namespace NodeMain made. These run in the
// host's namespace with no binaries, so nothing could start even without
// the refusal.
func TestNodeRefusesTheHostNetwork(t *testing.T) {
	MajorIndependent(t)
	ctx := context.Background()
	ca, err := newCA(t.TempDir(), "ca")
	if err != nil {
		t.Fatal(err)
	}
	notOurs := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(notOurs, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "refusing to start the node on the host network"
	for name, netns := range map[string]string{"NoNamespace": "", "AnotherNamespace": notOurs} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(nodeNetnsEnv, netns)
			if _, err := startNode(ctx, t.TempDir(), t.TempDir(), nil, ca); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("startNode: %v, want %q", err, want)
			}
			if _, err := startKube(ctx, t.TempDir(), t.TempDir(), nil, false, ca); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("startKube for a node: %v, want %q", err, want)
			}
		})
	}
}

// The node's resolv.conf is mounted over /etc/resolv.conf in the test
// binary's private mount namespace only: refused in the host's (here on a
// file of the test's, so that a missing refusal harms nothing), and, in a
// private one, seen there while the host's file stays as it was, with no
// mount on it.
func TestNodeResolvConfStaysInItsMountNamespace(t *testing.T) {
	MajorIndependent(t)
	host, err := nsID("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(src, []byte(NodeResolvConf), 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "refusing to mount the node's resolv.conf in the host's mount namespace"
	for name, hostMntns := range map[string]string{"HostNamespace": host, "NoneNamed": ""} {
		t.Run(name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "etc-resolv.conf")
			if err := os.WriteFile(target, []byte("nameserver 192.0.2.1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := bindResolvConf(src, target, hostMntns)
			if m, _ := mountedAt(target); m {
				_ = syscall.Unmount(target, syscall.MNT_DETACH)
				t.Errorf("bindResolvConf mounted over %s in the host's mount namespace", target)
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("bindResolvConf: %v, want %q", err, want)
			}
		})
	}

	t.Run("PrivateNamespace", func(t *testing.T) {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(hostResolvConf)
		if err != nil {
			t.Fatal(err)
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("unshare", "--mount", "--propagation=private", "--", self) //nolint:noctx // this test binary, again
		cmd.Env = append(os.Environ(), resolvHelperEnv+"=1", nodeResolvConfEnv+"="+src, nodeHostMntnsEnv+"="+host)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the helper in a private mount namespace: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "resolv.conf: "+strings.ReplaceAll(NodeResolvConf, "\n", `\n`)) {
			t.Errorf("the helper did not see the node's resolv.conf at %s:\n%s", hostResolvConf, out)
		}
		if err := hostResolvConfKept(before); err != nil {
			t.Error(err)
		}
	})
}

const resolvHelperEnv = "PPT_TEST_RESOLV_HELPER"

// resolvConfHelper is the helper process of
// TestNodeResolvConfStaysInItsMountNamespace (TestMain runs it instead of
// the tests when resolvHelperEnv is set), in a private mount namespace: it
// mounts the node's resolv.conf as NodeMain's child does and prints what
// /etc/resolv.conf then says.
func resolvConfHelper() int {
	if err := bindResolvConf(os.Getenv(nodeResolvConfEnv), hostResolvConf, os.Getenv(nodeHostMntnsEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := os.ReadFile(hostResolvConf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("resolv.conf: %s\n", strings.ReplaceAll(string(b), "\n", `\n`))
	return 0
}

// The directories where the node's components write outside the node's
// own (/run/containerd, /var/lib/kubelet...) get a tmpfs of the test
// binary's private mount namespace: refused in the host's (here on
// directories of the test's, so that a missing refusal harms nothing);
// in a private one, what a node writes there is seen there and never in
// the host's directory, so that two nodes at once never share it.
func TestNodeFixedDirsStayInItsMountNamespace(t *testing.T) {
	MajorIndependent(t)
	host, err := nsID("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	const want = "refusing to mount the node's directories in the host's mount namespace"
	for name, hostMntns := range map[string]string{"HostNamespace": host, "NoneNamed": ""} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run-containerd")
			err := mountFixedDirs([]string{dir}, hostMntns)
			if m, _ := mountedAt(dir); m {
				_ = syscall.Unmount(dir, syscall.MNT_DETACH)
				t.Errorf("mountFixedDirs mounted on %s in the host's mount namespace", dir)
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("mountFixedDirs: %v, want %q", err, want)
			}
		})
	}

	t.Run("PrivateNamespace", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run-containerd")
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("unshare", "--mount", "--propagation=private", "--", self) //nolint:noctx // this test binary, again
		cmd.Env = append(os.Environ(), fixedDirsHelperEnv+"="+dir, nodeHostMntnsEnv+"="+host)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the helper in a private mount namespace: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "wrote "+filepath.Join(dir, "s")) {
			t.Errorf("the helper did not write in its tmpfs:\n%s", out)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			t.Errorf("the host's %s has what the helper wrote in its own namespace: %v", dir, ents)
		}
	})
}

const fixedDirsHelperEnv = "PPT_TEST_FIXED_DIRS_HELPER"

// fixedDirsHelper is the helper process of
// TestNodeFixedDirsStayInItsMountNamespace, in a private mount namespace:
// it mounts the node's tmpfs on the directory named as NodeMain's child
// does and writes a file there.
func fixedDirsHelper() int {
	dir := os.Getenv(fixedDirsHelperEnv)
	if err := mountFixedDirs([]string{dir}, os.Getenv(nodeHostMntnsEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if m, _ := mountedAt(dir); !m {
		fmt.Fprintln(os.Stderr, "nothing mounted on", dir)
		return 1
	}
	f := filepath.Join(dir, "s")
	if err := os.WriteFile(f, []byte("shim"), 0o600); err != nil { //nolint:gosec // the test's own directory
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("wrote %s\n", f)
	return 0
}

// A node's cleanup removes the cgroups under its own root, in every
// hierarchy, and nothing else: not a root it did not record, not one that
// is not a node's (the pods of another node, or of something else on the
// machine, live there).
func TestNodeCleanupRemovesOnlyItsOwnCgroups(t *testing.T) {
	MajorIndependent(t)
	hs, err := cgroupHierarchies()
	if err != nil || len(hs) == 0 {
		t.Fatalf("cgroup hierarchies: %v %v", hs, err)
	}
	// A cgroup that is not a node's, in every hierarchy.
	other := fmt.Sprintf("/ppt-other-%d", os.Getpid())
	for _, h := range hs {
		if err := os.Mkdir(filepath.Join(h, other), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Rmdir(filepath.Join(h, other)) })
	}
	for name, root := range map[string]string{"NoneRecorded": "", "NotANodes": other} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
				t.Fatal(err)
			}
			if root != "" {
				if err := os.WriteFile(cgroupRootFile(dir), []byte(root), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupDirs(dir); len(got) != 0 {
				t.Errorf("cgroupDirs = %v, want none", got)
			}
		})
	}
	t.Run("Recorded", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
			t.Fatal(err)
		}
		root, err := makeCgroupRoot(dir, fmt.Sprintf("test-%d", os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		// A pod's cgroup under the root, as the kubelet makes it.
		pod := filepath.Join(hs[0], root, "kubepods", "pod1")
		if err := os.MkdirAll(pod, 0o755); err != nil {
			t.Fatal(err)
		}
		got := cgroupDirs(dir)
		if len(got) != len(hs) {
			t.Errorf("cgroupDirs = %v, want %s in each of %v", got, root, hs)
		}
		for _, c := range got {
			removeCgroupTree(c)
		}
		for _, h := range hs {
			if _, err := os.Stat(filepath.Join(h, root)); err == nil {
				t.Errorf("%s left in %s", root, h)
				_ = syscall.Rmdir(filepath.Join(h, root))
			}
		}
	})
}
