#!/usr/bin/env bash
# Fails when the generated code, or the API rule violation report, differs
# from what hack/update-codegen.sh produces from the current types.
set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

# Regenerate into a copy of the inputs, then compare the copy with the original.
cp -a "${SCRIPT_ROOT}/go.mod" "${SCRIPT_ROOT}/go.sum" "${SCRIPT_ROOT}/hack" "${SCRIPT_ROOT}/pkg" "${tmp}/"
(cd "${tmp}" && UPDATE_API_KNOWN_VIOLATIONS=true OUTPUT_ROOT="${tmp}" bash hack/update-codegen.sh) >/dev/null

status=0
for p in pkg/apis pkg/generated hack/api-rule-violations.list; do
    if ! diff -Naupr "${SCRIPT_ROOT}/${p}" "${tmp}/${p}"; then
        status=1
    fi
done
if [[ ${status} -ne 0 ]]; then
    echo "Generated code is out of date. Run hack/update-codegen.sh." >&2
    exit 1
fi
echo "Generated code is up to date."
