package v1alpha1

import xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

// The provider never publishes connection details. crossplane-runtime's
// managed reconciler writes a Kubernetes Secret for every managed resource
// that names one in spec.writeConnectionSecretToRef, and its options to
// replace those publishers are unexported. The CRDs refuse the field; these
// methods, which angryjet leaves to this file, report it unset regardless,
// so that an object stored before that rule (or with it bypassed) gets no
// Secret either: the publishers write only when it is set.

// GetWriteConnectionSecretToReference of a Database is always nil: no
// Secret is ever written for it.
func (mg *Database) GetWriteConnectionSecretToReference() *xpv2.SecretReference { return nil }

// GetWriteConnectionSecretToReference of a DatabaseBinding is always nil:
// no Secret is ever written for it.
func (mg *DatabaseBinding) GetWriteConnectionSecretToReference() *xpv2.LocalSecretReference {
	return nil
}
