// Package argocd holds the Argo CD health checks for the Tenant and the
// Database (tenant.lua, database.lua; installed into argocd-cm as
// docs/gitops.md describes) and runs them the way Argo CD does, so that
// tests can check them against constructed and real objects.
package argocd

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// The health checks, as shipped.
var (
	//go:embed tenant.lua
	TenantScript string
	//go:embed database.lua
	DatabaseScript string
)

// Health statuses Argo CD accepts from a health check.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Status is what a health check returns.
type Status struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

func (s Status) String() string { return s.Status + " (" + s.Message + ")" }

// Run runs a health check on obj (the object as decoded from JSON, e.g.
// unstructured.Unstructured.Object) as Argo CD's Lua VM does: gopher-lua
// with only the package, base and table libraries open (Argo CD's default,
// resource.customizations.useOpenLibs unset), obj as a global table, a
// one-second limit, and the returned table read as {status, message}. A
// status Argo CD does not know becomes Unknown, as in Argo CD.
func Run(script string, obj map[string]any) (Status, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return Status{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	v, err := decode(l, obj)
	if err != nil {
		return Status{}, err
	}
	l.SetGlobal("obj", v)
	if err := l.DoString(script); err != nil {
		return Status{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Status{}, fmt.Errorf("the health check returned a %s, not a table", l.Get(-1).Type())
	}
	// Argo CD encodes the table as JSON and decodes a HealthStatus from it:
	// a status or message that is not a string fails there too.
	s := Status{}
	for _, f := range []struct {
		key string
		to  *string
	}{{"status", &s.Status}, {"message", &s.Message}} {
		switch x := ret.RawGetString(f.key).(type) {
		case lua.LString:
			*f.to = string(x)
		case *lua.LNilType:
		default:
			return Status{}, fmt.Errorf("the health check's %s is a %s, not a string", f.key, x.Type())
		}
	}
	switch s.Status {
	case Healthy, Progressing, Degraded, Suspended, Missing, Unknown:
		return s, nil
	}
	return Status{Status: Unknown, Message: "Lua returned an invalid health status"}, nil
}

// RunJSON runs a health check on an object given as JSON.
func RunJSON(script string, obj []byte) (Status, error) {
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil {
		return Status{}, err
	}
	return Run(script, m)
}

// decode converts a JSON value to Lua as Argo CD does: objects and arrays
// become tables (arrays from index 1), numbers numbers.
func decode(l *lua.LState, v any) (lua.LValue, error) {
	switch x := v.(type) {
	case nil:
		return lua.LNil, nil
	case bool:
		return lua.LBool(x), nil
	case string:
		return lua.LString(x), nil
	case float64:
		return lua.LNumber(x), nil
	case int64:
		return lua.LNumber(x), nil
	case int:
		return lua.LNumber(x), nil
	case json.Number:
		f, err := x.Float64()
		return lua.LNumber(f), err
	case map[string]any:
		t := l.CreateTable(0, len(x))
		for k, e := range x {
			lv, err := decode(l, e)
			if err != nil {
				return nil, err
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := l.CreateTable(len(x), 0)
		for i, e := range x {
			lv, err := decode(l, e)
			if err != nil {
				return nil, err
			}
			t.RawSetInt(i+1, lv)
		}
		return t, nil
	}
	return nil, fmt.Errorf("cannot convert a %T to Lua", v)
}
