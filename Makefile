# provider-postgresql-tenant
#
#   make dev        local control plane + PostgreSQL + OpenBao + the provider + the examples
#   make dev-down   stop it all
#   make test       every test, against real components (installs what is missing)
#
# Binaries built from the Go module proxy are cached in
# $(PPT_CACHE) (default ~/.cache/provider-postgresql-tenant), keyed by version.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
OUTPUT ?= _output
GO_TEST_FLAGS ?= -count=1 -p 2 -timeout 30m

.PHONY: help
help: ## show the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: dev
dev: ## start the local control plane, the provider and the examples
	hack/dev.sh up

.PHONY: dev-down
dev-down: ## stop everything `make dev` started
	hack/dev.sh down

.PHONY: tools
tools: ## install every real component the tests need (idempotent)
	hack/install.sh test

.PHONY: tools-all
tools-all: ## install every real component of the project (ESO, Crossplane CLI, functions, ...)
	hack/install.sh all

.PHONY: test
test: tools ## run every test against real components
	$(GO) test $(GO_TEST_FLAGS) ./...

.PHONY: e2e
e2e: tools ## run the acceptance suite (test/e2e: the provider as a process, Crossplane core, ESO, faults)
	$(GO) test -count=1 -v ./test/e2e/

.PHONY: bench
bench: tools ## benchmark the provider against the floor on real components (BENCH_FLAGS=-large adds N=1000; docs/performance.md)
	$(GO) run ./test/bench $(BENCH_FLAGS)

.PHONY: unit
unit: ## run only the tests that need no real component
	$(GO) test -count=1 ./internal/tenancy/... ./internal/scram/... ./internal/options/...

.PHONY: generate
generate: ## regenerate zz_generated*.go and package/crds
	hack/generate.sh

.PHONY: check-diff
check-diff: generate ## fail when generated files differ from what is committed
	@if [ -n "$$(git status --porcelain -- apis package)" ]; then \
	  git status --porcelain -- apis package; git diff --stat -- apis package; \
	  echo "Generated files drifted: run 'make generate' and commit the result."; exit 1; fi

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: build
build: ## build the provider and Configuration packages (_output/*.xpkg, no Docker) and lint them
	hack/build-package.sh
	$(MAKE) lint-package

.PHONY: lint-package
lint-package: ## check the built packages; validate the Configuration and the examples against the CRDs offline
	$(GO) run ./hack/xpkgcheck provider $(OUTPUT)/provider-postgresql-tenant.xpkg package/crds
	$(GO) run ./hack/xpkgcheck configuration $(OUTPUT)/configuration-postgresql-tenant.xpkg package/configuration
	bin=$${PPT_BIN:-$${PPT_CACHE:-$$HOME/.cache/provider-postgresql-tenant}/bin}; \
	  schemas=package/crds,$$bin/eso-crds,$$bin/crossplane-crds,package/configuration/xrd.yaml,package/configuration/legacy/xrd.yaml,$$bin/function-patch-and-transform-package/input; \
	  $$bin/crossplane resource validate --crossplane-image= --cache-dir=$(OUTPUT)/validate-cache \
	    --error-on-missing-schemas --skip-success-results $$schemas examples && \
	  $$bin/crossplane resource validate --crossplane-image= --cache-dir=$(OUTPUT)/validate-cache \
	    --error-on-missing-schemas --skip-success-results $$schemas package/configuration/xrd.yaml,package/configuration/composition.yaml,package/configuration/legacy

.PHONY: provider
provider: ## build the provider binary
	CGO_ENABLED=0 $(GO) build -trimpath -o $(OUTPUT)/bin/provider ./cmd/provider
