package main

import (
	"context"
	"slices"

	"ddupan.top/provider-postgresql-tenant/internal/testenv"
)

// kind is one fault kind: start makes it and returns what ends it. A kill
// ends by itself (the kubelet, or the harness, brings the process back, as
// a supervisor would); a pause, a seal or a cut lasts until ended.
type kind struct {
	target string
	start  func(context.Context, *testenv.Faults) (func(context.Context) error, error)
}

func nothing(context.Context) error { return nil }

func kill(target string) kind {
	return kind{target, func(ctx context.Context, f *testenv.Faults) (func(context.Context) error, error) {
		return nothing, f.Kill(ctx, target)
	}}
}

func restart(target string) kind {
	return kind{target, func(ctx context.Context, f *testenv.Faults) (func(context.Context) error, error) {
		return nothing, f.Restart(ctx, target)
	}}
}

func pause(target string) kind {
	return kind{target, func(_ context.Context, f *testenv.Faults) (func(context.Context) error, error) {
		return func(context.Context) error { return f.Resume(target) }, f.Pause(target)
	}}
}

// kinds are the fault kinds a run draws from, by name.
var kinds = map[string]kind{
	"provider-kill":      kill(testenv.TargetProvider),
	"provider-pause":     pause(testenv.TargetProvider),
	"function-kill":      kill(testenv.TargetFunction),
	"function-pause":     pause(testenv.TargetFunction),
	"postgresql-kill":    kill(testenv.TargetPostgres),
	"postgresql-restart": restart(testenv.TargetPostgres),
	"postgresql-pause":   pause(testenv.TargetPostgres),
	"openbao-kill":       kill(testenv.TargetOpenBao),
	"openbao-pause":      pause(testenv.TargetOpenBao),
	"openbao-seal": {testenv.TargetOpenBao, func(ctx context.Context, f *testenv.Faults) (func(context.Context) error, error) {
		return f.Unseal, f.Seal(ctx)
	}},
	"eso-kill":             kill(testenv.TargetESO),
	"eso-pause":            pause(testenv.TargetESO),
	"crossplane-kill":      kill(testenv.TargetCrossplane),
	"crossplane-pause":     pause(testenv.TargetCrossplane),
	"kube-apiserver-kill":  kill(testenv.TargetAPIServer),
	"kube-apiserver-pause": pause(testenv.TargetAPIServer),
	"etcd-kill":            kill(testenv.TargetEtcd),
	"etcd-pause":           pause(testenv.TargetEtcd),
	"network-cut": {"network", func(_ context.Context, f *testenv.Faults) (func(context.Context) error, error) {
		return func(context.Context) error { return f.RestoreNetwork() }, f.CutNetwork()
	}},
}

func allKinds() []string {
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
