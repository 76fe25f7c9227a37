#!/bin/sh
# Runs each libFuzzer target of test/fuzz/ for SECONDS on a fresh copy of its
# committed seed corpus; fails on the first crash, leak, timeout or sanitizer
# finding (the reproducer is left in BUILD/artifacts/).
#   test/fuzz/run-fuzz.sh BUILD SECONDS TARGET...
# Extra libFuzzer flags: FUZZ_FLAGS (e.g. FUZZ_FLAGS=-runs=1000000).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
seconds=$2
shift 2
mkdir -p "$build/artifacts"
status=0
for t in "$@"; do
  work="$build/corpus/$t"
  rm -rf "$work"
  mkdir -p "$work"
  cp "$root/test/fuzz/corpus/$t/"* "$work/"
  log="$build/fuzz-$t.log"
  echo "fuzz-$t: ${seconds}s on $(ls "$work" | wc -l) seeds ($log)"
  # -timeout: one input taking 60 s is a hang (every seed runs in well under
  # 0.1 s; a busy 2-core machine once stalled one for 21 s); -rss_limit_mb:
  # a parser that allocates what a header claims, unchecked, is a finding.
  # shellcheck disable=SC2086
  if "$build/fuzz-$t" -max_total_time="$seconds" -timeout=60 \
      -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$t-" ${FUZZ_FLAGS:-} "$work" \
      >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
    echo "fuzz-$t: ok, ${runs:-?} inputs in ${secs:-?} s"
  else
    echo "fuzz-$t: FAILED; the report:" >&2
    grep -E -A30 'ERROR|runtime error|deadly signal|Test unit written' \
      "$log" | cut -c1-240 | head -60 >&2
    status=1
  fi
done
exit $status
