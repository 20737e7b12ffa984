package v1alpha1

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Package type metadata.
const (
	Group   = "database.ayatori.ddupan.top"
	Version = "v1alpha1"
)

var (
	// SchemeGroupVersion is the group version of every type in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder adds the types of this package to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}
)

// ClusterProviderConfig type metadata.
var (
	ClusterProviderConfigKind             = reflect.TypeOf(ClusterProviderConfig{}).Name()
	ClusterProviderConfigGroupKind        = schema.GroupKind{Group: Group, Kind: ClusterProviderConfigKind}.String()
	ClusterProviderConfigGroupVersionKind = SchemeGroupVersion.WithKind(ClusterProviderConfigKind)
)

// ProviderConfigUsage type metadata: a DatabaseBinding's usage of its
// instance, in the binding's namespace.
var (
	ProviderConfigUsageKind                 = reflect.TypeOf(ProviderConfigUsage{}).Name()
	ProviderConfigUsageGroupVersionKind     = SchemeGroupVersion.WithKind(ProviderConfigUsageKind)
	ProviderConfigUsageListKind             = reflect.TypeOf(ProviderConfigUsageList{}).Name()
	ProviderConfigUsageListGroupVersionKind = SchemeGroupVersion.WithKind(ProviderConfigUsageListKind)
)

// ClusterProviderConfigUsage type metadata: a Database's usage of its
// instance.
var (
	ClusterProviderConfigUsageKind                 = reflect.TypeOf(ClusterProviderConfigUsage{}).Name()
	ClusterProviderConfigUsageGroupVersionKind     = SchemeGroupVersion.WithKind(ClusterProviderConfigUsageKind)
	ClusterProviderConfigUsageListKind             = reflect.TypeOf(ClusterProviderConfigUsageList{}).Name()
	ClusterProviderConfigUsageListGroupVersionKind = SchemeGroupVersion.WithKind(ClusterProviderConfigUsageListKind)
)

// Database type metadata.
var (
	DatabaseKind             = reflect.TypeOf(Database{}).Name()
	DatabaseGroupKind        = schema.GroupKind{Group: Group, Kind: DatabaseKind}.String()
	DatabaseKindAPIVersion   = DatabaseKind + "." + SchemeGroupVersion.String()
	DatabaseGroupVersionKind = SchemeGroupVersion.WithKind(DatabaseKind)
)

// DatabaseBinding type metadata.
var (
	DatabaseBindingKind             = reflect.TypeOf(DatabaseBinding{}).Name()
	DatabaseBindingGroupKind        = schema.GroupKind{Group: Group, Kind: DatabaseBindingKind}.String()
	DatabaseBindingKindAPIVersion   = DatabaseBindingKind + "." + SchemeGroupVersion.String()
	DatabaseBindingGroupVersionKind = SchemeGroupVersion.WithKind(DatabaseBindingKind)
)

func init() {
	SchemeBuilder.Register(&ClusterProviderConfig{}, &ClusterProviderConfigList{})
	SchemeBuilder.Register(&ProviderConfigUsage{}, &ProviderConfigUsageList{})
	SchemeBuilder.Register(&ClusterProviderConfigUsage{}, &ClusterProviderConfigUsageList{})
	SchemeBuilder.Register(&Database{}, &DatabaseList{})
	SchemeBuilder.Register(&DatabaseBinding{}, &DatabaseBindingList{})
}
