// Package apis aggregates the provider's API types into one scheme.
package apis

import (
	"k8s.io/apimachinery/pkg/runtime"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// AddToScheme adds every API type of this provider to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	return v1alpha1.SchemeBuilder.AddToScheme(s)
}
