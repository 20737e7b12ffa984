//go:build !generate

package v1alpha1

import "github.com/crossplane/crossplane-runtime/v2/pkg/resource"

// These assertions live in their own file, excluded while generating: the
// methods they need are written by angryjet, which cannot load a package that
// does not compile yet.
var (
	_ resource.ProviderConfig            = &ClusterProviderConfig{}
	_ resource.TypedProviderConfigUsage  = &ProviderConfigUsage{}
	_ resource.ProviderConfigUsageList   = &ProviderConfigUsageList{}
	_ resource.LegacyProviderConfigUsage = &ClusterProviderConfigUsage{} //nolint:staticcheck // cluster-scoped on purpose; crossplane-runtime calls cluster-scoped kinds Legacy
	_ resource.ProviderConfigUsageList   = &ClusterProviderConfigUsageList{}
	_ resource.LegacyManaged             = &Database{} //nolint:staticcheck // cluster-scoped on purpose; crossplane-runtime calls cluster-scoped kinds Legacy
	_ resource.ManagedList               = &DatabaseList{}
	_ resource.ModernManaged             = &DatabaseBinding{}
	_ resource.ManagedList               = &DatabaseBindingList{}
)
