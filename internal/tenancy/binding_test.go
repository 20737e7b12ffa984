package tenancy

import (
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

var (
	bReady    = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: "Available"}
	bNotReady = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Creating", Message: "step role"}
	bInstance = ObservedInstance{Present: true, Ready: bReady, DefaultReclaimPolicy: v1alpha1.ReclaimDelete,
		Namespace: NamespaceUse{Read: true, Selected: true}}
)

func staticSpec() BindingSpec {
	return BindingSpec{Namespace: "shop", Name: "shop-db", UID: "b-1", TenantName: "shop", TenantUID: "t-1", Controller: tenantRef("shop", "t-1"),
		DatabaseRef: "orders", InstanceKind: v1alpha1.ClusterProviderConfigKind, Instance: "pg-a"}
}

func dynamicSpec() BindingSpec {
	return BindingSpec{Namespace: "shop", Name: "shop-db", UID: "b-1", TenantName: "shop", TenantUID: "t-1", Controller: tenantRef("shop", "t-1"),
		Database: "shop", LoginRole: "shop_owner", Extensions: []string{"pg_trgm"}, InstanceKind: v1alpha1.ClusterProviderConfigKind, Instance: "pg-a"}
}

func ourClaim() *v1alpha1.ClaimReference {
	return &v1alpha1.ClaimReference{Namespace: "shop", Name: "shop", UID: "t-1"}
}

// availableDB is a Ready Database with no claim.
func availableDB() ObservedDatabase {
	return ObservedDatabase{Present: true, Name: "orders", UID: "d-1", ResourceVersion: "41", Ready: bReady,
		ReclaimPolicy: v1alpha1.ReclaimRetain, Instance: "pg-a", Database: "orders", LoginRole: "orders",
		RecordPath: "postgresql-databases/orders"}
}

func boundDB() ObservedDatabase {
	d := availableDB()
	d.ClaimRef = ourClaim()
	d.ClaimantLive = true
	return d
}

func tenantRef(name, uid string) ControllerRef {
	return ControllerRef{APIVersion: TenantAPIVersion, Kind: TenantKind, Name: name, UID: uid}
}

// obs is an observation of a binding that is its Tenant's.
func obs(s BindingSpec, d ObservedDatabase, mut ...func(*BindingObservation)) BindingObservation {
	o := BindingObservation{Spec: s, Database: d, Instance: bInstance, Standing: StandingVerdict{Standing: StandingTenants}}
	for _, m := range mut {
		m(&o)
	}
	return o
}

func recorded(o *BindingObservation) {
	o.Recorded = BindingRecord{DatabaseName: "orders", DatabaseUID: "d-1"}
}

// only compares what a case names: action, phase, reason and a message
// fragment are checked separately.
var ignoreDetail = cmpopts.IgnoreFields(BindingDecision{}, "Message")

func TestDecideBindingStatic(t *testing.T) {
	claim := ourClaim()
	rec := BindingRecord{DatabaseName: "orders", DatabaseUID: "d-1"}
	cases := map[string]struct {
		o    BindingObservation
		want BindingDecision
		// msg must appear in the message; none of hide may.
		msg  string
		hide []string
	}{
		"AvailableIsClaimedWithTheResourceVersionRead": {
			o:    obs(staticSpec(), availableDB()),
			want: BindingDecision{Action: ActionWriteClaim, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Claim: claim, ResourceVersion: "41"},
		},
		"PreBoundByNamespaceAndNameIsClaimedWithTheUID": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "shop", Name: "shop"}
				return d
			}()),
			want: BindingDecision{Action: ActionWriteClaim, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Claim: claim, ResourceVersion: "41"},
		},
		"ReservedForAnotherTenant": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "shop", Name: "billing"}
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonAlreadyBound},
			msg:  "reserved for the Tenant billing of this namespace",
		},
		"ReservedInAnotherNamespace": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "other", Name: "shop"}
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonAlreadyBound},
		},
		"TakenByALiveTenant": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "billing", Name: "billing", UID: "t-9"}
				d.ClaimantLive = true
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonAlreadyBound},
			msg:  "bound to a Tenant of another namespace",
			hide: []string{"billing/", "t-9"},
		},
		"ReleasedByAnotherTenant": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "billing", Name: "billing", UID: "t-9"}
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonReleased},
			msg:  "released by a Tenant of another namespace",
			hide: []string{"billing", "t-9"},
		},
		"ReleasedIsNotReboundToANewTenantOfTheSameName": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "shop", Name: "shop", UID: "t-0"}
				d.Binding = ReleasedStatus(*d.ClaimRef)
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonReleased},
			msg:  "earlier Tenant of this name",
			hide: []string{"t-0"},
		},
		// The Database records that this very claim was released: even a
		// binding of the Tenant it names (here one that is its Tenant's)
		// does not bind it again; only an admin's claimRef edit does.
		"ReleasedForThisClaimIsNotRebound": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ClaimantLive = false
				d.Binding = ReleasedStatus(*d.ClaimRef)
				return d
			}(), recorded),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonReleased},
			msg:  "released by this Tenant",
			hide: []string{"t-1"},
		},
		"BeingDeleted": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.Deleting = true
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonDatabaseNotReady},
			msg:  "being deleted",
		},
		"NotReady": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.Ready = bNotReady
				return d
			}()),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonDatabaseNotReady},
			// Not its own Database: its Ready reason and message are not
			// relayed.
			msg:  "Database orders is not Ready yet",
			hide: []string{"Creating", "step role"},
		},
		"ReadyWithoutARecord": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.RecordPath = ""
				return d
			}()),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonDatabaseNotReady},
		},
		"InstanceNotReady": {
			o:    obs(staticSpec(), availableDB(), func(o *BindingObservation) { o.Instance.Ready = bNotReady }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
			msg:  "ClusterProviderConfig pg-a is not Ready",
		},
		"InstanceBeingDeleted": {
			o:    obs(staticSpec(), availableDB(), func(o *BindingObservation) { o.Instance.Deleting = true }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
		},
		"InstanceAbsent": {
			o:    obs(staticSpec(), availableDB(), func(o *BindingObservation) { o.Instance = ObservedInstance{} }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
		},
		"WrongInstance": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.Instance = "pg-b"
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonWrongInstance},
			msg:  "is on ClusterProviderConfig pg-b, not on pg-a",
		},
		"NoInstanceNamedTakesTheDatabases": {
			o: obs(func() BindingSpec { s := staticSpec(); s.Instance, s.InstanceKind = "", ""; return s }(), func() ObservedDatabase {
				d := availableDB()
				d.Instance = "pg-b"
				return d
			}()),
			want: BindingDecision{Action: ActionWriteClaim, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Claim: claim, ResourceVersion: "41"},
		},
		"NotFound": {
			o:    obs(staticSpec(), ObservedDatabase{}),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonDatabaseNotFound},
			msg:  "Database orders does not exist",
		},
		// The claim names this Tenant but the binding has not recorded it
		// (it stopped between the two writes): complete the record.
		"OneSidedClaimIsCompleted": {
			o:    obs(staticSpec(), boundDB()),
			want: BindingDecision{Action: ActionCompleteRecord, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Record: rec},
		},
		// The binding recorded a Database whose claim does not name its
		// Tenant: the record grants nothing and is cleared; the Database is
		// decided afresh (here: taken by another).
		"OneSidedRecordIsClearedAndRefused": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "billing", Name: "billing", UID: "t-9"}
				d.ClaimantLive = true
				return d
			}(), recorded),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonAlreadyBound},
		},
		"OneSidedRecordOfAnAvailableDatabaseIsClaimedAgain": {
			o:    obs(staticSpec(), availableDB(), recorded),
			want: BindingDecision{Action: ActionWriteClaim, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Claim: claim, ResourceVersion: "41"},
		},
		"RecordOfAnotherDatabaseObjectIsReplaced": {
			o: obs(staticSpec(), boundDB(), func(o *BindingObservation) {
				o.Recorded = BindingRecord{DatabaseName: "orders", DatabaseUID: "d-0"}
			}),
			want: BindingDecision{Action: ActionCompleteRecord, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Record: rec},
		},
		"BoundAndReadyDelivers": {
			o:    obs(staticSpec(), boundDB(), recorded),
			want: BindingDecision{Action: ActionCopyCredential, Phase: v1alpha1.BindingPhaseBound, Reason: ReasonDelivering, Record: rec},
		},
		// Once bound, the instance's readiness does not matter: the copy
		// needs only OpenBao.
		"BoundDeliversWhileTheInstanceIsNotReady": {
			o:    obs(staticSpec(), boundDB(), recorded, func(o *BindingObservation) { o.Instance.Ready = bNotReady }),
			want: BindingDecision{Action: ActionCopyCredential, Phase: v1alpha1.BindingPhaseBound, Reason: ReasonDelivering, Record: rec},
		},
		"BoundNotReadyWaits": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.Ready = bNotReady
				return d
			}(), recorded),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhaseProvisioning, Reason: ReasonDatabaseNotReady, Record: rec},
		},
		"BoundBeingDeletedWaits": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.Deleting = true
				return d
			}(), recorded),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhaseBound, Reason: ReasonDatabaseNotReady, Record: rec},
			msg:  "being deleted",
		},
		// A claim by UID alone is not ours: namespace and name must match
		// too.
		"ClaimWithOurUIDInAnotherNamespaceIsNotOurs": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "other", Name: "shop", UID: "t-1"}
				d.ClaimantLive = true
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonAlreadyBound},
		},
		"MixedStaticAndDynamicIsInvalid": {
			o:    obs(func() BindingSpec { s := staticSpec(); s.Database = "x"; return s }(), availableDB()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInvalidSpec},
		},
		"WrongConfigKindIsInvalid": {
			o:    obs(func() BindingSpec { s := staticSpec(); s.InstanceKind = "ProviderConfig"; return s }(), availableDB()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInvalidSpec},
		},
		// Written by hand (no controller, or another one): refused, even
		// naming a claim's UID.
		"NotATenantsBindingIsRefused": {
			o: obs(staticSpec(), availableDB(), func(o *BindingObservation) {
				o.Standing = StandingVerdict{Standing: StandingForged, Reason: ReasonNotATenantsBinding, Message: "forged"}
			}),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNotATenantsBinding},
		},
		"UndecidedStandingBindsNothing": {
			o:    obs(staticSpec(), availableDB(), func(o *BindingObservation) { o.Standing = StandingVerdict{} }),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNotATenantsBinding},
		},
		"PendingStandingWaits": {
			o: obs(staticSpec(), availableDB(), func(o *BindingObservation) {
				o.Standing = StandingVerdict{Standing: StandingPending, Reason: ReasonWaitingForTenant, Message: "waiting"}
			}),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonWaitingForTenant},
		},
		"NoTenantUIDIsInvalid": {
			o:    obs(func() BindingSpec { s := staticSpec(); s.TenantUID = ""; return s }(), availableDB()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInvalidSpec},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBinding(tc.o)
			if diff := cmp.Diff(tc.want, got, ignoreDetail); diff != "" {
				t.Errorf("DecideBinding: -want +got:\n%s", diff)
			}
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", got.Message, tc.msg)
			}
			for _, h := range tc.hide {
				if strings.Contains(got.Message, h) {
					t.Errorf("message %q tells %q", got.Message, h)
				}
			}
			if got.Message == "" {
				t.Error("no message")
			}
		})
	}
}

func TestDecideBindingDynamic(t *testing.T) {
	name := DynamicDatabaseName("t-1")
	dyn := func() ObservedDatabase {
		d := boundDB()
		d.Name, d.Instance = name, "pg-a"
		return d
	}
	rec := BindingRecord{DatabaseName: name, DatabaseUID: "d-1"}
	loginRole := "shop_owner"
	cases := map[string]struct {
		o    BindingObservation
		want BindingDecision
		msg  string
	}{
		"AbsentIsCreatedWithTheClaimAndTheInstanceDefault": {
			o: obs(dynamicSpec(), ObservedDatabase{}),
			want: BindingDecision{Action: ActionCreateDynamic, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonProvisioning,
				Create: &v1alpha1.Database{
					ObjectMeta: metav1.ObjectMeta{Name: "tenant-t-1", Finalizers: []string{ClaimProtectionFinalizer}},
					Spec: v1alpha1.DatabaseSpec{
						ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
							ProviderConfigReference: &xpv2.Reference{Name: "pg-a"},
							ManagementPolicies:      v1alpha1.DefaultManagementPolicies,
						},
						ForProvider:   v1alpha1.DatabaseParameters{Database: "shop", LoginRole: &loginRole, Extensions: []string{"pg_trgm"}},
						ReclaimPolicy: v1alpha1.ReclaimDelete,
						ClaimRef:      ourClaim(),
					},
				}},
		},
		"AbsentWaitsForTheInstance": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, func(o *BindingObservation) { o.Instance.Ready = bNotReady }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
		},
		"AbsentWaitsForAMissingInstance": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, func(o *BindingObservation) { o.Instance = ObservedInstance{} }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
			msg:  "does not exist",
		},
		// A bound Database that disappeared is not silently replaced by an
		// empty one.
		"RecordedButGoneIsNotRecreated": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, func(o *BindingObservation) { o.Recorded = rec }),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonDatabaseNotFound},
			msg:  "no longer exists",
		},
		"CreatedIsRecorded": {
			o:    obs(dynamicSpec(), dyn()),
			want: BindingDecision{Action: ActionCompleteRecord, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Record: rec},
		},
		"ProvisioningWaits": {
			o: obs(dynamicSpec(), func() ObservedDatabase {
				d := dyn()
				d.Ready = bNotReady
				return d
			}(), func(o *BindingObservation) { o.Recorded = rec }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhaseProvisioning, Reason: ReasonDatabaseNotReady, Record: rec},
			// Its own Database on its way: one stable message, not the
			// Database's step of the moment.
			msg: "is not Ready yet",
		},
		// The bound Database's own problem is the binding's reason, so the
		// Tenant shows it.
		"ProvisioningShowsTheDatabasesProblem": {
			o: obs(dynamicSpec(), func() ObservedDatabase {
				d := dyn()
				d.Ready = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ReasonConflict, Message: "the role exists"}
				return d
			}(), func(o *BindingObservation) { o.Recorded = rec }),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhaseProvisioning, Reason: ReasonConflict, Record: rec},
			msg:  "Choose other names",
		},
		"ReadyDelivers": {
			o:    obs(dynamicSpec(), dyn(), func(o *BindingObservation) { o.Recorded = rec }),
			want: BindingDecision{Action: ActionCopyCredential, Phase: v1alpha1.BindingPhaseProvisioning, Reason: ReasonDelivering, Record: rec},
		},
		"ExistingWithoutAClaimIsNotTakenOver": {
			o: obs(dynamicSpec(), func() ObservedDatabase {
				d := dyn()
				d.ClaimRef = nil
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonConflict},
			msg:  "does not name this Tenant",
		},
		"ExistingClaimedByAnotherIsRefused": {
			o: obs(dynamicSpec(), func() ObservedDatabase {
				d := dyn()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "x", Name: "y", UID: "t-9"}
				d.ClaimantLive = true
				return d
			}()),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonAlreadyBound},
		},
		// A binding that names no server takes its namespace's default
		// (TestDecideBindingDefaultServer): unread, it takes nothing.
		"NoInstanceWaitsForTheDefault": {
			o:    obs(func() BindingSpec { s := dynamicSpec(); s.Instance, s.InstanceKind = "", ""; return s }(), ObservedDatabase{}),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
		},
		"ReservedNameIsInvalid": {
			o:    obs(func() BindingSpec { s := dynamicSpec(); s.Database = "postgres"; return s }(), ObservedDatabase{}),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInvalidSpec},
		},
		"BadLoginRoleIsInvalid": {
			o:    obs(func() BindingSpec { s := dynamicSpec(); s.LoginRole = "pg_x"; return s }(), ObservedDatabase{}),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInvalidSpec},
		},
		"BadExtensionIsInvalid": {
			o:    obs(func() BindingSpec { s := dynamicSpec(); s.Extensions = []string{"Bad"}; return s }(), ObservedDatabase{}),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInvalidSpec},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBinding(tc.o)
			if diff := cmp.Diff(tc.want, got, ignoreDetail); diff != "" {
				t.Errorf("DecideBinding: -want +got:\n%s", diff)
			}
			if !strings.Contains(got.Message, tc.msg) || got.Message == "" {
				t.Errorf("message %q does not contain %q", got.Message, tc.msg)
			}
		})
	}
}

// A server's namespace policy gates what a namespace takes by itself (a
// new Database, or an existing one no admin reserved), and nothing else: a
// Database reserved by an admin, or already bound, is never refused by it.
func TestDecideBindingNamespacePolicy(t *testing.T) {
	name := DynamicDatabaseName("t-1")
	rec := BindingRecord{DatabaseName: name, DatabaseUID: "d-1"}
	use := func(u NamespaceUse) func(*BindingObservation) {
		return func(o *BindingObservation) { o.Instance.Namespace = u }
	}
	notSelected := use(NamespaceUse{Read: true})
	full := use(NamespaceUse{Read: true, Selected: true, Limited: true, Limit: 2, Held: 2})
	reserved := func() ObservedDatabase {
		d := availableDB()
		d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "shop", Name: "shop"}
		return d
	}
	bound := func() ObservedDatabase {
		d := boundDB()
		d.Name = name
		return d
	}
	cases := map[string]struct {
		o    BindingObservation
		want BindingDecision
		msg  string
	}{
		"NotSelectedCreatesNothing": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, notSelected),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNamespaceNotAllowed},
			msg:  "does not serve namespace shop",
		},
		"AtTheLimitCreatesNothing": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, full),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNamespaceLimitReached},
			msg:  "holds 2 of the 2 databases",
		},
		"ZeroTakesNone": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, use(NamespaceUse{Read: true, Selected: true, Limited: true})),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNamespaceLimitReached},
		},
		"UnreadPolicyTakesNothing": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, use(NamespaceUse{})),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhasePending, Reason: ReasonInstanceNotReady},
		},
		"BelowTheLimitCreates": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, use(NamespaceUse{Read: true, Selected: true, Limited: true, Limit: 2, Held: 1})),
			want: BindingDecision{Action: ActionCreateDynamic, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonProvisioning},
		},
		"UnreservedDatabaseNotSelectedIsNotClaimed": {
			o:    obs(staticSpec(), availableDB(), notSelected),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNamespaceNotAllowed},
		},
		"UnreservedDatabaseAtTheLimitIsNotClaimed": {
			o:    obs(staticSpec(), availableDB(), full),
			want: BindingDecision{Action: ActionRefuse, Phase: v1alpha1.BindingPhasePending, Reason: ReasonNamespaceLimitReached},
		},
		// The admin's reservation is the admin's decision.
		"ReservedDatabaseIsClaimedOutsideTheSelector": {
			o:    obs(staticSpec(), reserved(), notSelected, full),
			want: BindingDecision{Action: ActionWriteClaim, Phase: v1alpha1.BindingPhaseBinding, Reason: ReasonBinding, Claim: ourClaim(), ResourceVersion: "41"},
		},
		// A selector or limit changed later leaves a bound Database alone.
		"BoundDatabaseStaysBoundOutsideTheSelector": {
			o:    obs(dynamicSpec(), bound(), notSelected, func(o *BindingObservation) { o.Recorded = rec }),
			want: BindingDecision{Action: ActionCopyCredential, Phase: v1alpha1.BindingPhaseProvisioning, Reason: ReasonDelivering, Record: rec},
		},
		"BoundDatabaseStaysBoundOverTheLimit": {
			o:    obs(dynamicSpec(), bound(), use(NamespaceUse{Read: true, Selected: true, Limited: true, Limit: 0, Held: 5}), func(o *BindingObservation) { o.Recorded = rec }),
			want: BindingDecision{Action: ActionCopyCredential, Phase: v1alpha1.BindingPhaseProvisioning, Reason: ReasonDelivering, Record: rec},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBinding(tc.o)
			if diff := cmp.Diff(tc.want, got, ignoreDetail, cmpopts.IgnoreFields(BindingDecision{}, "Create")); diff != "" {
				t.Errorf("DecideBinding: -want +got:\n%s", diff)
			}
			if !strings.Contains(got.Message, tc.msg) || got.Message == "" {
				t.Errorf("message %q does not contain %q", got.Message, tc.msg)
			}
		})
	}
}

// The instance's empty default reclaim policy is Retain.
func TestBindingDynamicDatabaseDefaultsToRetain(t *testing.T) {
	db := NewDynamicDatabase(dynamicSpec(), "")
	if db.Spec.ReclaimPolicy != v1alpha1.ReclaimRetain {
		t.Errorf("reclaimPolicy = %q; want Retain", db.Spec.ReclaimPolicy)
	}
	s := dynamicSpec()
	s.LoginRole = ""
	if db := NewDynamicDatabase(s, ""); db.Spec.ForProvider.LoginRole != nil {
		t.Errorf("loginRole = %q; want unset (the Database defaults it)", *db.Spec.ForProvider.LoginRole)
	}
}

// The options a dynamic binding asks are the new Database's, as a copy;
// without them the Database asks none (the config's defaults apply).
func TestBindingDynamicDatabaseCarriesOptions(t *testing.T) {
	if db := NewDynamicDatabase(dynamicSpec(), ""); db.Spec.ForProvider.Options != nil {
		t.Errorf("options = %+v; want none", db.Spec.ForProvider.Options)
	}
	s := dynamicSpec()
	s.Options = &v1alpha1.DatabaseOptions{LocaleProvider: v1alpha1.LocaleProviderICU, ICULocale: "de-DE"}
	db := NewDynamicDatabase(s, "")
	if diff := cmp.Diff(s.Options, db.Spec.ForProvider.Options); diff != "" || db.Spec.ForProvider.Options == s.Options {
		t.Errorf("options: -binding +Database:\n%s (shared pointer: %v)", diff, db.Spec.ForProvider.Options == s.Options)
	}
}

// Two bindings of different Tenants race for one Available Database: both
// decide to claim it at the resourceVersion they read, so only the first
// write can succeed; the loser re-reads the claimed Database and is
// refused without writing.
func TestDecideBindingRace(t *testing.T) {
	a := staticSpec()
	b := staticSpec()
	b.Namespace, b.Name, b.UID, b.TenantName, b.TenantUID, b.Controller = "billing", "billing-db", "b-2", "billing", "t-2", tenantRef("billing", "t-2")
	d := availableDB()
	da, db := DecideBinding(obs(a, d)), DecideBinding(obs(b, d))
	if da.Action != ActionWriteClaim || db.Action != ActionWriteClaim || da.ResourceVersion != d.ResourceVersion || db.ResourceVersion != d.ResourceVersion {
		t.Fatalf("both must claim at resourceVersion %s: %+v, %+v", d.ResourceVersion, da, db)
	}
	// a won: the Database now carries a's claim at a new resourceVersion.
	won := d
	won.ClaimRef, won.ClaimantLive, won.ResourceVersion = da.Claim, true, "42"
	if got := DecideBinding(obs(b, won)); got.Action != ActionRefuse || got.Reason != ReasonAlreadyBound {
		t.Errorf("the loser re-decides %s/%s; want Refuse/AlreadyBound", got.Action, got.Reason)
	}
	if got := DecideBinding(obs(a, won)); got.Action != ActionCompleteRecord {
		t.Errorf("the winner re-decides %s; want CompleteRecord", got.Action)
	}
}

func TestDecideBindingRelease(t *testing.T) {
	deleting := func(o *BindingObservation) { o.Deleting = true }
	orphaned := func(o *BindingObservation) {
		o.Standing = StandingVerdict{Standing: StandingGone, Reason: ReasonTenantGone, Message: "the Tenant shop of this namespace that this DatabaseBinding was made for no longer exists"}
	}
	retainDone := boundDB()
	retainDone.Binding = ReleasedStatus(*ourClaim())
	released := ReleasedStatus(*ourClaim())
	cases := map[string]struct {
		o    BindingObservation
		want BindingDecision
	}{
		"RetainRecordsReleased": {
			o:    obs(staticSpec(), boundDB(), recorded, deleting),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Release: v1alpha1.ReclaimRetain, Released: &released, CheckCopy: true, Record: BindingRecord{DatabaseName: "orders", DatabaseUID: "d-1"}},
		},
		// While an ExternalSecret of the namespace reads the delivery copy,
		// nothing is released, the copy is not touched and the phase
		// shown stays.
		"AReaderHoldsTheRelease": {
			o: obs(staticSpec(), boundDB(), recorded, deleting, func(o *BindingObservation) {
				o.Phase, o.Readers = v1alpha1.BindingPhaseReady, []string{"shop-postgresql"}
			}),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhaseReady, Reason: ReasonWaitingForExternalSecret, Record: BindingRecord{DatabaseName: "orders", DatabaseUID: "d-1"}},
		},
		"AReaderHoldsADeleteToo": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ReclaimPolicy, d.Protected = v1alpha1.ReclaimDelete, true
				return d
			}(), deleting, func(o *BindingObservation) { o.Readers = []string{"b", "a"} }),
			want: BindingDecision{Action: ActionWait, Reason: ReasonWaitingForExternalSecret},
		},
		"EmptyReclaimPolicyIsRetain": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ReclaimPolicy = ""
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Release: v1alpha1.ReclaimRetain, Released: &released, CheckCopy: true},
		},
		"RetainAlreadyReleased": {
			o:    obs(staticSpec(), retainDone, deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhaseReleased, CheckCopy: true},
		},
		// A Released status naming an earlier claim is not this release.
		"RetainReleasedForAnotherClaimIsRecordedAgain": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.Binding = ReleasedStatus(v1alpha1.ClaimReference{Namespace: "shop", Name: "shop", UID: "t-0"})
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Release: v1alpha1.ReclaimRetain, Released: &released, CheckCopy: true},
		},
		"DeleteDeletesTheDatabase": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ReclaimPolicy = v1alpha1.ReclaimDelete
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Release: v1alpha1.ReclaimDelete, CheckCopy: true},
		},
		"DeleteAlreadyDeleting": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ReclaimPolicy, d.Deleting = v1alpha1.ReclaimDelete, true
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhaseReleased, CheckCopy: true},
		},
		// The protection this binder put on the Database is lifted even
		// when nothing else is left to release: without it the Database
		// being deleted never goes away.
		"DeleteAlreadyDeletingLiftsTheProtection": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ReclaimPolicy, d.Deleting, d.Protected = v1alpha1.ReclaimDelete, true, true
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhaseReleased, CheckCopy: true, Unprotect: true},
		},
		"RetainAlreadyReleasedLiftsTheProtection": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := retainDone
				d.Protected = true
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhaseReleased, CheckCopy: true, Unprotect: true},
		},
		"RetainRecordsReleasedThenLiftsTheProtection": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.Protected = true
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Release: v1alpha1.ReclaimRetain, Released: &released, CheckCopy: true, Unprotect: true},
		},
		// Another claim's protection is not this binding's to lift.
		"AnotherClaimsProtectionIsKept": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "billing", Name: "billing", UID: "t-9"}
				d.Protected = true
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending},
		},
		"RefusedReleasesNothing": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "billing", Name: "billing", UID: "t-9"}
				d.ReclaimPolicy = v1alpha1.ReclaimDelete
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending},
		},
		// A forged binding naming a Tenant's claim releases nothing when
		// it is deleted: only the Tenant's own binding, or one whose
		// Tenant is gone, releases.
		"ForgedReleasesNothing": {
			o: obs(staticSpec(), boundDB(), deleting, func(o *BindingObservation) {
				o.Standing = StandingVerdict{Standing: StandingForged, Reason: ReasonNotATenantsBinding}
			}),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending},
		},
		"PendingReleasesNothing": {
			o: obs(staticSpec(), boundDB(), deleting, func(o *BindingObservation) {
				o.Standing = StandingVerdict{Standing: StandingPending, Reason: ReasonWaitingForTenant}
			}),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending},
		},
		"DeletedAfterItsTenantReleases": {
			o:    obs(staticSpec(), boundDB(), deleting, func(o *BindingObservation) { o.Standing = StandingVerdict{Standing: StandingGone} }),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Release: v1alpha1.ReclaimRetain, Released: &released, CheckCopy: true},
		},
		// Its Tenant gone (deleted with its dependents orphaned), a binding
		// that stays releases as if it were deleted.
		"OrphanRetainRecordsReleased": {
			o:    obs(staticSpec(), boundDB(), recorded, orphaned),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Reason: ReasonTenantGone, Orphaned: true, Release: v1alpha1.ReclaimRetain, Released: &released, CheckCopy: true, Record: BindingRecord{DatabaseName: "orders", DatabaseUID: "d-1"}},
		},
		"OrphanDeleteDeletesTheDatabase": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ReclaimPolicy = v1alpha1.ReclaimDelete
				return d
			}(), orphaned),
			want: BindingDecision{Action: ActionRelease, Phase: v1alpha1.BindingPhaseReleased, Reason: ReasonTenantGone, Orphaned: true, Release: v1alpha1.ReclaimDelete, CheckCopy: true},
		},
		// Its Tenant is deleted before the garbage collector deletes the
		// binding and the ExternalSecret: while one reads the copy, the
		// orphan waits as a deleted binding would, Delete or Retain.
		"AReaderHoldsAnOrphansDelete": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := boundDB()
				d.ReclaimPolicy = v1alpha1.ReclaimDelete
				return d
			}(), recorded, orphaned, func(o *BindingObservation) {
				o.Phase, o.Readers = v1alpha1.BindingPhaseReady, []string{"shop-postgresql"}
			}),
			want: BindingDecision{Action: ActionWait, Phase: v1alpha1.BindingPhaseReady, Reason: ReasonWaitingForExternalSecret, Record: BindingRecord{DatabaseName: "orders", DatabaseUID: "d-1"}},
		},
		"AReaderHoldsAnOrphansRetain": {
			o:    obs(staticSpec(), boundDB(), recorded, orphaned, func(o *BindingObservation) { o.Readers = []string{"shop-postgresql"} }),
			want: BindingDecision{Action: ActionWait, Reason: ReasonWaitingForExternalSecret, Record: BindingRecord{DatabaseName: "orders", DatabaseUID: "d-1"}},
		},
		"OrphanReleased": {
			o:    obs(staticSpec(), retainDone, orphaned),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhaseReleased, Reason: ReasonTenantGone, Orphaned: true, CheckCopy: true},
		},
		// Released already, reclaimPolicy Delete set afterwards: a binding
		// whose Tenant is gone (a forged one naming the old claim) deletes
		// nothing, deleted or not.
		"ReleasedThenDeleteIsNeverDeletedByAGoneBinding": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := retainDone
				d.ReclaimPolicy = v1alpha1.ReclaimDelete
				return d
			}(), orphaned),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhaseReleased, Reason: ReasonTenantGone, Orphaned: true, CheckCopy: true},
		},
		"ReleasedThenDeleteIsNeverDeletedByAGoneBindingsDeletion": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := retainDone
				d.ReclaimPolicy = v1alpha1.ReclaimDelete
				return d
			}(), orphaned, deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhaseReleased, CheckCopy: true},
		},
		"OrphanOfAnotherClaimReleasesNothing": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "shop", Name: "shop", UID: "t-0"}
				return d
			}(), orphaned),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending, Reason: ReasonTenantGone, Orphaned: true},
		},
		"NeverBoundReleasesNothing": {
			o:    obs(staticSpec(), availableDB(), deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending},
		},
		"AbsentReleasesNothing": {
			o:    obs(dynamicSpec(), ObservedDatabase{}, deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending},
		},
		// A binding that recorded a copy checks it even when the claim no
		// longer names it.
		"RecordedCopyIsChecked": {
			o:    obs(staticSpec(), availableDB(), deleting, func(o *BindingObservation) { o.RecordedCopy = "postgresql-tenants/shop/shop" }),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending, CheckCopy: true},
		},
		// A reservation by namespace and name only was never bound.
		"ReservedReleasesNothing": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "shop", Name: "shop"}
				return d
			}(), deleting),
			want: BindingDecision{Action: ActionNone, Phase: v1alpha1.BindingPhasePending},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBinding(tc.o)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(BindingDecision{}, "Message", "Reason")); diff != "" {
				t.Errorf("DecideBinding: -want +got:\n%s", diff)
			}
		})
	}
}

func TestBindingReleasedStatus(t *testing.T) {
	want := v1alpha1.BindingStatus{Phase: v1alpha1.BindingReleased, Claim: "shop/shop", ReleasedClaim: ourClaim()}
	if diff := cmp.Diff(want, ReleasedStatus(*ourClaim())); diff != "" {
		t.Errorf("ReleasedStatus: -want +got:\n%s", diff)
	}
	// The Database's own view of a claim without a live binding is the
	// same: the binder's record and the Database's never fight.
	if diff := cmp.Diff(BindingOf(ourClaim(), v1alpha1.BindingStatus{}, false), ReleasedStatus(*ourClaim())); diff != "" {
		t.Errorf("ReleasedStatus differs from BindingOf: -BindingOf +ReleasedStatus:\n%s", diff)
	}
}

func sourceData() map[string]string {
	return map[string]string{"username": "orders", "password": "pw-1", "database": "orders", "host": "db", "hostaddr": "", "port": "5432", "sslmode": "verify-full"}
}

func TestDecideBindingDelivery(t *testing.T) {
	s := staticSpec()
	src := BindingKV{Present: true, Data: sourceData(), Owner: map[string]string{MetaManagedBy: ManagedBy, MetaName: "orders", MetaUID: "d-1"}, Version: 3}
	owner := DeliveryOwner(s, "orders", "d-1", 3)
	base := func(mut ...func(*DeliveryObservation)) DeliveryObservation {
		o := DeliveryObservation{Spec: s, DatabaseName: "orders", DatabaseUID: "d-1", SourcePath: "postgresql-databases/orders", Source: src, CopyPath: "postgresql-tenants/shop/shop"}
		for _, m := range mut {
			m(&o)
		}
		return o
	}
	inSync := func(o *DeliveryObservation) {
		o.Copy = BindingKV{Present: true, Data: sourceData(), Owner: DeliveryOwner(s, "orders", "d-1", 3), Version: 2}
	}
	cases := map[string]struct {
		o    DeliveryObservation
		want DeliveryVerdict
	}{
		"AbsentIsClaimedAndWritten": {
			o:    base(),
			want: DeliveryVerdict{Write: true, Claim: true, CAS: 0, Data: sourceData(), Owner: owner},
		},
		"InSync": {
			o:    base(inSync),
			want: DeliveryVerdict{InSync: true},
		},
		// An admin rotation makes a new source version: re-copy over the
		// copy's current version.
		"NewSourceVersionIsCopied": {
			o: base(inSync, func(o *DeliveryObservation) {
				o.Source.Version = 4
				o.Source.Data = sourceData()
				o.Source.Data["password"] = "pw-2"
			}),
			want: DeliveryVerdict{Write: true, CAS: 2, Data: func() map[string]string { d := sourceData(); d["password"] = "pw-2"; return d }(), Owner: DeliveryOwner(s, "orders", "d-1", 4)},
		},
		// A new version with the same data is still recorded as the
		// source of the copy.
		"NewSourceVersionWithTheSameData": {
			o:    base(inSync, func(o *DeliveryObservation) { o.Source.Version = 4 }),
			want: DeliveryVerdict{Write: true, CAS: 2, Data: sourceData(), Owner: DeliveryOwner(s, "orders", "d-1", 4)},
		},
		"ChangedCopyDataIsRewritten": {
			o:    base(inSync, func(o *DeliveryObservation) { o.Copy.Data = map[string]string{"password": "edited"} }),
			want: DeliveryVerdict{Write: true, CAS: 2, Data: sourceData(), Owner: owner},
		},
		// Metadata claimed but no data yet (interrupted): write version 1.
		"ClaimedWithoutDataIsWritten": {
			o:    base(func(o *DeliveryObservation) { o.Copy = BindingKV{Present: true, Owner: owner} }),
			want: DeliveryVerdict{Write: true, CAS: 0, Data: sourceData(), Owner: owner},
		},
		"CopyOfAnotherDatabaseIsReplaced": {
			o:    base(inSync, func(o *DeliveryObservation) { o.Copy.Owner = DeliveryOwner(s, "old", "d-0", 3) }),
			want: DeliveryVerdict{Write: true, CAS: 2, Data: sourceData(), Owner: owner},
		},
		"OwnedByAnotherBindingIsAConflict": {
			o: base(inSync, func(o *DeliveryObservation) {
				other := s
				other.UID = "b-0"
				o.Copy.Owner = DeliveryOwner(other, "orders", "d-1", 3)
			}),
			want: DeliveryVerdict{Reason: ReasonConflict},
		},
		"UnownedIsAConflict": {
			o: base(func(o *DeliveryObservation) {
				o.Copy = BindingKV{Present: true, Data: map[string]string{"x": "y"}, Version: 1}
			}),
			want: DeliveryVerdict{Reason: ReasonConflict},
		},
		"SourceWithoutVersion": {
			o:    base(func(o *DeliveryObservation) { o.Source = BindingKV{Present: true, Owner: src.Owner} }),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		// An imported record written by hand carries no ownership: the
		// Database controller proved it logs in, so it is copied.
		"ImportedRecordWithoutOwnershipIsCopied": {
			o: base(func(o *DeliveryObservation) {
				o.Import = true
				o.Source.Owner = nil
			}),
			want: DeliveryVerdict{Write: true, Claim: true, CAS: 0, Data: sourceData(), Owner: owner},
		},
		// An imported record with only who and the password (as another
		// tool writes it): the copy takes where to connect from what the
		// provider knows; the record's own keys win.
		"ImportedRecordLackingTheEndpointIsFilled": {
			o: base(func(o *DeliveryObservation) {
				o.Import = true
				o.Source.Owner = nil
				o.Source.Data = map[string]string{"username": "orders", "password": "pw-1", "port": "6432"}
				o.Known = map[string]string{"database": "orders_db", "host": "pg.example", "hostaddr": "10.0.0.5", "port": "5432", "sslmode": "verify-full", "username": "known", "password": "known"}
			}),
			want: DeliveryVerdict{Write: true, Claim: true, Data: map[string]string{
				"username": "orders", "password": "pw-1", "database": "orders_db", "host": "pg.example", "hostaddr": "10.0.0.5", "port": "6432", "sslmode": "verify-full",
			}, Owner: owner},
		},
		// Never who or with what password, nor for a record the provider
		// made.
		"ImportedRecordLackingThePasswordIsNotCopied": {
			o: base(func(o *DeliveryObservation) {
				o.Import = true
				o.Source.Owner = nil
				o.Source.Data = sourceData()
				delete(o.Source.Data, "password")
				o.Known = map[string]string{"password": "known", "username": "known"}
			}),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		"OwnRecordIsNeverFilled": {
			o: base(func(o *DeliveryObservation) {
				o.Source.Data = sourceData()
				delete(o.Source.Data, "host")
				o.Known = map[string]string{"host": "pg.example"}
			}),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		// Without ownership and not an import: not this Database's.
		"UnownedSourceOfAProvisioningDatabaseIsRefused": {
			o:    base(func(o *DeliveryObservation) { o.Source.Owner = nil }),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		// An import naming a record the provider made for another
		// Database: never copied.
		"ImportOfAnotherDatabasesRecordIsRefused": {
			o: base(func(o *DeliveryObservation) {
				o.Import = true
				o.Source.Owner = map[string]string{MetaManagedBy: ManagedBy, MetaName: "victim", MetaUID: "d-9"}
			}),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		"SourceAbsent": {
			o:    base(func(o *DeliveryObservation) { o.Source = BindingKV{} }),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		"SourceOfAnotherDatabase": {
			o: base(func(o *DeliveryObservation) {
				o.Source.Owner = map[string]string{MetaManagedBy: ManagedBy, MetaUID: "d-0"}
			}),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		"SourceMissingAKey": {
			o: base(func(o *DeliveryObservation) {
				o.Source.Data = sourceData()
				delete(o.Source.Data, "password")
			}),
			want: DeliveryVerdict{Reason: ReasonCredentialProjectionFailed},
		},
		// Only the seven credential keys are copied.
		"ExtraSourceKeysAreNotCopied": {
			o: base(func(o *DeliveryObservation) {
				o.Source.Data = sourceData()
				o.Source.Data["admin"] = "x"
			}),
			want: DeliveryVerdict{Write: true, Claim: true, Data: sourceData(), Owner: owner},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideDelivery(tc.o)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(DeliveryVerdict{}, "Message")); diff != "" {
				t.Errorf("DecideDelivery: -want +got:\n%s", diff)
			}
			if got.Reason != "" && got.Message == "" {
				t.Error("a refusal without a message")
			}
			if strings.Contains(got.Message, "pw-") {
				t.Errorf("message carries the password: %q", got.Message)
			}
		})
	}
}

func TestBindingDeliveryOwner(t *testing.T) {
	want := map[string]string{
		"managed-by": "provider-postgresql-tenant", "binding-namespace": "shop", "binding-name": "shop-db", "binding-uid": "b-1",
		"tenant-uid": "t-1", "source-database": "orders", "source-database-uid": "d-1", "source-version": "3",
	}
	if diff := cmp.Diff(want, DeliveryOwner(staticSpec(), "orders", "d-1", 3)); diff != "" {
		t.Errorf("DeliveryOwner: -want +got:\n%s", diff)
	}
	other := staticSpec()
	other.Name = "x"
	if CopyOwnedBy(want, other) {
		t.Error("a copy of shop/shop-db is owned by shop/x")
	}
}

func TestBindingNames(t *testing.T) {
	if got := DynamicDatabaseName("5f1c-9a"); got != "tenant-5f1c-9a" {
		t.Errorf("DynamicDatabaseName = %q", got)
	}
	if got := DeliveryPath("postgresql-tenants", "shop", "web"); got != "postgresql-tenants/shop/web" {
		t.Errorf("DeliveryPath = %q", got)
	}
}

func TestBindingDefaultIdentifier(t *testing.T) {
	cases := map[string]struct {
		in, want string
		err      string
	}{
		"Hyphen":      {in: "my-app", want: "my_app"},
		"Dots":        {in: "a.b-c", want: "a_b_c"},
		"Upper":       {in: "MyApp", want: "myapp"},
		"Plain":       {in: "shop", want: "shop"},
		"DigitFirst":  {in: "1app", err: "set the database name explicitly"},
		"Reserved":    {in: "postgres", err: "reserved"},
		"PgPrefix":    {in: "pg-x", err: "reserved"},
		"TooLong":     {in: strings.Repeat("a", 64), err: "not a valid identifier"},
		"Longest":     {in: strings.Repeat("a", 63), want: strings.Repeat("a", 63)},
		"OtherSymbol": {in: "a+b", err: "not a valid identifier"},
		"Empty":       {in: "", err: "not a valid identifier"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DefaultIdentifier(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "explicitly") {
					t.Fatalf("DefaultIdentifier(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("DefaultIdentifier(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestDeliveryCheckDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cur := DeliveryProof{DatabaseUID: "db-1", SourcePath: "postgresql-databases/shop", CopyPath: "postgresql-tenants/app/shop"}
	cases := map[string]struct {
		c     func(*DeliveryCheck)
		skips bool
	}{
		"in sync, the record proven at the same version, not due: no read": {skips: true},
		"nothing proven since the provider started or the last write":      {c: func(c *DeliveryCheck) { c.Last = nil }},
		"another Database (a new UID)":                                     {c: func(c *DeliveryCheck) { c.Now.DatabaseUID = "db-2" }},
		"another record path":                                              {c: func(c *DeliveryCheck) { c.Now.SourcePath = "legacy/shop" }},
		"another delivery path":                                            {c: func(c *DeliveryCheck) { c.Now.CopyPath = "postgresql-tenants/app/other" }},
		"the Database's record is not proven by a standing login":          {c: func(c *DeliveryCheck) { c.RecordProven, c.RecordVersion = false, 0 }},
		"the Database's record has a new version (a rotation, a repair)":   {c: func(c *DeliveryCheck) { c.RecordVersion = 4 }},
		"the periodic check is due":                                        {c: func(c *DeliveryCheck) { c.Time = c.Last.Due }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			last := cur
			last.SourceVersion, last.Due = 3, now.Add(time.Minute)
			c := DeliveryCheck{Last: &last, Now: cur, RecordVersion: 3, RecordProven: true, Time: now}
			if tc.c != nil {
				tc.c(&c)
			}
			why := DeliveryCheckDue(c)
			if (why == "") != tc.skips {
				t.Errorf("DeliveryCheckDue(...) = %q, want a skip: %v", why, tc.skips)
			}
		})
	}
}

func TestDecideStanding(t *testing.T) {
	refs := []ResourceRef{
		{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: "shop-db"},
		{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.DatabaseBindingKind, Name: "shop-db"},
	}
	tenant := ObservedTenant{Found: true, UID: "t-1", Namespace: "shop", Name: "shop", ResourceRefs: refs}
	with := func(f func(*BindingSpec, *ObservedTenant)) (BindingSpec, ObservedTenant) {
		s, t := staticSpec(), tenant
		t.ResourceRefs = slices.Clone(refs)
		f(&s, &t)
		return s, t
	}
	cases := map[string]struct {
		f    func(*BindingSpec, *ObservedTenant)
		want Standing
		// hide must not appear in the message.
		hide []string
	}{
		"TenantsOwn": {f: func(*BindingSpec, *ObservedTenant) {}, want: StandingTenants},
		"LegacyComposite": {f: func(s *BindingSpec, t *ObservedTenant) {
			s.Controller = ControllerRef{APIVersion: LegacyTenantAPIVersion, Kind: LegacyCompositeKind, Name: "shop-x7k2p", UID: "t-1"}
			t.Legacy = true
			t.ResourceRefs[1].Namespace = "shop"
		}, want: StandingTenants},
		// The attack: a controller reference of an unserved apiVersion
		// (the garbage collector never removes the binding) with the UID
		// of an earlier Tenant.
		"UnservedAPIVersion": {f: func(s *BindingSpec, _ *ObservedTenant) {
			s.Controller.APIVersion = "example.org/v1"
		}, want: StandingForged},
		"AnotherKind": {f: func(s *BindingSpec, _ *ObservedTenant) { s.Controller.Kind = "ConfigMap" }, want: StandingForged},
		"LegacyClaimIsNotTheController": {f: func(s *BindingSpec, _ *ObservedTenant) {
			s.Controller.APIVersion = LegacyTenantAPIVersion
		}, want: StandingForged},
		"TenantUIDIsNotTheController's": {f: func(s *BindingSpec, _ *ObservedTenant) { s.TenantUID = "t-0" }, want: StandingForged},
		"TenantGone":                    {f: func(_ *BindingSpec, t *ObservedTenant) { *t = ObservedTenant{} }, want: StandingGone},
		// A new Tenant of the same name is another Tenant: the earlier one
		// is gone.
		"TenantRecreated": {f: func(_ *BindingSpec, t *ObservedTenant) { t.UID = "t-2" }, want: StandingGone},
		"TenantOfAnotherNamespace": {f: func(_ *BindingSpec, t *ObservedTenant) { t.Namespace = "billing" }, want: StandingForged,
			hide: []string{"billing"}},
		"TenantOfAnotherName": {f: func(_ *BindingSpec, t *ObservedTenant) { t.Name = "other" }, want: StandingForged},
		"TenantComposesAnotherBinding": {f: func(_ *BindingSpec, t *ObservedTenant) {
			t.ResourceRefs[1].Name = "shop-db-2"
		}, want: StandingForged},
		"BindingOfAnotherNamespaceInTheRefs": {f: func(_ *BindingSpec, t *ObservedTenant) {
			t.ResourceRefs[1].Namespace = "billing"
		}, want: StandingForged},
		// Crossplane writes the references before it creates what they
		// name; a cache behind may not show them yet.
		"RefsNotWrittenYet": {f: func(_ *BindingSpec, t *ObservedTenant) { t.ResourceRefs = nil }, want: StandingPending},
		// Deleted with its dependents orphaned: the garbage collector
		// removed the controller reference.
		"OrphanedTenantGone": {f: func(s *BindingSpec, t *ObservedTenant) {
			s.Controller = ControllerRef{}
			*t = ObservedTenant{}
		}, want: StandingGone},
		"OrphanedTenantRecreated": {f: func(s *BindingSpec, t *ObservedTenant) {
			s.Controller = ControllerRef{}
			t.UID = "t-2"
		}, want: StandingGone},
		"NoControllerTenantStillThere": {f: func(s *BindingSpec, _ *ObservedTenant) { s.Controller = ControllerRef{} }, want: StandingPending},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec, ten := with(tc.f)
			got := DecideStanding(spec, ten)
			if got.Standing != tc.want {
				t.Fatalf("DecideStanding() = %+v, want %s", got, tc.want)
			}
			if (got.Standing == StandingTenants) != (got.Reason == "" && got.Message == "") {
				t.Errorf("a reason and message exactly when it does not count: %+v", got)
			}
			for _, h := range append(tc.hide, "t-1", "t-0", "t-2") {
				if strings.Contains(got.Message, h) {
					t.Errorf("message %q tells %q", got.Message, h)
				}
			}
		})
	}
}

// The wait names the ExternalSecrets it waits for, in a stable order, so
// that the condition does not change between polls.
func TestDecideBindingWaitNamesTheReaders(t *testing.T) {
	deleting := func(names ...string) func(*BindingObservation) {
		return func(o *BindingObservation) { o.Deleting, o.Readers = true, names }
	}
	cases := map[string]struct {
		readers []string
		want    string
	}{
		"One":  {readers: []string{"shop-postgresql"}, want: "waiting for ExternalSecret shop-postgresql of this namespace"},
		"Two":  {readers: []string{"b", "a"}, want: "waiting for ExternalSecrets a, b of this namespace"},
		"Many": {readers: []string{"e", "d", "c", "b", "a"}, want: "waiting for ExternalSecrets a, b, c and 2 more of this namespace"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBinding(obs(staticSpec(), boundDB(), deleting(tc.readers...)))
			if got.Reason != ReasonWaitingForExternalSecret || !strings.HasPrefix(got.Message, tc.want) {
				t.Errorf("got %s %q, want %s %q…", got.Reason, got.Message, ReasonWaitingForExternalSecret, tc.want)
			}
		})
	}
}

// What a binding's namespace reads (the binding's Ready message, which its
// Tenant shows) is its own Tenant's state: never a config's or a
// Database's message written for admins (server addresses, other roles
// and databases, error text), never another namespace's claim or a UID;
// a refused spec is relayed, since it is what the team must fix.
func TestRelayedMessagesTellOnlyTheTenantsOwnState(t *testing.T) {
	// Each planted word stands for something only admins may read.
	const (
		host    = "pg-primary.internal.example"
		addr    = "10.20.30.40"
		errText = "pq-error-7f3a"
		other   = "payroll_owner"
	)
	adminSide := []string{host, addr, errText, other, "t-9", "other-ns", "b-9"}
	adminMsg := "cannot connect to " + host + " (" + addr + "): " + errText + "; the database \"shop\" exists, owned by \"" + other + "\""
	notReady := func(reason string) xpv2.Condition {
		return xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ConditionReason(reason), Message: adminMsg}
	}
	name := DynamicDatabaseName("t-1")
	rec := BindingRecord{DatabaseName: name, DatabaseUID: "d-1"}
	own := func(reason string) BindingObservation {
		d := boundDB()
		d.Name, d.Ready = name, notReady(reason)
		return obs(dynamicSpec(), d, func(o *BindingObservation) { o.Recorded = rec })
	}
	cases := map[string]struct {
		o          BindingObservation
		wantReason string
		// want is what the message must say instead.
		want string
	}{
		"ConfigNotReady": {
			o:          obs(dynamicSpec(), ObservedDatabase{}, func(o *BindingObservation) { o.Instance.Ready = notReady("Unreachable") }),
			wantReason: ReasonInstanceNotReady, want: "ClusterProviderConfig pg-a is not Ready (Unreachable): ask your platform team",
		},
		"StaticConfigNotReady": {
			o:          obs(staticSpec(), availableDB(), func(o *BindingObservation) { o.Instance.Ready = notReady("UnsafeTemplates") }),
			wantReason: ReasonInstanceNotReady, want: "(UnsafeTemplates): ask your platform team",
		},
		"OwnDatabaseConflict": {
			o: own(ReasonConflict), wantReason: ReasonConflict, want: "Choose other names",
		},
		"OwnDatabaseInstanceNotReady": {
			o: own(ReasonInstanceNotReady), wantReason: ReasonInstanceNotReady, want: "(InstanceNotReady): ask your platform team",
		},
		"OwnDatabaseEndpointChanged": {
			o: own(ReasonEndpointChanged), wantReason: ReasonEndpointChanged, want: "ask your platform team",
		},
		"OwnDatabaseDependencyUnavailable": {
			o: own(ReasonDependencyUnavailable), wantReason: ReasonDependencyUnavailable, want: "ask your platform team",
		},
		"OwnDatabaseImportDifferences": {
			o: own(ReasonImportDifferences), wantReason: ReasonImportDifferences, want: "ask your platform team",
		},
		"OwnDatabaseInsufficientPrivileges": {
			o: own(ReasonInsufficientPrivileges), wantReason: ReasonInsufficientPrivileges, want: "ask your platform team",
		},
		"OwnDatabaseVanished": {
			o: own(ReasonDatabaseVanished), wantReason: ReasonDatabaseVanished, want: "ask your platform team to restore it",
		},
		"AnotherDatabaseNotReady": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.Ready = notReady(ReasonConflict)
				return d
			}()),
			wantReason: ReasonDatabaseNotReady, want: "Database orders is not Ready yet",
		},
		"BoundToAnotherNamespace": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = &v1alpha1.ClaimReference{Namespace: "other-ns", Name: other, UID: "t-9"}
				d.ClaimantLive = true
				return d
			}()),
			wantReason: ReasonAlreadyBound, want: "a Tenant of another namespace",
		},
		"ReleasedByItsOwnTenant": {
			o: obs(staticSpec(), func() ObservedDatabase {
				d := availableDB()
				d.ClaimRef = ourClaim()
				d.Binding = ReleasedStatus(*ourClaim())
				return d
			}()),
			wantReason: ReasonReleased, want: "ask your platform team to rebind it to this Tenant",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBinding(tc.o)
			if got.Reason != tc.wantReason {
				t.Errorf("reason %q, want %q", got.Reason, tc.wantReason)
			}
			if !strings.Contains(got.Message, tc.want) {
				t.Errorf("message %q does not say %q", got.Message, tc.want)
			}
			for _, w := range adminSide {
				if strings.Contains(got.Message, w) {
					t.Errorf("message %q tells the namespace %q", got.Message, w)
				}
			}
		})
	}

	// A refused spec is the team's to fix: its message is relayed.
	for _, reason := range []string{ReasonInvalidSpec, ReasonDatabaseOptionsNotAllowed, ReasonDatabaseOptionsUnsupported} {
		o := own(reason)
		o.Database.Ready.Message = "spec.forProvider.options asks what the ClusterProviderConfig does not allow: encoding \"LATIN1\" (allowed: UTF8)"
		if got := DecideBinding(o); got.Reason != reason || !strings.Contains(got.Message, o.Database.Ready.Message) {
			t.Errorf("%s: %s %q does not relay the refused spec", reason, got.Reason, got.Message)
		}
	}

	// The delivery path's owner: a binding of this namespace by name, one
	// of another namespace not at all, never a UID.
	s := staticSpec()
	src := BindingKV{Present: true, Data: sourceData(), Owner: map[string]string{MetaManagedBy: ManagedBy, MetaName: "orders", MetaUID: "d-1"}, Version: 3}
	for name, tc := range map[string]struct {
		owner BindingSpec
		want  string
	}{
		"SameNamespace":    {owner: BindingSpec{Namespace: "shop", Name: "legacy", UID: "b-9", TenantUID: "t-9"}, want: "the DatabaseBinding legacy of this namespace"},
		"SameName":         {owner: BindingSpec{Namespace: "shop", Name: s.Name, UID: "b-9", TenantUID: "t-9"}, want: "an earlier DatabaseBinding of this name"},
		"AnotherNamespace": {owner: BindingSpec{Namespace: "other-ns", Name: other, UID: "b-9", TenantUID: "t-9"}, want: "a DatabaseBinding of another namespace"},
	} {
		t.Run("Delivery"+name, func(t *testing.T) {
			got := DecideDelivery(DeliveryObservation{Spec: s, DatabaseName: "orders", DatabaseUID: "d-1", SourcePath: "postgresql-databases/orders", Source: src,
				CopyPath: "postgresql-tenants/shop/shop", Copy: BindingKV{Present: true, Data: sourceData(), Owner: DeliveryOwner(tc.owner, "payroll", "d-9", 1), Version: 1}})
			if got.Reason != ReasonConflict || !strings.Contains(got.Message, tc.want) {
				t.Errorf("%s %q, want Conflict saying %q", got.Reason, got.Message, tc.want)
			}
			for _, w := range adminSide {
				if strings.Contains(got.Message, w) {
					t.Errorf("message %q tells the namespace %q", got.Message, w)
				}
			}
		})
	}
}
