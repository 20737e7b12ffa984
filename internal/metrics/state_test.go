package metrics

import (
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

func config(name string, c ...xpv2.Condition) v1alpha1.ClusterProviderConfig {
	o := v1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	o.SetConditions(c...)
	return o
}

func database(phase v1alpha1.BindingPhase, c ...xpv2.Condition) v1alpha1.Database {
	o := v1alpha1.Database{}
	o.SetConditions(c...)
	o.Status.Binding.Phase = phase
	return o
}

func binding(c ...xpv2.Condition) v1alpha1.DatabaseBinding {
	o := v1alpha1.DatabaseBinding{}
	o.SetConditions(c...)
	return o
}

func ready(status corev1.ConditionStatus, reason string) xpv2.Condition {
	return xpv2.Condition{Type: xpv2.TypeReady, Status: status, Reason: xpv2.ConditionReason(reason)}
}

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func at(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// withRotations is a Database whose data roles rotate next at each of
// next (nil: no policy).
func withRotations(next ...*metav1.Time) v1alpha1.Database {
	o := v1alpha1.Database{}
	for _, n := range next {
		o.Status.AtProvider.DataRoles = append(o.Status.AtProvider.DataRoles, v1alpha1.DataRoleObservation{Name: "app", NextRotationAt: n})
	}
	return o
}

func TestTakeSnapshot(t *testing.T) {
	cases := map[string]struct {
		configs  []v1alpha1.ClusterProviderConfig
		dbs      []v1alpha1.Database
		bindings []v1alpha1.DatabaseBinding
		want     Snapshot
	}{
		"Nothing": {
			want: Snapshot{ConfigReady: map[string]bool{}, NotReady: map[NotReadyKey]int{}},
		},
		"ConfigsByReadyCondition": {
			configs: []v1alpha1.ClusterProviderConfig{
				config("up", ready(corev1.ConditionTrue, "Available")),
				config("down", ready(corev1.ConditionFalse, "Unreachable")),
				config("new"),
			},
			want: Snapshot{ConfigReady: map[string]bool{"up": true, "down": false, "new": false}, NotReady: map[NotReadyKey]int{}},
		},
		"NotReadyByKindAndReason": {
			dbs: []v1alpha1.Database{
				database(v1alpha1.BindingBound, ready(corev1.ConditionTrue, "Available")),
				database(v1alpha1.BindingBound, ready(corev1.ConditionFalse, "InstanceNotReady")),
				database(v1alpha1.BindingAvailable, ready(corev1.ConditionFalse, "InstanceNotReady")),
				database(""),
			},
			bindings: []v1alpha1.DatabaseBinding{
				binding(ready(corev1.ConditionTrue, "Available")),
				binding(ready(corev1.ConditionFalse, "DatabaseNotReady")),
			},
			want: Snapshot{ConfigReady: map[string]bool{}, NotReady: map[NotReadyKey]int{
				{Kind: "Database", Reason: "InstanceNotReady"}:        2,
				{Kind: "Database", Reason: "Unknown"}:                 1,
				{Kind: "DatabaseBinding", Reason: "DatabaseNotReady"}: 1,
			}},
		},
		"ReleasedCountsWhateverTheReadiness": {
			dbs: []v1alpha1.Database{
				database(v1alpha1.BindingReleased, ready(corev1.ConditionTrue, "Available")),
				database(v1alpha1.BindingReleased, ready(corev1.ConditionFalse, "InstanceNotReady")),
				database(v1alpha1.BindingBound, ready(corev1.ConditionTrue, "Available")),
			},
			want: Snapshot{ConfigReady: map[string]bool{}, NotReady: map[NotReadyKey]int{{Kind: "Database", Reason: "InstanceNotReady"}: 1}, Released: 2},
		},
		// A rotation by age more than an hour late is overdue; one due soon,
		// just late, or without a policy is not.
		"OverdueRotations": {
			dbs: []v1alpha1.Database{withRotations(
				at(now.Add(-2*time.Hour)), at(now.Add(-30*time.Minute)), at(now.Add(time.Hour)), nil,
			), withRotations(at(now.Add(-OverdueAfter - time.Second)))},
			want: Snapshot{ConfigReady: map[string]bool{}, NotReady: map[NotReadyKey]int{{Kind: "Database", Reason: "Unknown"}: 2}, Overdue: 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := TakeSnapshot(now, tc.configs, tc.dbs, tc.bindings)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TakeSnapshot: -want +got:\n%s", diff)
			}
		})
	}
}

// The gauges export nothing before the first snapshot, then exactly the
// snapshot, with no label naming a database, role or namespace.
func TestStateCollects(t *testing.T) {
	s := &State{}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("before the first snapshot: %d series (%v), want none", n, err)
	}
	s.Set(Snapshot{
		ConfigReady: map[string]bool{"a": true, "b": false},
		NotReady:    map[NotReadyKey]int{{Kind: "Database", Reason: "InstanceNotReady"}: 3},
		Released:    2,
		Overdue:     1,
	})
	want := `
# HELP provider_postgresql_tenant_config_ready 1 when the ClusterProviderConfig (a registered server) is Ready, 0 otherwise; one series per config.
# TYPE provider_postgresql_tenant_config_ready gauge
provider_postgresql_tenant_config_ready{config="a"} 1
provider_postgresql_tenant_config_ready{config="b"} 0
# HELP provider_postgresql_tenant_credentials_overdue Data role credentials whose rotation by the credential policy's maxAge is more than an hour late (status.atProvider.dataRoles[].nextRotationAt): their rotation is failing.
# TYPE provider_postgresql_tenant_credentials_overdue gauge
provider_postgresql_tenant_credentials_overdue 1
# HELP provider_postgresql_tenant_not_ready Databases and DatabaseBindings whose Ready condition is not True, by kind and the condition's reason (Unknown when there is none yet).
# TYPE provider_postgresql_tenant_not_ready gauge
provider_postgresql_tenant_not_ready{kind="Database",reason="InstanceNotReady"} 3
# HELP provider_postgresql_tenant_released_databases Databases in the Released phase: their Tenant is gone and an admin decides whether to rebind, keep or delete them.
# TYPE provider_postgresql_tenant_released_databases gauge
provider_postgresql_tenant_released_databases 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// The failure results the database controller passes are the series
// initialised at start.
func TestLoginFailureResults(t *testing.T) {
	got := []string{tenancy.LoginFailure(tenancy.LoginRefused), tenancy.LoginFailure(tenancy.LoginUnavailable)}
	if diff := cmp.Diff([]string{LoginRefused, LoginUnavailable}, got); diff != "" {
		t.Errorf("-metrics +tenancy:\n%s", diff)
	}
}
