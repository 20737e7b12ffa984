package database

import (
	"testing"

	"ddupan.top/provider-postgresql-tenant/internal/tenancy"
	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// constantsOf maps the name of each constant of the named type declared in
// the decision core's source to its value: every action the core can
// name.
func constantsOf(t *testing.T, typ string) map[string]string {
	t.Helper()
	consts, err := testenv.Consts("../../tenancy")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range consts {
		if c.Type != typ {
			continue
		}
		if !c.Literal {
			t.Fatalf("%s: tenancy.%s: its value is not a string literal", c.Pos, c.Name)
		}
		out[c.Name] = c.Value
	}
	if len(out) == 0 {
		t.Fatalf("no constant of type %s found in internal/tenancy", typ)
	}
	return out
}

// TestEveryActionOfTheCoreIsTaken: each repair and each data role action
// the decision core can name has its function in the table that takes it;
// one without would be decided and then silently never done.
func TestEveryActionOfTheCoreIsTaken(t *testing.T) {
	for name, v := range constantsOf(t, "Repair") {
		if _, ok := repairs[tenancy.Repair(v)]; !ok {
			t.Errorf("tenancy.%s has no function in the repairs table", name)
		}
	}
	for name, v := range constantsOf(t, "DataRoleAction") {
		if _, ok := dataRoleSteps[tenancy.DataRoleAction(v)]; !ok {
			t.Errorf("tenancy.%s has no step in the data role actions table", name)
		}
	}
}
