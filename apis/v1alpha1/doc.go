// Package v1alpha1 contains the v1alpha1 API of the database.ayatori.ddupan.top
// group: ClusterProviderConfig, ProviderConfig, ProviderConfigUsage and the
// Database managed resource.
// +kubebuilder:object:generate=true
// +groupName=database.ayatori.ddupan.top
// +versionName=v1alpha1
package v1alpha1
