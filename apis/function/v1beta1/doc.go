// Package v1beta1 contains the input of the Tenant composition function,
// in the fn.database.ayatori.ddupan.top group. It is the function's input
// only, never a resource of a cluster: its schema ships in the function's
// package so that Compositions can be validated offline.
// +kubebuilder:object:generate=true
// +groupName=fn.database.ayatori.ddupan.top
// +versionName=v1beta1
package v1beta1
