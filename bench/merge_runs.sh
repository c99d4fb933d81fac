# Sourced by the device scripts (bench/issue41_device.sh, bench/issue41_regime.sh): merge_runs DEST PART... copies
# the complete runs (<task>-<scale>/<label>-s<seed> holding summary.json) of each PART root into DEST, a whole
# directory at a time; a run DEST already holds complete is kept (the copies of small-sN are one cache entry's). An
# incomplete run is never copied: merged file by file into a complete one it would make a record of two runs, and
# without its checkpoint (not brought back) it cannot be resumed elsewhere anyway.
merge_runs() {
  local dest=$1 part summary run rel; shift
  for part in "$@"; do
    for summary in "$part"/*/*/summary.json; do
      [ -e "$summary" ] || continue
      run=${summary%/summary.json}; rel=${run#"$part"/}
      if [ ! -e "$dest/$rel/summary.json" ]; then
        rm -rf "${dest:?}/$rel"; mkdir -p "$dest/${rel%/*}"; cp -r "$run" "$dest/$rel"
      fi
    done
  done
}
