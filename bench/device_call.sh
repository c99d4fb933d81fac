#!/usr/bin/env bash
# One call on a lent GPU machine (the `run` tool; ../shared/device/README.md): install the wheels carried in .whl/,
# run the given commands side by side from the repository's root, all stopped at the call's time limit, and send back
# what they wrote under records/ and bench/results/ (weights, checkpoints, locks and submitit's pickles left out) with
# one log a command.
#
#   bash bench/device_call.sh SECONDS 'COMMAND' ['COMMAND' ...]          # run: carry [".whl"], timeout_s > SECONDS
#
# A sweep fills the device itself: `python3 -m bench.sweeps ... --launcher local --local-parallelism N --device cuda
# --out records/<root>` runs N of its runs at once, each into its own run directory of the canonical root, so nothing
# is merged afterwards (bench/README.md section 14). E.g. BERT's regime comparison with its no-growth control:
#
#   bash bench/device_call.sh 540 \
#     'python3 -m bench.sweeps bert --scale regime --seeds 0 1 --launcher local --local-parallelism 12 --device cuda --out records/regime-gpu --prune' \
#     'python3 bench/experiments/small_continued.py --tasks bert_small_base:0,1 --scale regime --device cuda --runs records/regime-gpu-control --train-only'
#
# Then, here, from the repository's root: tar xzf <the call's files_at>/written.tgz. A run cut by the limit keeps its
# checkpoint on the device (not sent back): the same call again, on the still-warm machine, resumes it.
# Runs of one task come from one device: the GPU's float32 ends 0.01-0.04 nat from the CPU's (bench/README.md
# section 8), enough to move a target on a flat curve, so a root's records are not mixed across devices.
set -uo pipefail
usage="usage: bash bench/device_call.sh SECONDS 'COMMAND' ['COMMAND' ...]"
limit=${1:-}
[[ $limit =~ ^[1-9][0-9]*$ ]] || { echo "error: SECONDS must be a positive whole number, got '${limit}'; $usage" >&2; exit 2; }
shift
[ $# -gt 0 ] || { echo "error: no command to run; $usage" >&2; exit 2; }
[ -n "${OUT:-}" ] && [ -d "$OUT" ] || { echo "error: OUT must name an existing folder (the device machine sets it); $usage" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT/logs"
marker=$(mktemp); start=$(date +%s)
pids=()
for cmd in "$@"; do     # timeout signals the command's whole process group: a sweep's job processes stop with it
  i=$(( ${#pids[@]} + 1 ))
  printf '%s\n' "$cmd" > "$OUT/logs/$i.cmd"
  timeout --signal=TERM --kill-after=20 "$limit" bash -c "$cmd" > "$OUT/logs/$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"; rc=$?; i=$((i + 1))
  [ "$rc" -eq 0 ] || failed=1
  echo "command $i exited $rc$([ "$rc" -eq 124 ] && echo ' (stopped at the limit)'): $(cat "$OUT/logs/$i.cmd")"
done
echo "all commands ended after $(( $(date +%s) - start )) s"
# what the commands wrote, as paths from the root: records and results only, no weights or scratch state
find records bench/results -newer "$marker" -type f ! -name '*.pt' ! -name '*.safetensors' ! -name '*.bin' \
  ! -name '*.lock' ! -path '*/model/*' ! -path '*/.submitit/*' 2>/dev/null | sort > "$OUT/written.txt"
tar czf "$OUT/written.tgz" -T "$OUT/written.txt"
echo "$(wc -l < "$OUT/written.txt") files in written.tgz"
rm -f "$marker"
exit "$failed"
