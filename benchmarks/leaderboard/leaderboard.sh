#!/usr/bin/env bash
# The leaderboard (SIMULATED): every registered agent (the pure learned agents, the search baselines `cheapest`
# and `local-search`, the planners `dp` and `optimal`, the other baselines) and the hybrid of every learned agent
# (`hybrid:NAME`), on ResNet / Inception / BERT (GRAPHS zoo) or on the dataset's test split (GRAPHS test: its nine
# graphs, of families never trained on), one `placement-gym compare` per (preset, objective, seed), written
# gzip-compressed to OUT_DIR/PRESET_OBJECTIVE_seedN.json.gz (zoo) or OUT_DIR/PRESET_OBJECTIVE_test_seedN.json.gz
# (test), with its CSV, log (.txt) and pictures (.png, .bars.png: not committed) beside it.
# `python benchmarks/leaderboard/leaderboard_table.py OUT_DIR` reads a case's files (both graph sets, every seed)
# together and turns them into tables (`python benchmarks/results_pages.py` writes those of
# benchmarks/results/leaderboard into docs/results/leaderboard.md); every budget below BUDGET is read from the same
# runs' best-so-far curves.
#
# Seeds run one after another, every case of a seed before the next seed: a run cut short leaves whole seeds.
# `replicate` (the whole model on every device) is the data-parallel row a pipeline placement must beat.
# `optimal` runs with seed 0 only: its solve does not depend on the seed (it is warm-started with the best
# placements of seed 0's other runs), and it is the run's most expensive row (a 60-second solve per model).
#
# Usage: bash benchmarks/leaderboard/leaderboard.sh [BUDGET] [OUT_DIR] [SEEDS] [CASES] [RAY] [AGENTS] [GRAPHS]
#   BUDGET  placements per run (default 1000)      SEEDS  seeds 0..SEEDS-1 per (agent, model) (default 3)
#   CASES   space-separated preset:objective pairs (default: every preset x both objectives)
#   RAY     a `--ray` address, e.g. local:2 (default: none, one process)
#   AGENTS  space-separated agent names (default: all of the above), e.g. "hsdag placeto rnn post go" for the
#           pure learned agents' long runs
#   GRAPHS  zoo (default: ResNet / Inception / BERT) or test (the dataset's test split)
# Existing results are kept (delete them to re-run); a .running marker keeps a second copy off a (case, seed). A
# compare that fails or is stopped leaves NAME.partial.json.gz (the runs it finished) and stops the script; the next
# start resumes that case (`compare --resume`: its finished runs are kept, not run again; delete the file to start
# the case afresh).
set -euo pipefail
budget="${1:-1000}"
out="${2:-benchmarks/results/leaderboard}"
seeds="${3:-3}"
read -r -a cases <<< "${4:-ai_pc:latency ai_pc:throughput edge:latency edge:throughput server:latency server:throughput paper:latency paper:throughput}"
ray=(); if [ -n "${5:-}" ]; then ray=(--ray "$5"); fi
learned=(hsdag placeto rnn post go ppo ppo-node doppler)
agents=(single-device openvino replicate random cheapest greedy critical-path topo metis dp local-search "${learned[@]}")
for a in "${learned[@]}"; do agents+=("hybrid:$a"); done
agents+=(optimal)
if [ -n "${6:-}" ]; then read -r -a agents <<< "$6"; fi
case "${7:-zoo}" in
  zoo) models=(resnet inception bert); tag="";;
  test) read -r -a models <<< "$(python -c 'from placement_gym.models.dataset import dataset_names as d
print(*d("test"))')"; tag="_test";;
  *) echo "leaderboard.sh: GRAPHS is zoo or test, got '$7'" >&2; exit 2;;
esac
mkdir -p "$out"
marker=""; trap 'rm -f "$marker"' EXIT  # the (case, seed) being run, when the script stops
for seed in $(seq 0 $((seeds - 1))); do
  run=(); for a in "${agents[@]}"; do if [ "$seed" = 0 ] || [ "$a" != optimal ]; then run+=("$a"); fi; done
  for case in "${cases[@]}"; do
    preset="${case%%:*}"; objective="${case##*:}"
    name="$out/${preset}_${objective}${tag}_seed${seed}"; file="$name.json.gz"; part="$name.partial"
    if [ -e "$file" ] || [ -e "$name.json" ] || [ -e "$file.running" ]; then echo "skipped $file"; continue; fi
    # the log of a resumed case goes on after the interrupted part's
    resume=(); if [ -e "$part.json.gz" ]; then resume=(--resume); echo "resuming $file from $part.json.gz"
    else : > "$name.txt"; fi
    marker="$file.running"; touch "$marker"
    # compare writes to NAME.partial.* and the files take their names only once it succeeded: an interrupted
    # compare (which writes the runs it finished) never passes for a finished case
    status=0
    placement-gym compare --models "${models[@]}" --agents "${run[@]}" --budget "$budget" --seed "$seed" \
      --profile "$preset" --objective "$objective" --unsupported repair --json "$part.json.gz" --no-progress \
      "${ray[@]}" "${resume[@]}" >> "$name.txt" 2>&1 || status=$?
    rm -f "$marker"
    if [ "$status" != 0 ]; then
      echo "compare exited $status for $file: see $name.txt; the runs it finished are in $part.json.gz" >&2
      exit "$status"
    fi
    for ext in json.gz csv png bars.png; do if [ -e "$part.$ext" ]; then mv "$part.$ext" "$name.$ext"; fi; done
    echo "wrote $file"
  done
done
