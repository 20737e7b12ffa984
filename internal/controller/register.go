// Package controller wires every controller of the provider.
package controller

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	ctrl "sigs.k8s.io/controller-runtime"

	"ddupan.top/provider-postgresql-tenant/internal/clients/postgres"
	"ddupan.top/provider-postgresql-tenant/internal/controller/binding"
	"ddupan.top/provider-postgresql-tenant/internal/controller/config"
	"ddupan.top/provider-postgresql-tenant/internal/controller/database"
	"ddupan.top/provider-postgresql-tenant/internal/memo"
	"ddupan.top/provider-postgresql-tenant/internal/options"
)

// SetupGated registers every controller with safe-start support: each one
// starts only once the CRDs it needs are established.
// The pool manager is shared: the config controllers build and validate one
// pool per config, the Database controller only looks them up.
// stepHook, normally nil, injects faults before Database and binding write
// steps.
func SetupGated(mgr ctrl.Manager, o controller.Options, opts options.Options, pools *postgres.Manager, kv KV, stepHook func(string) error) error {
	// One memory of measured database sizes: the config status controller
	// measures them, each Database shows its own.
	sizes := memo.NewSizes()
	so := config.StatusOptions{Namespace: opts.Namespace, Pools: pools, Interval: o.PollInterval, Sizes: sizes, SizeInterval: opts.SizeRefreshInterval}
	if err := config.SetupGated(mgr, o, so); err != nil {
		return err
	}
	// One memory of proven logins: the binder reads a delivery only when
	// the Database's proven record version moved or its check is due.
	logins := memo.NewLogins()
	if err := database.SetupGated(mgr, o, database.Deps{Options: opts, Pools: pools, KV: kv, StepHook: stepHook, Logins: logins, Sizes: sizes}); err != nil {
		return err
	}
	return binding.SetupGated(mgr, o, binding.Deps{Options: opts, KV: kv, StepHook: stepHook, Records: logins})
}

// KV is what the Database and DatabaseBinding controllers need of OpenBao
// (openbao.Client).
type KV interface {
	database.KV
	binding.KV
}
