package testenv

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// /proc/<pid>/stat: the command name may hold spaces and parentheses; the
// state, the parent and the start time follow the last ')'.
func TestParseProcStat(t *testing.T) {
	line := "4242 (a (b) c) d) T 17 4242 4242 0 -1 4194560 120 0 0 0 7 3 0 0 20 0 4 0 987654321 1000 20 18446744073709551615\n"
	got, err := ParseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ProcStat{Comm: "a (b) c) d", PPID: 17, State: 'T', Start: 987654321, UTime: 7, STime: 3}); got != want {
		t.Errorf("ParseProcStat = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "4242 no name S 1", "4242 (x) S 1 2 3", "4242 (x) S one 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := ParseProcStat(bad); err == nil {
			t.Errorf("ParseProcStat(%q) = nil error", bad)
		}
	}
	self, ok := readProcInfo(os.Getpid())
	if !ok {
		t.Fatal("cannot read /proc/self/stat")
	}
	if self.PPID != os.Getppid() || self.Start == 0 {
		t.Errorf("this process: %+v, want parent %d and a start time", self, os.Getppid())
	}
}

func TestDescendants(t *testing.T) {
	MajorIndependent(t)
	tab := map[int]ProcStat{
		1: {PPID: 0}, 10: {PPID: 1}, 11: {PPID: 10}, 12: {PPID: 10}, 13: {PPID: 12},
		20: {PPID: 1}, 21: {PPID: 20},
	}
	if got, want := descendants(tab, 10), []int{11, 12, 13}; !slices.Equal(got, want) {
		t.Errorf("descendants of 10 = %v, want %v", got, want)
	}
	if got := descendants(tab, 13); len(got) != 0 {
		t.Errorf("descendants of a leaf = %v", got)
	}
	if got := descendants(tab, 99); len(got) != 0 {
		t.Errorf("descendants of a missing process = %v", got)
	}
}

// A process tree is stopped whole, resumed whole and killed whole; a PID
// whose start time does not match is never signalled.
func TestProcessTree(t *testing.T) {
	MajorIndependent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "sleep 300 & sleep 300 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	root := cmd.Process.Pid
	t.Cleanup(func() {
		for _, r := range treeRefs(root) {
			_ = r.signal(syscall.SIGKILL)
		}
		<-done
	})
	if err := WaitFor(ctx, 0, func(context.Context) error {
		if n := len(treeRefs(root)); n != 3 {
			return ErrNotYet
		}
		return nil
	}); err != nil {
		t.Fatalf("the shell and its two sleeps: %v (%v)", err, treeRefs(root))
	}

	refs, err := stopTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 3 || refs[0].PID != root {
		t.Fatalf("stopTree = %v, want the shell first and its two children", refs)
	}
	waitStopped(refs, 5*time.Second)
	for _, r := range refs {
		if err := notStopped(r.PID); err == nil || !strings.Contains(err.Error(), "stopped") {
			t.Errorf("process %d after stopTree: %v, want stopped", r.PID, err)
		}
	}
	if err := resumeRefs(refs); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, 0, func(context.Context) error {
		for _, r := range refs {
			if err := notStopped(r.PID); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("after resumeRefs: %v", err)
	}

	// Another process's start time: not signalled.
	stale := procRef{PID: refs[1].PID, Start: refs[1].Start + 1}
	if err := stale.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !refs[1].alive() {
		t.Fatal("a signal with a stale start time reached the process")
	}

	refs, err = stopTree(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if err := r.signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitGone(ctx, refs); err != nil {
		t.Fatal(err)
	}
	<-done
	if _, err := stopTree(root); err == nil {
		t.Error("stopTree of a reaped process: no error")
	}
}

// Targets follow the environment; a target it does not run, an unknown
// one and the network without a node are clear errors, and the network is
// never changed outside the node's namespace.
func TestFaultsBadInput(t *testing.T) {
	MajorIndependent(t)
	t.Setenv(nodeNetnsEnv, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := NewFaults(ctx, nil); err == nil {
		t.Error("NewFaults(nil): no error")
	}
	f, err := NewFaults(ctx, &Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Targets(); len(got) != 0 {
		t.Errorf("Targets of an empty environment = %v", got)
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"Kill unknown", f.Kill(ctx, "nope"), `unknown fault target "nope"`},
		{"Restart unknown", f.Restart(ctx, "kubelet"), `unknown fault target "kubelet"`},
		{"Pause unknown", f.Pause(""), `unknown fault target ""`},
		{"Resume unknown", f.Resume("nope"), "unknown fault target"},
		{"Kill provider", f.Kill(ctx, TargetProvider), "only with Options.Node"},
		{"Pause function", f.Pause(TargetFunction), "NodeConfiguration"},
		{"Kill postgresql", f.Kill(ctx, TargetPostgres), "Options.Postgres"},
		{"Restart etcd", f.Restart(ctx, TargetEtcd), "Options.Kube"},
		{"Seal", f.Seal(ctx), "Options.OpenBao"},
		{"Unseal", f.Unseal(ctx), "Options.OpenBao"},
		{"CutNetwork", f.CutNetwork(), "only with Options.Node"},
		{"RestoreNetwork", f.RestoreNetwork(), "only with Options.Node"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, c.err, c.want)
		}
	}
	if err := f.Healthy(ctx); err != nil {
		t.Errorf("Healthy with no target: %v", err)
	}

	// A node's Faults outside its namespace: refused before nft runs.
	nf, err := NewFaults(ctx, &Env{Node: &Node{}})
	if err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func() error{"CutNetwork": nf.CutNetwork, "RestoreNetwork": nf.RestoreNetwork} {
		if err := fn(); err == nil || !strings.Contains(err.Error(), "not changing the network") {
			t.Errorf("%s outside the node's namespace: %v, want a refusal", name, err)
		}
	}
	nf.Close()
}

// The cut drops what crosses the Pods' bridge both ways, in a table of its
// own that the restore removes whether or not it is there.
func TestCutRuleset(t *testing.T) {
	MajorIndependent(t)
	cut, restore := cutRuleset(), restoreRuleset()
	for _, want := range []string{restore, "table inet " + faultsTable, `iifname "cni0" drop`, `oifname "cni0" drop`, "hook prerouting", "hook postrouting"} {
		if !strings.Contains(cut, want) {
			t.Errorf("cut ruleset lacks %q:\n%s", want, cut)
		}
	}
	if !strings.HasPrefix(cut, restore) {
		t.Errorf("the cut does not first remove an earlier cut:\n%s", cut)
	}
	if want := "add table inet " + faultsTable + "\ndelete table inet " + faultsTable + "\n"; restore != want {
		t.Errorf("restore ruleset = %q, want %q", restore, want)
	}
}
