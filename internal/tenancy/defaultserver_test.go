package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestChooseDefault(t *testing.T) {
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
	broken := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
	cases := map[string]struct {
		labels     map[string]string
		candidates []DefaultCandidate
		want       DefaultChoice
		needLabels bool
	}{
		"NoneMarked": {want: DefaultChoice{Read: true}},
		"OneForEveryNamespace": {
			candidates: []DefaultCandidate{{Name: "shared"}},
			want:       DefaultChoice{Read: true, Serving: []string{"shared"}},
		},
		"SelectorPicksTheNamespacesDefault": {
			labels:     map[string]string{"team": "shop"},
			candidates: []DefaultCandidate{{Name: "prod", Selector: team}, {Name: "small", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}}}},
			want:       DefaultChoice{Read: true, Serving: []string{"prod"}},
			needLabels: true,
		},
		"TwoServingAreBothShown": {
			labels:     map[string]string{"team": "shop"},
			candidates: []DefaultCandidate{{Name: "small"}, {Name: "prod", Selector: team}},
			want:       DefaultChoice{Read: true, Serving: []string{"prod", "small"}},
			needLabels: true,
		},
		"AnEmptySelectorServesEveryNamespace": {
			candidates: []DefaultCandidate{{Name: "shared", Selector: &metav1.LabelSelector{}}},
			want:       DefaultChoice{Read: true, Serving: []string{"shared"}},
		},
		"BeingDeletedServesNoNewTenant": {
			candidates: []DefaultCandidate{{Name: "old", Deleting: true}, {Name: "new"}},
			want:       DefaultChoice{Read: true, Serving: []string{"new"}},
		},
		"AnInvalidSelectorIsNamed": {
			candidates: []DefaultCandidate{{Name: "shared"}, {Name: "odd", Selector: broken}},
			want:       DefaultChoice{Read: true, Serving: []string{"shared"}, Invalid: []string{"odd"}},
			needLabels: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ChooseDefault(tc.labels, tc.candidates), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ChooseDefault: -want +got:\n%s", diff)
			}
			if got := NeedsNamespaceLabels(tc.candidates); got != tc.needLabels {
				t.Errorf("NeedsNamespaceLabels: got %v, want %v", got, tc.needLabels)
			}
		})
	}
}

func TestDecideBindingDefaultServer(t *testing.T) {
	onDefault := func() BindingSpec {
		s := dynamicSpec()
		s.Instance, s.InstanceKind = "", ""
		return s
	}
	choice := func(c DefaultChoice) func(*BindingObservation) {
		return func(o *BindingObservation) { o.Default = c }
	}
	one := choice(DefaultChoice{Read: true, Serving: []string{"pg-a"}})
	bound := func() ObservedDatabase {
		d := boundDB()
		d.Name = DynamicDatabaseName("t-1")
		d.Instance = "pg-b"
		return d
	}
	rec := BindingRecord{DatabaseName: DynamicDatabaseName("t-1"), DatabaseUID: "d-1"}
	cases := map[string]struct {
		o    BindingObservation
		want BindingDecision
		msg  string
		// on is the server the Database is created on ("": none created).
		on string
	}{
		"OneDefaultIsWhereTheDatabaseIsCreated": {
			o:    obs(onDefault(), ObservedDatabase{}, one),
			want: BindingDecision{Action: ActionCreateDynamic, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonProvisioning},
			msg:  "on ClusterProviderConfig pg-a", on: "pg-a",
		},
		"NoDefaultIsRefused": {
			o:    obs(onDefault(), ObservedDatabase{}, choice(DefaultChoice{Read: true})),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNoDefaultServer},
			msg:  "no server is the default of namespace shop",
		},
		"TwoDefaultsAreRefusedAndNamed": {
			o:    obs(onDefault(), ObservedDatabase{}, choice(DefaultChoice{Read: true, Serving: []string{"pg-a", "pg-b"}})),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonDefaultServerAmbiguous},
			msg:  "pg-a, pg-b are all the default of namespace shop",
		},
		"UnreadDefaultTakesNothing": {
			o:    obs(onDefault(), ObservedDatabase{}),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
			msg:  "not read yet",
		},
		"AnInvalidDefaultSelectorTakesNothing": {
			o:    obs(onDefault(), ObservedDatabase{}, choice(DefaultChoice{Read: true, Serving: []string{"pg-a"}, Invalid: []string{"odd"}})),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
			msg:  "default ClusterProviderConfig odd",
		},
		// The namespace policy of the default applies as to a named one.
		"TheDefaultsLimitApplies": {
			o: obs(onDefault(), ObservedDatabase{}, one, func(o *BindingObservation) {
				o.Instance.Namespace = NamespaceUse{Read: true, Selected: true, Limited: true, Limit: 1, Held: 1}
			}),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNamespaceLimitReached},
			msg:  "ClusterProviderConfig pg-a allows",
		},
		"AMissingDefaultWaits": {
			o:    obs(onDefault(), ObservedDatabase{}, one, func(o *BindingObservation) { o.Instance = ObservedInstance{} }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
			msg:  "pg-a does not exist",
		},
		// Once created, the Database is where the Tenant is: a default
		// moved (or gone) later changes nothing.
		"BoundStaysWhereItLanded": {
			o:    obs(onDefault(), bound(), choice(DefaultChoice{Read: true, Serving: []string{"pg-a", "pg-c"}}), func(o *BindingObservation) { o.Recorded = rec }),
			want: BindingDecision{Action: ActionCopyCredential, Phase: v1alpha1.BindingPhaseProvisioning, Reason: ReasonDelivering, Record: rec},
			msg:  "bound and Ready",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBinding(tc.o)
			if diff := cmp.Diff(tc.want, got, ignoreDetail, cmpopts.IgnoreFields(BindingDecision{}, "Create")); diff != "" {
				t.Errorf("DecideBinding: -want +got:\n%s", diff)
			}
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", got.Message, tc.msg)
			}
			on := ""
			if got.Create != nil {
				on = got.Create.Spec.ProviderConfigReference.Name
			}
			if on != tc.on {
				t.Errorf("created on %q, want %q", on, tc.on)
			}
		})
	}
}
