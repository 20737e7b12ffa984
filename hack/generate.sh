#!/usr/bin/env bash
# Regenerates every generated file: zz_generated*.go (controller-gen object,
# angryjet method sets), package/crds and the composition function's input
# schema in package/function/input (controller-gen crd). The generators
# are pinned as Go tools in hack/tools/go.mod, kept apart from the provider's
# own module so their dependencies never move the provider's.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh

tools_bin=$PPT_CACHE/tools/$(sha256sum hack/tools/go.sum | cut -c1-16)
mkdir -p "$tools_bin"
for t in sigs.k8s.io/controller-tools/cmd/controller-gen github.com/crossplane/crossplane-tools/cmd/angryjet; do
  b=$tools_bin/${t##*/}
  [ -x "$b" ] || go -C hack/tools build -trimpath -o "$b" "$t"
done

# The interface assertions in apis/*/interfaces.go need angryjet's output to
# compile; the generate tag leaves them out while generating.
export GOFLAGS="${GOFLAGS:-} -tags=generate"
rm -rf package/crds package/function/input
"$tools_bin/controller-gen" object:headerFile=hack/boilerplate.go.txt paths=./apis/...
"$tools_bin/controller-gen" crd:crdVersions=v1 paths=./apis/v1alpha1/... output:artifacts:config=package/crds
# The composition function's input: its schema ships in the function's
# package (never installed as a resource of the cluster).
"$tools_bin/controller-gen" crd:crdVersions=v1 paths=./apis/function/... output:artifacts:config=package/function/input
# angryjet writes the method sets of cluster-scoped (legacy) and namespaced
# kinds to the same file names, the later overwriting the earlier, and
# skips methods defined in another file. So it runs twice: the second run,
# with other file names, writes what the first run's overwrite lost.
rm -f apis/v1alpha1/zz_generated.managed*.go apis/v1alpha1/zz_generated.pc*.go
"$tools_bin/angryjet" generate-methodsets --header-file=hack/boilerplate.go.txt ./apis/...
"$tools_bin/angryjet" generate-methodsets --header-file=hack/boilerplate.go.txt \
  --filename-managed=zz_generated.managed_cluster.go --filename-managed-list=zz_generated.managedlist_cluster.go \
  --filename-pc=zz_generated.pc_cluster.go --filename-pcu=zz_generated.pcu_cluster.go \
  --filename-pcu-list=zz_generated.pculist_cluster.go ./apis/...
unset GOFLAGS
go run ./hack/crdpatch package/crds/database.ayatori.ddupan.top_databases.yaml package/crds/database.ayatori.ddupan.top_databasebindings.yaml
go run ./hack/configgen
