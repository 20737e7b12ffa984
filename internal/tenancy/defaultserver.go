package tenancy

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

// Reasons of a binding refused for want of one default server.
const (
	// ReasonNoDefaultServer: the Tenant names no server, and no server is
	// the default of its namespace.
	ReasonNoDefaultServer = "NoDefaultServer"
	// ReasonDefaultServerAmbiguous: the Tenant names no server, and two or
	// more servers are the default of its namespace; none is picked.
	ReasonDefaultServerAmbiguous = "DefaultServerAmbiguous"
)

// DefaultCandidate is a ClusterProviderConfig marked default
// (spec.namespaces.default), as read.
type DefaultCandidate struct {
	Name     string
	Deleting bool
	// Selector is its spec.namespaces.selector (nil: every namespace).
	Selector *metav1.LabelSelector
}

// DefaultChoice is which servers are the default of one namespace.
type DefaultChoice struct {
	// Read: the default servers were read. A binding that needs the
	// default and did not read it takes nothing.
	Read bool
	// Serving are the default servers whose selector selects the
	// namespace, by name.
	Serving []string
	// Invalid are the default servers whose selector cannot be applied,
	// by name (why is the admin's to read, on the config).
	Invalid []string
}

// NeedsNamespaceLabels reports whether choosing among candidates reads the
// namespace's labels: only a default with a non-empty selector does.
func NeedsNamespaceLabels(candidates []DefaultCandidate) bool {
	for _, c := range candidates {
		if !c.Deleting && c.Selector != nil && (len(c.Selector.MatchLabels) > 0 || len(c.Selector.MatchExpressions) > 0) {
			return true
		}
	}
	return false
}

// ChooseDefault says which of the default servers serve a namespace with
// the labels nsLabels. A default being deleted serves no new Tenant: an
// admin moving the default deletes the old one and marks another.
func ChooseDefault(nsLabels map[string]string, candidates []DefaultCandidate) DefaultChoice {
	c := DefaultChoice{Read: true}
	for _, d := range candidates {
		if d.Deleting {
			continue
		}
		if d.Selector == nil {
			c.Serving = append(c.Serving, d.Name)
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Selector)
		if err != nil {
			c.Invalid = append(c.Invalid, d.Name)
			continue
		}
		if sel.Matches(labels.Set(nsLabels)) {
			c.Serving = append(c.Serving, d.Name)
		}
	}
	slices.Sort(c.Serving)
	slices.Sort(c.Invalid)
	return c
}

// defaultInstance is the server a binding that names none takes a new
// Database on, or the decision that it takes none.
func defaultInstance(s BindingSpec, c DefaultChoice) (string, BindingDecision, bool) {
	switch {
	case !c.Read:
		return "", wait(v1alpha1.BindingPhasePending, ReasonInstanceNotReady, "which server is the default of this namespace is not read yet"), false
	case len(c.Invalid) > 0:
		// It might serve the namespace: choosing without it could place
		// the Tenant on a server the admin did not mean.
		return "", wait(v1alpha1.BindingPhasePending, ReasonInstanceNotReady, fmt.Sprintf("the default ClusterProviderConfig %s has a namespace selector that cannot be applied: nothing is created until your platform team fixes it, or set spec.instanceRef", strings.Join(c.Invalid, ", "))), false
	case len(c.Serving) == 0:
		return "", refuse(v1alpha1.BindingPhasePending, ReasonNoDefaultServer, fmt.Sprintf("the Tenant names no server (spec.instanceRef) and no server is the default of namespace %s: nothing is created; set spec.instanceRef, or ask your platform team to mark a server default for this namespace", s.Namespace)), false
	case len(c.Serving) > 1:
		return "", refuse(v1alpha1.BindingPhasePending, ReasonDefaultServerAmbiguous, fmt.Sprintf("the Tenant names no server (spec.instanceRef) and ClusterProviderConfigs %s are all the default of namespace %s: none is picked and nothing is created; set spec.instanceRef, or ask your platform team to keep one default", strings.Join(c.Serving, ", "), s.Namespace)), false
	}
	return c.Serving[0], BindingDecision{}, true
}
