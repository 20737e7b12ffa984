package testenv

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A provider container killed at its fault point before the harness saw
// its Pod Ready is the one a kill test waits for, not its replacement.
func TestFirstContainerOfARestartedPod(t *testing.T) {
	running := corev1.ContainerStatus{ContainerID: "containerd://b"}
	if got := firstContainer(running); got != "containerd://b" {
		t.Errorf("never restarted: %q, want the running one", got)
	}
	restarted := corev1.ContainerStatus{ContainerID: "containerd://b", RestartCount: 1,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://a", ExitCode: 137}}}
	if got := firstContainer(restarted); got != "containerd://a" {
		t.Errorf("killed before it was seen Ready: %q, want the one that exited", got)
	}
}
