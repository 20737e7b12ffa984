package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CredentialPolicy is how long the data roles' passwords live and how a
// rotation hands over from one login to the next. Each data role has two
// login members that take turns: a rotation gives the member not in use a
// new password and makes it the record's username, and the previous one
// keeps logging in for the grace period, so that every app reads the new
// credential before the old one stops working.
// +kubebuilder:validation:XValidation:rule="!has(self.maxAge) || duration(self.maxAge) >= duration('1s')",message="credentialPolicy.maxAge must be at least 1s",fieldPath=".maxAge"
// +kubebuilder:validation:XValidation:rule="!has(self.gracePeriod) || duration(self.gracePeriod) >= duration('0s')",message="credentialPolicy.gracePeriod must not be negative",fieldPath=".gracePeriod"
type CredentialPolicy struct {
	// MaxAge is the longest a data role's password lives: once it is that
	// old, the provider rotates it (each role a little earlier, at a point
	// of the last tenth of MaxAge fixed per role, so that many Databases
	// made at once do not all rotate in the same minute). Unset: a
	// password is rotated only on request (credentialRotation).
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`

	// GracePeriod is how long the previous login keeps its password after
	// a rotation (default 10m: the kubelet refreshes a mounted Secret
	// within about a minute and a half of the External Secrets Operator
	// writing it, which it does at once). Then the previous login's
	// password is replaced by one nobody knows, and its sessions are ended
	// when the rotation asked for it. A rotation waits until the previous
	// login's grace has ended. 0s ends it at once (a credential known to
	// have leaked).
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}
