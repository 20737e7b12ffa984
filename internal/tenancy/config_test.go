package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
)

func TestSecretRefOf(t *testing.T) {
	type want struct{ ns, name, invalid string }
	cases := map[string]struct {
		ref  v1alpha1.SecretReference
		want want
	}{
		"InProviderNamespace": {ref: v1alpha1.SecretReference{Namespace: "crossplane-system", Name: "admin"}, want: want{ns: "crossplane-system", name: "admin"}},
		"Elsewhere":           {ref: v1alpha1.SecretReference{Namespace: "app", Name: "admin"}, want: want{invalid: `must be the provider's namespace "crossplane-system", not "app"`}},
		"NoNamespace":         {ref: v1alpha1.SecretReference{Name: "admin"}, want: want{invalid: `not ""`}},
		"NoName":              {ref: v1alpha1.SecretReference{Namespace: "crossplane-system"}, want: want{invalid: "name is required"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns, n, inv := SecretRefOf("crossplane-system", tc.ref)
			if tc.want.invalid != "" {
				if !strings.Contains(inv, tc.want.invalid) || ns != "" || n != "" {
					t.Errorf("SecretRefOf() = %q %q %q, want invalid containing %q", ns, n, inv, tc.want.invalid)
				}
				return
			}
			if diff := cmp.Diff(tc.want, want{ns, n, inv}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("SecretRefOf(): -want +got:\n%s", diff)
			}
		})
	}
}

func TestDecideConfigUsage(t *testing.T) {
	cases := map[string]struct {
		deleting            bool
		databases, bindings int64
		want                ConfigUsageVerdict
	}{
		"LiveUnused":          {want: ConfigUsageVerdict{KeepFinalizer: true}},
		"LiveUsed":            {databases: 2, bindings: 1, want: ConfigUsageVerdict{Users: 3, KeepFinalizer: true}},
		"DeletingUnused":      {deleting: true, want: ConfigUsageVerdict{}},
		"DeletingDatabase":    {deleting: true, databases: 1, want: ConfigUsageVerdict{Users: 1, KeepFinalizer: true, Blocked: true, Message: "Blocking deletion while usages still exist: 1 Database(s) and 0 DatabaseBinding(s) use this ClusterProviderConfig"}},
		"DeletingOnlyBinding": {deleting: true, bindings: 2, want: ConfigUsageVerdict{Users: 2, KeepFinalizer: true, Blocked: true, Message: "Blocking deletion while usages still exist: 0 Database(s) and 2 DatabaseBinding(s) use this ClusterProviderConfig"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, DecideConfigUsage(tc.deleting, tc.databases, tc.bindings)); diff != "" {
				t.Errorf("DecideConfigUsage(): -want +got:\n%s", diff)
			}
		})
	}
}

func TestValidateEndpoint(t *testing.T) {
	ok := v1alpha1.Endpoint{Host: "db.example", Hostaddr: "192.0.2.1", Port: 5432, Database: "postgres", SSLMode: v1alpha1.SSLModeVerifyFull}
	cases := map[string]struct {
		mut  func(*v1alpha1.Endpoint)
		want string
	}{
		"Valid":       {mut: func(*v1alpha1.Endpoint) {}},
		"IPv6":        {mut: func(e *v1alpha1.Endpoint) { e.Hostaddr = "2001:db8::1" }},
		"NoHostaddr":  {mut: func(e *v1alpha1.Endpoint) { e.Hostaddr = "" }},
		"NoHost":      {mut: func(e *v1alpha1.Endpoint) { e.Host = "" }, want: "host is required"},
		"NameAsAddr":  {mut: func(e *v1alpha1.Endpoint) { e.Hostaddr = "db.example" }, want: "IPv4 or IPv6 literal"},
		"PortZero":    {mut: func(e *v1alpha1.Endpoint) { e.Port = 0 }, want: "between 1 and 65535"},
		"BadDatabase": {mut: func(e *v1alpha1.Endpoint) { e.Database = "Admin DB" }, want: "not a valid identifier"},
		"BadSSLMode":  {mut: func(e *v1alpha1.Endpoint) { e.SSLMode = "prefer" }, want: "not one of"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := ok
			tc.mut(&e)
			got := ValidateEndpoint(e)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("ValidateEndpoint() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecideConfig(t *testing.T) {
	const target = "localhost (127.0.0.1:5432)"
	healthy := ConfigObservation{Checked: true, Version: "15.18", Target: target}
	cases := map[string]struct {
		o    ConfigObservation
		want ConfigVerdict
		msg  string // substring of the message, when the full text is not pinned
	}{
		"Ready": {
			o:    healthy,
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseReady, Ready: true, Reason: ReasonReady},
			msg:  "PostgreSQL 15.18 at localhost (127.0.0.1:5432)",
		},
		"UnsafeTemplatesAreRefused": {
			o:    func() ConfigObservation { o := healthy; o.Templates = "template0 accepts connections"; return o }(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonUnsafeTemplates},
			msg:  target + ": template0 accepts connections",
		},
		"AcceptedTemplate1IsReadyWithAWarning": {
			o: func() ConfigObservation {
				o := healthy
				o.TemplatesWarning = "unhardenedTemplate1 is Warn and PUBLIC may"
				return o
			}(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseReady, Ready: true, Reason: ReasonReady},
			msg:  "; WARNING: unhardenedTemplate1 is Warn and PUBLIC may",
		},
		"SuperuserIsReadyWithAWarning": {
			o:    func() ConfigObservation { o := healthy; o.Superuser = true; return o }(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseReady, Ready: true, Reason: ReasonReady},
			msg:  "is a superuser",
		},
		"SecretGoneButPoolWorks": {
			o: func() ConfigObservation {
				o := healthy
				o.SecretMissing, o.PoolKept, o.SecretProblem = true, true, "Secret ns/x not found"
				return o
			}(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseReady, Ready: true, Reason: ReasonReady},
			msg:  "WARNING: Secret ns/x not found",
		},
		"FirstValidationWithoutSecret": {
			o:    ConfigObservation{SecretMissing: true, SecretProblem: "Secret ns/x not found"},
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhasePending, Reason: ReasonInvalidSpec, Message: "Secret ns/x not found"},
		},
		"SecretMissingAndCheckNotRun": {
			// A Secret that is gone, with no pool to fall back to, is never
			// Ready even if an earlier check had passed.
			o:    ConfigObservation{SecretMissing: true, SecretProblem: "Secret ns/x not found", Checked: true, Version: "15"},
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhasePending, Reason: ReasonInvalidSpec, Message: "Secret ns/x not found"},
		},
		"InvalidSpecWins": {
			o:    func() ConfigObservation { o := healthy; o.Invalid = "bad namespace"; return o }(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhasePending, Reason: ReasonInvalidSpec, Message: "bad namespace"},
		},
		"NotYetChecked": {
			o:    ConfigObservation{},
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonReconciling, Message: "validating the server"},
		},
		"Unavailable": {
			o:    ConfigObservation{Checked: true, CheckClass: "DependencyUnavailable", CheckMessage: "connection refused", Target: target},
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonDependencyUnavailable, Message: target + ": connection refused"},
		},
		"AuthFailed": {
			o:    ConfigObservation{Checked: true, CheckClass: "AuthenticationFailed", CheckMessage: "password authentication failed", Target: target},
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonAuthenticationFailed, Message: target + ": password authentication failed"},
		},
		"UnknownClassIsUnavailable": {
			o:    ConfigObservation{Checked: true, CheckClass: "Weird", CheckMessage: "x", Target: target},
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonDependencyUnavailable, Message: target + ": x"},
		},
		"NewerThanTestedIsReadyWithAWarning": {
			o: func() ConfigObservation {
				o := healthy
				o.Warning = "PostgreSQL 19 is newer than the majors this provider is tested on"
				return o
			}(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseReady, Ready: true, Reason: ReasonReady},
			msg:  "WARNING: PostgreSQL 19 is newer",
		},
		"UnsupportedVersion": {
			o: func() ConfigObservation {
				o := healthy
				o.CheckClass, o.CheckMessage = ReasonUnsupportedVersion, "PostgreSQL 13.2 is not supported"
				return o
			}(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonUnsupportedVersion, Message: healthy.Target + ": PostgreSQL 13.2 is not supported"},
		},
		"NoPrivileges": {
			o:    func() ConfigObservation { o := healthy; o.Privileges = "lacks CREATEROLE"; return o }(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseValidating, Reason: ReasonInsufficientPrivileges, Message: "lacks CREATEROLE"},
		},
		"Deleting": {
			o:    func() ConfigObservation { o := healthy; o.Deleting, o.Users = true, 2; return o }(),
			want: ConfigVerdict{Phase: v1alpha1.ConfigPhaseDeleting, Reason: ReasonReconciling},
			msg:  "its 2 user(s) (Databases and DatabaseBindings)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideConfig(tc.o)
			if tc.msg != "" {
				if !strings.Contains(got.Message, tc.msg) {
					t.Errorf("message %q lacks %q", got.Message, tc.msg)
				}
				got.Message = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecideConfig(): -want +got:\n%s", diff)
			}
		})
	}
}
