#!/usr/bin/env bash
# Regenerates everything under pkg/generated and the zz_generated.* files in
# pkg/apis with k8s.io/code-generator's kube_codegen.sh, at the version this
# module requires. Nothing generated is ever edited by hand.
#
# UPDATE_API_KNOWN_VIOLATIONS=true also rewrites hack/api-rule-violations.list
# (openapi-gen always includes meta/v1, whose known violations would fail a
# check against /dev/null).
set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUTPUT_ROOT=${OUTPUT_ROOT:-${SCRIPT_ROOT}}
THIS_PKG=github.com/courier-dev/courier
if [[ -z "${CODEGEN_PKG:-}" ]]; then
    # `go list -m` names the module's directory but never downloads it: on a
    # machine whose module cache has never held code-generator it prints an
    # empty line. `go mod download` fetches the version go.mod requires.
    (cd "${SCRIPT_ROOT}" && go mod download k8s.io/code-generator)
    CODEGEN_PKG=$(cd "${SCRIPT_ROOT}" && go list -m -f '{{.Dir}}' k8s.io/code-generator)
fi
if [[ ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
    echo "update-codegen: no kube_codegen.sh in '${CODEGEN_PKG}'" >&2
    exit 1
fi

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

boilerplate="${SCRIPT_ROOT}/hack/boilerplate.go.txt"

kube::codegen::gen_helpers \
    --boilerplate "${boilerplate}" \
    "${OUTPUT_ROOT}/pkg/apis"

update_report=()
if [[ "${UPDATE_API_KNOWN_VIOLATIONS:-}" == "true" ]]; then
    update_report=(--update-report)
fi

# core/v1 is an extra input because downstreamcopies/payload answers with a
# v1 Secret or ConfigMap: the OpenAPI spec needs their definitions (only the
# definitions the API reaches are published).
kube::codegen::gen_openapi \
    --extra-pkgs k8s.io/api/core/v1 \
    --output-dir "${OUTPUT_ROOT}/pkg/generated/openapi" \
    --output-pkg "${THIS_PKG}/pkg/generated/openapi" \
    --report-filename "${OUTPUT_ROOT}/hack/api-rule-violations.list" \
    --output-model-name-file "zz_generated.model_name.go" \
    "${update_report[@]}" \
    --boilerplate "${boilerplate}" \
    "${OUTPUT_ROOT}/pkg/apis"

kube::codegen::gen_client \
    --with-watch \
    --output-dir "${OUTPUT_ROOT}/pkg/generated" \
    --output-pkg "${THIS_PKG}/pkg/generated" \
    --boilerplate "${boilerplate}" \
    "${OUTPUT_ROOT}/pkg/apis"
