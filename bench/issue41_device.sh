#!/usr/bin/env bash
# Issue 41's discriminating runs on a lent GPU, one device call each (bench/README.md, section 9):
#
#   bash bench/issue41_device.sh e1 540    # every bert_small_base run (sweeps bert, recipes = E1, fit_steps,
#                                          # orthogonal, small_briefly, ligo_init, official_start), seeds 0 and 1
#   bash bench/issue41_device.sh e2 540    # every llama_small_base run (sweeps llama, recipes_llama = E2), seeds 0, 1
#
# Why every run of the task and not only E1's: a saving compares a method with scratch's final value, and the GPU's
# float32 arithmetic ends 0.01-0.04 nat from the CPU's (bench/README section 8), enough to move a target on a flat
# curve; so one task's records come from one device (as the depth-only pair's do). The committed CPU records of the
# task are then replaced by these.
#
# Each (sweep group, method, seed) runs as its own process, all at once on the one GPU (a mini step is a few ms of
# GPU work and host-bound: ten processes share it well, bench/README section 8), in two phases so that no two
# processes ever run the same label (phase 1: the labels the main and the recipe sweeps share, by method; phase 2:
# the ablation sweeps, whose plain labels phase 1 finished, by sweep). Each process writes into its own root (two
# sweeps into one --out wait for each other, bench/sweeps.py's sweep lock, which would run them one after the other);
# phase 1's complete runs are merged (bench/merge_runs.sh), and each phase-2 process starts from a copy of them, so
# that it skips the plain labels phase 1 completed; the complete runs of all roots are merged into one at the end.
# Everything is stopped after the given seconds in all; a complete run is kept, and a next call on the same warm
# machine continues the rest. Records, without
# weights or checkpoints, go to $OUT/<e1|e2>-runs.tgz, logs to $OUT/<e1|e2>-logs.tgz; unpack with
#   tar xzf e1-runs.tgz -C /tmp && cp -r /tmp/e1/* records/mini/
# Needs the wheels of ../shared/device/README.md in .whl/ (run carry [".whl"]).
set -uo pipefail
which=${1:?e1 or e2}
limit=${2:-540}
OUT=${OUT:?set by the device machine}
# DEVICE / SCALE / WORK: a dry rehearsal elsewhere (DEVICE=cpu SCALE=tiny WORK=/tmp/rehearsal OUT=/tmp/out)
device=${DEVICE:-cuda}; scale=${SCALE:-mini}; work=${WORK:-/tmp}
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; fi
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 GROWBENCH_OUT=$work/gbcache OMP_NUM_THREADS=1
case $which in
  e1) phase1="bert recipes"; phase2="fit_steps orthogonal small_briefly ligo_init official_start"
      methods="scratch stackbert interpolation mslt net2net bert2bert ki ligo ligo_official" ;;
  e2) phase1="llama recipes_llama"; phase2=""
      methods="scratch stackbert interpolation mslt net2net bert2bert ki ligo ligo_official hypercloning g_stack lemon msg" ;;
  *) echo "error: unknown experiment '$which' (e1 or e2)" >&2; exit 2 ;;
esac
root=$work/$which; parts=$work/$which-parts
. "$(dirname "$0")/merge_runs.sh"
logs=$work/logs
mkdir -p "$root" "$parts" "$logs"
start=$(date +%s)
left() { local s=$(( limit - ($(date +%s) - start) )); echo $(( s > 1 ? s : 1 )); }
for seed in 0 1; do
  for m in $methods; do
    timeout "$(left)" python3 -m bench.sweeps $phase1 --seeds "$seed" --methods "$m" --out "$parts/1-$m-s$seed" \
      --device "$device" --scale "$scale" --prune > "$logs/$which-1-$m-s$seed.log" 2>&1 &
  done
done
wait
echo "phase 1 ended after $(( $(date +%s) - start )) s"
merge_runs "$root" "$parts"/1-*
for seed in 0 1; do
  for s in $phase2; do
    merge_runs "$parts/2-$s-s$seed" "$root"
    timeout "$(left)" python3 -m bench.sweeps "$s" --seeds "$seed" --out "$parts/2-$s-s$seed" --device "$device" \
      --scale "$scale" --prune > "$logs/$which-2-$s-s$seed.log" 2>&1 &
  done
done
wait
merge_runs "$root" "$parts"/2-*
echo "all processes ended after $(( $(date +%s) - start )) s"
grep -h "finished in\|FAILED" "$logs"/$which-*.log | sed 's/ in [0-9]* s//' | sort | uniq -c | sort -rn | head -80
tar czf "$OUT/$which-runs.tgz" --exclude='*.pt' --exclude='*.safetensors' --exclude='*.bin' --exclude='model' \
  -C "$work" "$which"
tar czf "$OUT/$which-logs.tgz" -C "$work" logs
