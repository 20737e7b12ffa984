package memo

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestDataRoleKey(t *testing.T) {
	if got, want := DataRoleKey("0b5e", "report"), types.UID("0b5e/data-role/report"); got != want {
		t.Errorf("DataRoleKey = %q, want %q", got, want)
	}
	// A data role's key never is its Database's, nor another role's.
	if DataRoleKey("0b5e", "app") == DataRoleKey("0b5e", "report") || DataRoleKey("0b5e", "app") == "0b5e" {
		t.Error("DataRoleKey does not tell the roles and their Database apart")
	}
}

func TestPoolRef(t *testing.T) {
	if got, want := PoolRef("ClusterProviderConfig", "", "main"), "ClusterProviderConfig//main"; got != want {
		t.Errorf("PoolRef = %q, want %q", got, want)
	}
}
