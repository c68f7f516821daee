#!/usr/bin/env bash
# The kvsim command: a sweep's points equal individual runs, bad input gives exit code 2 with
# file, line and key, and --help works on every subcommand.
set -euo pipefail
kvsim=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scenario=$src/scenarios/library/a2-llama70b-roce.yaml

"$kvsim" sweep "$scenario" --set hardware.scale_out.bandwidth=100Gb/s,400Gb/s --set cache.block_tokens=64,128 \
  -j 2 -o "$work/sweep" 2>/dev/null
test "$(tail -n +2 "$work/sweep/sweep.csv" | wc -l)" -eq 4
i=0
for bw in 100Gb/s 400Gb/s; do
  for bt in 64 128; do
    "$kvsim" run "$scenario" --set hardware.scale_out.bandwidth=$bw --set cache.block_tokens=$bt \
      --no-trace -q -o "$work/run-$i"
    cmp "$work/run-$i/result.json" "$work/sweep/point-$i/result.json"
    i=$((i + 1))
  done
done

cat > "$work/bad.yaml" <<'YAML'
question: bad
hardware:
  preset: atlas-a2
model:
  name: llama-3-70b
  tensor_parallel: 8
  dtype: bf17
YAML
set +e
out=$("$kvsim" run "$work/bad.yaml" -o "$work/bad" 2>&1)
rc=$?
set -e
test $rc -eq 2
echo "$out" | grep -q "bad.yaml:7: key 'model.dtype' must be one of"

# An output folder that cannot be written is refused before anything is simulated.
for sub in run sweep; do
  set +e
  out=$("$kvsim" $sub "$scenario" --set cache.block_tokens=64 -o /dev/null/out 2>&1)
  rc=$?
  set -e
  test $rc -eq 2
  echo "$out" | grep -q "cannot write to '/dev/null/out'"
done

# The report renders: valid PNG and SVG with real content, and an index.html that shows them.
"$kvsim" run "$scenario" -q -o "$work/report"
for plot in timeline link_utilization; do
  test "$(head -c 8 "$work/report/$plot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
  test "$(stat -c %s "$work/report/$plot.png")" -gt 20000
  grep -q "<svg" "$work/report/$plot.svg"
  test "$(grep -c "<path" "$work/report/$plot.svg")" -gt 50
  grep -q "$plot.svg" "$work/report/index.html"
done
grep -q "bytes verified</th><td>all" "$work/report/index.html"
test -f "$work/sweep/sweep.png" && grep -q "<svg" "$work/sweep/sweep.svg"

# A usage error (a sweep without --set) exits 2 as well.
set +e
"$kvsim" sweep "$scenario" -o "$work/usage" >/dev/null 2>&1
rc=$?
set -e
test $rc -eq 2

for sub in demo run sweep report; do "$kvsim" $sub --help >/dev/null; done

# kvsim silences SystemC's banner itself, in help and in a run that builds a kernel.
for args in "--help" "run $scenario --no-trace -q -o $work/quiet"; do
  out=$(env -u SYSTEMC_DISABLE_COPYRIGHT_MESSAGE "$kvsim" $args 2>&1)
  if [[ $out == *Copyright* ]]; then
    echo "kvsim $args printed SystemC's banner" >&2
    exit 1
  fi
done
# kvsim run --faults: exit 1 when a seed's fault goes unhandled, 0 when every one is, 2 for bad
# seeds or a scenario without a fault_plan:; the campaign's table, JSON and plot are written.
faults=$src/scenarios/serving/a2-1p1d-link-faults.yaml
set +e
"$kvsim" run "$faults" --faults 1-3 -q -o "$work/careless" >/dev/null 2>&1
rc=$?
set -e
test $rc -eq 1
grep -q "UNHANDLED" "$work/careless/fault_campaign.md"
"$kvsim" run "$faults" --faults 1-3 -q -o "$work/careful" --set serving.recovery.retries=20 \
  --set serving.recovery.relink=true
grep -q '"unhandled": 0' "$work/careful/fault_campaign.json"
test "$(head -c 8 "$work/careful/fault_campaign.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
grep -q "fault_campaign.svg" "$work/careful/index.html"
test -f "$work/careful/seed-2/result.json" && test -f "$work/careful/baseline/result.json"
# kvsim sweep --faults: a campaign per point; only the careful point handles every seed.
set +e
"$kvsim" sweep "$faults" --set serving.recovery.retries=0,20 --set serving.recovery.relink=true \
  --faults 1-3 --no-report -o "$work/fault-sweep" >/dev/null 2>&1
rc=$?
set -e
test $rc -eq 1
test "$(awk -F, 'NR > 1 {print $1 ":" ($4 > 0)}' "$work/fault-sweep/fault_sweep.csv" | tr '\n' ' ')" \
  = "0:1 20:0 "
test -f "$work/fault-sweep/point-1/fault_campaign.md"
for args in "$faults --faults 3-1" "$scenario --faults 1"; do
  set +e
  out=$("$kvsim" run $args -o "$work/bad-faults" 2>&1)
  rc=$?
  set -e
  test $rc -eq 2
  echo "$out" | grep -q -- "--faults"
done
echo "1 passed, 0 failed"
