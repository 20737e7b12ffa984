#!/usr/bin/env bash
# Writes, into the directory $2, the input schema of function-patch-and-transform
# read from the directory $1, with "Replace" added to the enum of a string
# transform's type. The function implements that transform (its input Go type
# has StringTransformTypeReplace and the schema itself has the `replace` field
# it reads), but the published schema's enum omits it, so offline validation
# (`crossplane resource validate`) would refuse the Composition's Replace
# transforms that the function runs (test/configuration renders them with the
# real function). Fails unless exactly the expected enums were patched.
set -euo pipefail
in=$1 out=$2
mkdir -p "$out"
src=$(ls "$in"/*.yaml)
dst=$out/$(basename "$src")
sed '/^ *- TrimSuffix$/{n;s/^\( *\)- Regexp$/&\n\1- Replace/}' "$src" > "$dst"
patched=$(grep -c -- '- Replace$' "$dst" || true)
before=$(grep -c -- '- Replace$' "$src" || true)
want=$(grep -c -- '- TrimSuffix$' "$src")
if [ $((patched - before)) -ne "$want" ]; then
  echo "pt-input-schema: patched $((patched - before)) string transform enums, expected $want; the schema changed, review this script" >&2
  exit 1
fi
