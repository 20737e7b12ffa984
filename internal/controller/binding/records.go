package binding

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// RecordVersions tells which version of a Database's credential record
// the Database controller's standing login proved (memo.Logins).
type RecordVersions interface {
	RecordVersion(uid types.UID, now time.Time) (version int, ok bool)
}
