#!/usr/bin/env bash
# Issue 41's next step on a lent GPU, one device call: a mini pair trained longer (and its small model pretrained
# longer), so that the small model trained on stays short of scratch (REPRODUCE.md, cause 6; bench/README.md,
# section 13) while the small model still carries as many tokens as the large run (the regime check's other test):
#
#   bash bench/issue41_regime.sh 520 \
#     bert-6400:bert:bert_small_base:scratch,ligo,ligo_official,net2net,control:0,1:steps=6400,small_recipe.steps=6400
#
# Each job is NAME:SWEEP:TASK:RUNS:SEEDS[:SETTINGS]: the sweep's runs by label (a method's plain run is labelled by
# its name: ligo, scratch; variants: ligo-random, net2net-noise0.5), run as `bench.sweeps SWEEP --runs L --set K=V ...`
# with the comma-separated SETTINGS (recipe and small_recipe fields; none: the task's own), into records NAME/; and,
# for the method `control`, the no-growth control of those runs (`bench/small_continued.py --set ... --train-only`,
# compared with scratch afterwards, where the records are), into NAME-control/. Every (run, seed) is its own process, all
# at once on the one GPU (a mini step is host-bound; bench/README.md section 8), each into its own root (two sweeps
# into one --out wait for each other, bench/sweeps.py's sweep lock: on 2026-11-27 that made this script's first call
# run its sweeps one after the other), their complete runs merged at the end (bench/merge_runs.sh); the small model
# is pretrained once per seed (the others wait on its cache lock). All runs of a pair come from this one device: the
# GPU ends 0.01-0.04 nat from the CPU, so none is mixed with CPU records. Everything stops after the given seconds; a
# complete run is kept, an incomplete one is not brought back (a next call on the same warm machine resumes it).
# Records (no weights) go to $OUT/regime-runs.tgz, logs to $OUT/regime-logs.tgz; then, here:
#   tar xzf regime-runs.tgz -C records/
#   python bench/small_continued.py --tasks bert_small_base:0,1 --set steps=6400 --set small_recipe.steps=6400 \
#     --records records/bert-6400 --runs records/bert-6400-control --out bench/results/small_continued-bert-6400.json
# Needs the wheels of ../shared/device/README.md in .whl/ (run carry [".whl"]).
set -uo pipefail
limit=${1:?seconds}
shift
form="NAME:SWEEP:TASK:RUNS:SEEDS[:SETTINGS] (bert-6400:bert:bert_small_base:scratch,control:0,1:steps=6400)"
[ $# -gt 0 ] || { echo "error: no job; each is $form" >&2; exit 2; }
for job in "$@"; do      # refused before anything is installed or written
  IFS=: read -r name sweep task labels seeds settings <<< "$job"
  [[ $name =~ ^[A-Za-z0-9_.-]+$ && -n $sweep && -n $task && -n $labels && $seeds =~ ^[0-9,]+$ \
     && $settings =~ ^(([A-Za-z_.]+=[^,=:]+)(,[A-Za-z_.]+=[^,=:]+)*)?$ ]] || {
    echo "error: job '$job' is not $form" >&2; exit 2; }
done
OUT=${OUT:?set by the device machine}
# DEVICE / SCALE / WORK: a dry rehearsal elsewhere (DEVICE=cpu SCALE=tiny WORK=/tmp/rehearsal OUT=/tmp/out)
device=${DEVICE:-cuda}; scale=${SCALE:-mini}; work=${WORK:-/tmp/regime}
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; fi
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 GROWBENCH_OUT=$work/gbcache OMP_NUM_THREADS=1
mkdir -p "$work/records" "$work/logs"
start=$(date +%s)
left() { local s=$(( limit - ($(date +%s) - start) )); echo $(( s > 1 ? s : 1 )); }
for job in "$@"; do
  IFS=: read -r name sweep task labels seeds settings <<< "$job"
  sets=(); for kv in ${settings//,/ }; do sets+=(--set "$kv"); done
  for seed in ${seeds//,/ }; do
    for m in ${labels//,/ }; do
      log=$work/logs/$name-$m-s$seed.log
      if [ "$m" = control ]; then
        timeout "$(left)" python3 bench/small_continued.py --tasks "$task:$seed" --scale "$scale" --device "$device" \
          "${sets[@]}" --runs "$work/records/$name-control" --train-only > "$log" 2>&1 &
      else
        timeout "$(left)" python3 -m bench.sweeps "$sweep" --seeds "$seed" --runs "$m" \
          --out "$work/parts/$name/$m-s$seed" --device "$device" --scale "$scale" --prune "${sets[@]}" > "$log" 2>&1 &
      fi
    done
  done
done
wait
. "$(dirname "$0")/merge_runs.sh"
for job in "$@"; do     # the complete runs of the parts into one root a job
  IFS=: read -r name _ <<< "$job"
  merge_runs "$work/records/$name" "$work"/parts/"$name"/*
done
echo "all processes ended after $(( $(date +%s) - start )) s"
grep -h "finished\|control trained\|FAILED\|Error" "$work"/logs/*.log | sed 's/ in [0-9]* s//' | sort | uniq -c \
  | sort -rn | head -60
tar czf "$OUT/regime-runs.tgz" --exclude='*.pt' --exclude='*.safetensors' --exclude='*.bin' --exclude='model' \
  --exclude='.lock' -C "$work/records" .
tar czf "$OUT/regime-logs.tgz" -C "$work" logs
