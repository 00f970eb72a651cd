#!/usr/bin/env bash
# fuzz.sh PACKAGE TARGET FUZZTIME: run one fuzz target for a fixed budget.
#
# Go before 1.27 can fail a target with a bare "context deadline exceeded"
# when -fuzztime expires while a worker is still executing an input (the
# coordinator race of golang/go#75804, frequent on a loaded 2-core machine):
# no input failed and none was written. Such a run is retried once. Any
# other failure fails at once; a real finding writes its input under
# testdata/fuzz/TARGET, which the retry would run first and fail on again.
set -uo pipefail
pkg=$1 target=$2 budget=$3
GO=${GO:-go}
for attempt in 1 2; do
	log=$(mktemp)
	"$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime 5s "$pkg" 2>&1 | tee "$log"
	status=${PIPESTATUS[0]}
	if [[ $status -eq 0 ]]; then
		rm -f "$log"
		exit 0
	fi
	# The race's signature: the failure's one message line is the bare
	# deadline, and no failing input was written.
	if [[ $attempt -eq 1 ]] && grep -qx '    context deadline exceeded' "$log" &&
		[[ $(grep -c '^    ' "$log") -eq 1 ]] && ! grep -q 'Failing input written to' "$log"; then
		echo "fuzz.sh: $target: only the fuzzing coordinator's deadline race (golang/go#75804); running it again" >&2
		rm -f "$log"
		continue
	fi
	rm -f "$log"
	exit "$status"
done
