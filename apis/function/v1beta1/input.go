package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Input is what a platform admin may choose in the Tenant Compositions:
// where the ExternalSecret reads the delivery copy, and how often ESO
// re-reads it.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=crossplane
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// SecretStore is the ClusterSecretStore (ESO) that reads the tenants'
	// delivery copies in OpenBao.
	// +kubebuilder:default=openbao-tenants
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SecretStore string `json:"secretStore,omitempty"`

	// RefreshInterval is the ExternalSecret's refreshInterval: how often ESO
	// re-reads the copy (a rotated password reaches the Secret within it).
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	RefreshInterval string `json:"refreshInterval,omitempty"`
}
