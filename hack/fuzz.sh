#!/usr/bin/env bash
# Runs every Go fuzz target of the repository (func Fuzz* in a _test.go file)
# for FUZZTIME each (default 10m), one after another, and prints one line
# per target. New failing inputs land in the package's testdata/fuzz/<Name>/
# (commit them with the fix); the run stops at the first failure.
#
#   FUZZTIME=30s hack/fuzz.sh          # shorter
#   FUZZ_PARALLEL=1 hack/fuzz.sh       # fuzz workers per target (default: GOMAXPROCS)
#   FUZZ_ONLY=FuzzUnique hack/fuzz.sh  # one target (a regular expression)
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-10m}
parallel=()
if [[ -n "${FUZZ_PARALLEL:-}" ]]; then parallel=(-parallel "$FUZZ_PARALLEL"); fi

# "<package dir> <FuzzName>" for every target, sorted.
targets=$(git ls-files --cached --others --exclude-standard '*_test.go' ':!:hack/tools/*' | xargs grep -H '^func Fuzz[A-Za-z0-9_]*(f \*testing.F)' |
	sed -E 's|^(.*)/[^/]+_test.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort)
if [[ -n "${FUZZ_ONLY:-}" ]]; then targets=$(grep -E " ${FUZZ_ONLY}\$" <<<"$targets" || true); fi
if [[ -z "$targets" ]]; then echo "fuzz: no targets" >&2; exit 1; fi

echo "fuzz: $(wc -l <<<"$targets") targets, ${FUZZTIME} each, $(go version | cut -d' ' -f3), $(nproc) cores"
while read -r dir name; do
	start=$(date +%s)
	log=$(mktemp)
	corpus="$dir/testdata/fuzz/$name"
	before=$( (ls "$corpus" 2>/dev/null || true) | wc -l)
	status=0
	go test "./$dir" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "${parallel[@]}" >"$log" 2>&1 || status=$?
	after=$( (ls "$corpus" 2>/dev/null || true) | wc -l)
	# The last progress line carries the totals.
	stats=$(grep -E '^fuzz: elapsed' "$log" | tail -1 | sed -E 's/^fuzz: //')
	if [[ $status -eq 0 ]]; then
		echo "PASS ./$dir $name ($(($(date +%s) - start))s: $stats)"
		rm -f "$log"
	elif [[ $after -eq $before ]] && grep -q '^    context deadline exceeded$' "$log"; then
		# Go 1.26's fuzz coordinator can report its own -fuzztime deadline
		# as a failure when a worker is slow to stop (go.dev/issue/75804,
		# fixed in Go 1.27); no failing input was written.
		echo "PASS ./$dir $name ($(($(date +%s) - start))s: $stats; ended by go.dev/issue/75804, no failing input)"
		rm -f "$log"
	else
		echo "FAIL ./$dir $name: output follows"
		cat "$log"
		rm -f "$log"
		exit 1
	fi
done <<<"$targets"
echo "fuzz: all targets passed"
