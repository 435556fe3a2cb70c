#!/usr/bin/env bash
# `make fuzz FUZZ_SECONDS=N [FUZZ_TARGETS="config tokenizer"]`: builds the
# libFuzzer targets (in the asan-ubsan preset's tree: clang, ASan + UBSan,
# coverage instrumentation; `make asan` builds them too) and runs each for N
# seconds from its committed seeds and regression inputs. `FUZZ_RUNS=N` (CI)
# instead runs N inputs per target from a fixed seed: the same inputs on every
# machine, so CI's verdict does not depend on how fast or how lucky it was;
# searching for new bugs is the timed campaign's job. New inputs go to
# build/fuzz/work/<target>/ (not committed), crashes to
# build/fuzz/artifacts/<target>/; exits 1 if any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
# A unit running longer than this is a hang (a crash). A long campaign on a
# loaded machine (`nice`) raises it: a starved process's unit can sit for
# seconds without hanging (fuzz/README.md).
timeout=${FUZZ_TIMEOUT:-10}
runs=${FUZZ_RUNS:-}
if [ -n "$runs" ]; then
  budget=(-runs="$runs" -seed=1) how="from seed 1"
else
  budget=(-max_total_time="$seconds") how="in $seconds s"
fi
read -r -a targets <<< "${FUZZ_TARGETS:-safetensors config container tokenizer trace usage}"

cmake --preset asan-ubsan >/dev/null
cmake --build --preset asan-ubsan --target "${targets[@]/#/fuzz_}"

status=0
for t in "${targets[@]}"; do
  work=build/fuzz/work/$t
  artifacts=build/fuzz/artifacts/$t
  log=build/fuzz/logs/$t.log
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  inputs=("$work" "fuzz/corpus/$t")
  [ -d "fuzz/regressions/$t" ] && inputs+=("fuzz/regressions/$t")
  rc=0
  build/asan-ubsan/bin/fuzz_"$t" "${budget[@]}" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 \
    "${dict[@]}" -artifact_prefix="$artifacts/" "${inputs[@]}" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "fuzz $t: FAILED after ${execs:-?} executions (exit $rc); input in $artifacts/, log $log:"
    grep -E "ERROR|fuzz invariant|SUMMARY|Test unit written" "$log" | head -20 || tail -30 "$log"
  else
    echo "fuzz $t: ${execs:-?} executions $how, no crash (corpus $(ls "$work" | wc -l) new inputs)"
  fi
done
exit $status
