// Package function is the Tenant composition function: what a Tenant (or a
// legacy XTenant with its claim) composes, the Tenant's status, and
// readiness. Compose is plain Go on plain values; fn.go adapts it to
// function-sdk-go.
package function

import (
	"fmt"
	"strconv"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"ddupan.top/provider-postgresql-tenant/apis/v1alpha1"
	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
)

// Names of the composed resources in the pipeline (the
// crossplane.io/composition-resource-name of each): unchanged since the
// Compositions were written with patch-and-transform, so an upgrade keeps
// every Tenant's resources.
const (
	NameBinding        = "binding"
	NameExternalSecret = "externalsecret"
	// NameRoleSecretPrefix prefixes the name of a data role's
	// ExternalSecret in the pipeline: externalsecret-<role>.
	NameRoleSecretPrefix = NameExternalSecret + "-"
)

// Phases of a Tenant beyond its binding's (Pending, Binding, Bound,
// Provisioning).
const (
	PhasePending               = "Pending"
	PhaseExternalSecretCreated = "ExternalSecretCreated"
	PhaseReady                 = "Ready"
)

// ReasonCredentialProjectionFailed is the Tenant's reason while ESO reports
// the ExternalSecret not Ready.
const ReasonCredentialProjectionFailed = "CredentialProjectionFailed" //nolint:gosec // a condition reason, not a credential

// AnnotationBindingReady marks the ExternalSecret: it is composed only
// once the binding was Ready.
const AnnotationBindingReady = "database.ayatori.ddupan.top/binding-ready"

// AnnotationCredentialVersion is, on an ExternalSecret, the version of
// the Database's credential record its delivery copy holds, as the
// binding shows it. A change of any annotation makes ESO sync the
// ExternalSecret at once, so a rotated password reaches the Secret within
// seconds instead of at the next refreshInterval, and a Tenant whose
// credential does not change costs no sync more.
const AnnotationCredentialVersion = "database.ayatori.ddupan.top/credential-version"

// CredentialKeys are the keys of the Secret, exactly: those of the record.
var CredentialKeys = tenancy.CredentialKeys

// progressReasons are the binding's Ready reasons that say it is on its
// way: the Tenant's phase shows that progress, and its reason and message
// stay empty, so that each step does not change the Tenant's status (and
// render it again). Any other reason is a state an app team or an admin
// must act on, and is relayed with its message.
var progressReasons = map[string]bool{
	"": true, "Creating": true, "ReconcileSuccess": true, "Available": true, "Deleting": true,
	"Binding": true, "WaitingForTenant": true, "Provisioning": true, "Delivering": true, "DatabaseNotReady": true,
	"DataRoleNotReady": true,
}

// Input is what the Compositions choose (the function's input).
type Input struct {
	SecretStore     string
	RefreshInterval string
}

// Condition is a Kubernetes condition as read.
type Condition struct {
	Type, Status, Reason, Message string
}

// Tenant is the composite as read: a Tenant, or a legacy XTenant whose
// names come from its claim.
type Tenant struct {
	// Legacy: a cluster-scoped XTenant (its claim's namespace and name are
	// Namespace and Name); without a claim it composes nothing.
	Legacy bool
	// Name and Namespace name the Tenant (legacy: the claim); UID is the
	// composite's.
	Name, Namespace, UID string

	InstanceRef, DatabaseRef, Database, LoginRole string
	Extensions                                    []string
	// DatabaseOptions is spec.databaseOptions (encoding and locale of a
	// new database), passed on as the binding's spec.forProvider.options.
	DatabaseOptions map[string]any
	// SecretName is spec.credential.secretName.
	SecretName string
	// DataRoles are spec.dataRoles, in order.
	DataRoles []DataRole
	// Phase is status.phase as recorded by an earlier render.
	Phase string
}

// DataRole is a data role a Tenant asks for.
type DataRole struct {
	Name, Access string
	// SecretName is the Secret ESO writes (default: the owner's Secret's
	// name and -<name>).
	SecretName string
}

// BindingRole is one data role's delivery as its binding shows it.
type BindingRole struct {
	Name, Role, Path string
	Ready            bool
	// Version is the record version its delivery copy holds (0: not shown).
	Version int64
}

// Binding is the composed DatabaseBinding as observed.
type Binding struct {
	Phase                                       string
	Instance, DatabaseName, Database, LoginRole string
	CredentialPath, OpenBaoURL                  string
	// CredentialVersion is the record version the delivery copy holds
	// (0: not shown).
	CredentialVersion int64
	Conditions        []Condition
	DataRoles         []BindingRole
}

// ExternalSecret is the composed ExternalSecret as observed.
type ExternalSecret struct {
	// Key is the OpenBao path it reads.
	Key string
	// SecretName is status.binding.name: the Secret ESO wrote.
	SecretName string
	// CredentialVersion is its AnnotationCredentialVersion.
	CredentialVersion string
	Conditions        []Condition
	// Spec is its spec as observed: composed again unchanged when the path
	// it reads cannot be told (neither the binding nor the spec say it), so
	// that the Secret is never removed for lack of a status.
	Spec map[string]any
}

// Observed is everything Compose reads.
type Observed struct {
	Input          Input
	Tenant         Tenant
	Binding        *Binding
	ExternalSecret *ExternalSecret
	// RoleSecrets are the data roles' ExternalSecrets, by role name.
	RoleSecrets map[string]*ExternalSecret
}

// Status is the Tenant's status as composed.
type Status struct {
	Phase, Instance, Database, LoginRole, DatabaseName string
	OpenBaoURL, SecretName                             string
	Reason, Message                                    string
	DataRoles                                          []RoleStatus
}

// RoleStatus is one data role as the Tenant's status shows it.
type RoleStatus struct {
	Name, Role, SecretName string
	Ready                  bool
}

// Resource is a desired composed resource and whether it is ready.
type Resource struct {
	Object map[string]any
	Ready  bool
}

// Desired is what Compose returns.
type Desired struct {
	// Resources by name (NameBinding, ...); empty for an XTenant without a
	// claim.
	Resources map[string]Resource
	Status    Status
	// Ready: the Tenant is Ready (every resource composed and ready).
	Ready bool
}

// Compose decides what a Tenant composes and shows.
func Compose(o Observed) Desired {
	t := o.Tenant
	if t.Legacy && (t.Name == "" || t.Namespace == "") {
		// An XTenant made without a claim composes nothing.
		return Desired{Resources: map[string]Resource{}, Status: Status{Phase: PhasePending, Instance: t.InstanceRef}}
	}
	d := Desired{Resources: map[string]Resource{}}
	bind := binding(t)
	d.Resources[NameBinding] = Resource{Object: bindingObject(&bind, t.DatabaseOptions), Ready: o.Binding != nil && conditionTrue(o.Binding.Conditions, "Ready")}

	st := Status{Phase: PhasePending, Instance: t.InstanceRef}
	st.Database = ptr.Deref(bind.Spec.ForProvider.Database, "")
	st.LoginRole = ptr.Deref(bind.Spec.ForProvider.LoginRole, "")
	if b := o.Binding; b != nil {
		st.Instance = or(b.Instance, st.Instance)
		st.Database = or(b.Database, st.Database)
		st.LoginRole = or(b.LoginRole, st.LoginRole)
		st.DatabaseName, st.OpenBaoURL = b.DatabaseName, b.OpenBaoURL
		if b.Phase != "" {
			st.Phase = b.Phase
			if b.Phase == PhaseReady {
				// The ExternalSecret is composed in this same render: the
				// Tenant is Ready only once its Secret is there too.
				st.Phase = PhaseExternalSecretCreated
			}
		}
	}

	esName := t.Name + "-postgresql"
	if t.InstanceRef != "" {
		esName = t.InstanceRef + "-" + t.Name + "-postgresql"
	}
	key := ""
	if o.Binding != nil {
		key = o.Binding.CredentialPath
	}
	if key == "" && o.ExternalSecret != nil {
		key = o.ExternalSecret.Key
	}
	// The gate: the ExternalSecret is composed once the
	// binding is Ready, and then always: the Tenant's own recorded progress
	// and an existing ExternalSecret keep it open, so a render that sees
	// the binding briefly not Ready (and the ExternalSecret not yet) never
	// removes the Secret. The Tenant's phase alone opens nothing: what is
	// composed reads the delivery path the binding records only once it
	// has been Ready (or an existing ExternalSecret's), so a phase forged
	// Ready before that composes no ExternalSecret.
	open := (o.Binding != nil && o.Binding.Phase == PhaseReady) || t.Phase == PhaseExternalSecretCreated || t.Phase == PhaseReady || o.ExternalSecret != nil
	composed := open && (key != "" || o.ExternalSecret != nil)
	if composed {
		es := externalSecretObject(o.Input, t, esName, key)
		if key == "" {
			es["spec"] = o.ExternalSecret.Spec
		}
		var shown int64
		if o.Binding != nil {
			shown = o.Binding.CredentialVersion
		}
		setCredentialVersion(es, shown, o.ExternalSecret)
		d.Resources[NameExternalSecret] = Resource{
			Object: es,
			Ready:  o.ExternalSecret != nil && conditionTrue(o.ExternalSecret.Conditions, "Ready") && o.ExternalSecret.SecretName != "",
		}
	}
	rolesReady := composeRoles(o, esName, open, &d, &st)
	if es := o.ExternalSecret; es != nil {
		st.Phase = PhaseExternalSecretCreated
		st.SecretName = es.SecretName
		if c, ok := condition(es.Conditions, "Ready"); ok && c.Status == "True" && c.Reason == "SecretSynced" && es.SecretName != "" && rolesReady {
			st.Phase = PhaseReady
		}
		if c, ok := condition(es.Conditions, "Ready"); ok && c.Status == "False" {
			st.Reason, st.Message = ReasonCredentialProjectionFailed, c.Message
		}
	}
	// The binding's reason wins: while the binding is not Ready, that is
	// what must be acted on. Its message is relayed as it is: the binding
	// is an object of the Tenant's namespace, and the binder writes there
	// only the Tenant's own state (a config's or a Database's message for
	// admins never reaches it), so the Tenant shows nothing its namespace
	// could not read already.
	if b := o.Binding; b != nil {
		if c, ok := condition(b.Conditions, "Ready"); ok && c.Status == "False" && !progressReasons[c.Reason] {
			st.Reason, st.Message = c.Reason, c.Message
		}
	}
	d.Status = st
	d.Ready = composed && rolesReady
	for _, r := range d.Resources {
		d.Ready = d.Ready && r.Ready
	}
	return d
}

// composeRoles composes one ExternalSecret per data role the Tenant asks
// for, through the same gate as the owner's (open), each reading the
// role's delivery copy that the binding shows (or, lacking that, what its
// existing ExternalSecret reads: never removed for lack of a status). A
// role no longer asked for is composed no more, so Crossplane deletes its
// ExternalSecret and Secret; the binder removes its copy and its role only
// after that. It returns whether every role's Secret is synced.
func composeRoles(o Observed, esName string, open bool, d *Desired, st *Status) bool {
	ready := true
	for _, r := range o.Tenant.DataRoles {
		rs := RoleStatus{Name: r.Name, SecretName: roleSecretName(o.Tenant, esName, r)}
		key := ""
		var shown int64
		if b := o.Binding; b != nil {
			for _, br := range b.DataRoles {
				if br.Name == r.Name {
					key, rs.Role, shown = br.Path, br.Role, br.Version
				}
			}
		}
		obs := o.RoleSecrets[r.Name]
		if key == "" && obs != nil {
			key = obs.Key
		}
		if (open || obs != nil) && (key != "" || obs != nil) {
			es := externalSecretObject(o.Input, o.Tenant, esName+"-"+r.Name, key)
			setSecretName(es, rs.SecretName)
			if key == "" {
				es["spec"] = obs.Spec
			}
			setCredentialVersion(es, shown, obs)
			rs.Ready = obs != nil && conditionTrue(obs.Conditions, "Ready") && obs.SecretName != ""
			d.Resources[NameRoleSecretPrefix+r.Name] = Resource{Object: es, Ready: rs.Ready}
			if obs != nil && st.Reason == "" {
				if c, ok := condition(obs.Conditions, "Ready"); ok && c.Status == "False" {
					st.Reason, st.Message = ReasonCredentialProjectionFailed, "data role "+r.Name+": "+c.Message
				}
			}
		}
		ready = ready && rs.Ready
		st.DataRoles = append(st.DataRoles, rs)
	}
	return ready
}

// roleSecretName is the Secret a data role's ExternalSecret writes.
func roleSecretName(t Tenant, esName string, r DataRole) string {
	if r.SecretName != "" {
		return r.SecretName
	}
	return or(t.SecretName, esName) + "-" + r.Name
}

func setSecretName(es map[string]any, name string) {
	if tgt, ok := es["spec"].(map[string]any)["target"].(map[string]any); ok {
		tgt["name"] = name
	}
}

// DatabaseName is the database (and default login role) name a Tenant
// named name gets: '-' and '.' made '_'.
func DatabaseName(name string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(name)
}

// binding is the DatabaseBinding a Tenant composes, built from the API's
// own types so that a renamed or retyped field fails to compile instead
// of composing a key the API server silently prunes. Its
// spec.forProvider.options are left to bindingObject, which passes the
// Tenant's on as they are.
func binding(t Tenant) v1alpha1.DatabaseBinding {
	b := v1alpha1.DatabaseBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.DatabaseBindingKind},
		ObjectMeta: metav1.ObjectMeta{Name: t.Name},
	}
	if t.Legacy {
		b.Namespace = t.Namespace
	}
	fp := &b.Spec.ForProvider
	fp.Tenant = v1alpha1.TenantReference{Name: t.Name, UID: t.UID}
	if t.DatabaseRef != "" {
		fp.DatabaseRef = ptr.To(t.DatabaseRef)
	}
	if t.InstanceRef != "" {
		b.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Name: t.InstanceRef, Kind: v1alpha1.ClusterProviderConfigKind}
	}
	if t.DatabaseRef == "" {
		// A new database: on the server named, or (none named) on the
		// namespace's default server, which the binder chooses once.
		fp.Database = ptr.To(DatabaseName(t.Name))
		fp.LoginRole = ptr.To(DatabaseName(t.Name))
	}
	if t.Database != "" {
		fp.Database = ptr.To(t.Database)
		fp.LoginRole = ptr.To(t.Database)
	}
	if t.LoginRole != "" {
		fp.LoginRole = ptr.To(t.LoginRole)
	}
	if len(t.Extensions) > 0 {
		fp.Extensions = t.Extensions
	}
	for _, r := range t.DataRoles {
		fp.DataRoles = append(fp.DataRoles, v1alpha1.BindingDataRole{Name: r.Name, Access: v1alpha1.DataAccess(r.Access)})
	}
	return b
}

// bindingObject is the binding as composed: b converted to its
// unstructured form, the one conversion of the typed binding, with what
// the conversion adds that was never composed taken out again.
//
// The Tenant's databaseOptions are passed on as they are, as
// spec.forProvider.options: read as a map, they are not decoded into
// v1alpha1.DatabaseOptions, whose omitempty fields would drop a key the
// Tenant sets (even an empty one) and change the binding composed. That
// key is the one API field name written as a string here:
// TestComposedBindingDecodesStrictly decodes the binding into the API's
// type and fails on a key the API does not know.
func bindingObject(b *v1alpha1.DatabaseBinding, options map[string]any) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		// Only a field of a kind JSON cannot hold (a channel, a function,
		// a complex number) fails to convert: the API types have none.
		panic(fmt.Sprintf("cannot convert the DatabaseBinding to unstructured: %v", err))
	}
	// The conversion writes the zero status (status.atProvider.credential:
	// {}): the function composes no status, the provider writes it.
	delete(u, "status")
	// metadata.name is omitempty in ObjectMeta; the binding always carries
	// it, as the Tenant's name, even an empty one.
	u["metadata"].(map[string]any)["name"] = b.Name
	if len(options) > 0 {
		u["spec"].(map[string]any)["forProvider"].(map[string]any)["options"] = options
	}
	return u
}

func externalSecretObject(in Input, t Tenant, name, key string) map[string]any {
	meta := map[string]any{"name": name, "annotations": map[string]any{AnnotationBindingReady: "true"}}
	if t.Legacy {
		meta["namespace"] = t.Namespace
	}
	tmpl := make(map[string]any, len(CredentialKeys))
	for _, k := range CredentialKeys {
		tmpl[k] = "{{ ." + k + " }}"
	}
	return map[string]any{
		"apiVersion": "external-secrets.io/v1",
		"kind":       "ExternalSecret",
		"metadata":   meta,
		"spec": map[string]any{
			"refreshInterval": or(in.RefreshInterval, "1h"),
			"secretStoreRef":  map[string]any{"kind": "ClusterSecretStore", "name": or(in.SecretStore, "openbao-tenants")},
			// The Secret belongs to the ExternalSecret (deleted with it);
			// if the copy is ever missing, ESO keeps the last good Secret.
			//
			// One OpenBao read per sync: dataFrom extracts the whole
			// record, and the template emits exactly its seven keys. With
			// mergePolicy Replace only the templated keys reach the Secret:
			// a field added to the record later, by the provider or by
			// whoever can write the path, never does. A record missing one
			// of the seven fails the sync (the template engine's missing
			// keys are errors) and ESO keeps the last good Secret.
			"target": map[string]any{
				"name": or(t.SecretName, name), "creationPolicy": "Owner", "deletionPolicy": "Retain",
				"template": map[string]any{"engineVersion": "v2", "mergePolicy": "Replace", "data": tmpl},
			},
			"dataFrom": []any{map[string]any{"extract": map[string]any{"key": key}}},
		},
	}
}

// setCredentialVersion annotates an ExternalSecret with the record
// version the binding shows, or, while it shows none, with what the
// observed ExternalSecret carries (an annotation that came and went would
// make ESO sync for nothing).
func setCredentialVersion(es map[string]any, shown int64, observed *ExternalSecret) {
	v := ""
	switch {
	case shown > 0:
		v = strconv.FormatInt(shown, 10)
	case observed != nil:
		v = observed.CredentialVersion
	}
	if v != "" {
		es["metadata"].(map[string]any)["annotations"].(map[string]any)[AnnotationCredentialVersion] = v
	}
}

func condition(cs []Condition, typ string) (Condition, bool) {
	for _, c := range cs {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

func conditionTrue(cs []Condition, typ string) bool {
	c, ok := condition(cs, typ)
	return ok && c.Status == "True"
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
