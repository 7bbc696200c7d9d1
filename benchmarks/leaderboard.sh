#!/usr/bin/env bash
# The leaderboard (SIMULATED): every registered agent (the pure learned agents, the search baselines `cheapest`
# and `local-search`, the planners `dp` and `optimal`, the other baselines) and the hybrid of every learned agent
# (`hybrid:NAME`), on ResNet / Inception / BERT, one `placement-gym compare` per (preset, objective, seed), written
# to OUT_DIR/PRESET_OBJECTIVE_seedN.json. `python benchmarks/leaderboard_table.py OUT_DIR` reads a case's files
# together and turns them into tables (`python benchmarks/results_pages.py` writes those of
# benchmarks/results/leaderboard into docs/results/leaderboard.md); every budget below BUDGET is read from the same
# runs' best-so-far curves.
#
# Seeds run one after another, every case of a seed before the next seed: a run cut short leaves whole seeds.
# `optimal` runs with seed 0 only: its solve does not depend on the seed (it is warm-started with the best
# placements of seed 0's other runs), and it is the run's most expensive row (a 60-second solve per model).
#
# Usage: bash benchmarks/leaderboard.sh [BUDGET] [OUT_DIR] [SEEDS] [CASES] [RAY] [AGENTS]
#   BUDGET  placements per run (default 1000)      SEEDS  seeds 0..SEEDS-1 per (agent, model) (default 3)
#   CASES   space-separated preset:objective pairs (default: every preset x both objectives)
#   RAY     a `--ray` address, e.g. local:2 (default: none, one process)
#   AGENTS  space-separated agent names (default: all of the above), e.g. "hsdag placeto rnn post go" for the
#           pure learned agents' long runs
# Existing results are kept (delete them to re-run); a .running marker keeps a second copy off a (case, seed).
set -euo pipefail
budget="${1:-1000}"
out="${2:-benchmarks/results/leaderboard}"
seeds="${3:-3}"
read -r -a cases <<< "${4:-ai_pc:latency ai_pc:throughput edge:latency edge:throughput server:latency server:throughput paper:latency paper:throughput}"
ray=(); if [ -n "${5:-}" ]; then ray=(--ray "$5"); fi
learned=(hsdag placeto rnn post go ppo ppo-node)
agents=(single-device openvino random cheapest greedy topo metis dp local-search "${learned[@]}")
for a in "${learned[@]}"; do agents+=("hybrid:$a"); done
agents+=(optimal)
if [ -n "${6:-}" ]; then read -r -a agents <<< "$6"; fi
mkdir -p "$out"
for seed in $(seq 0 $((seeds - 1))); do
  run=(); for a in "${agents[@]}"; do if [ "$seed" = 0 ] || [ "$a" != optimal ]; then run+=("$a"); fi; done
  for case in "${cases[@]}"; do
    preset="${case%%:*}"; objective="${case##*:}"
    file="$out/${preset}_${objective}_seed${seed}.json"
    if [ -e "$file" ] || [ -e "$file.running" ]; then echo "skipped $file"; continue; fi
    touch "$file.running"
    placement-gym compare --models resnet inception bert --agents "${run[@]}" --budget "$budget" --seed "$seed" \
      --profile "$preset" --objective "$objective" --unsupported repair --json "$file" --no-progress "${ray[@]}" \
      > "${file%.json}.txt" 2>&1
    rm -f "$file.running"
    echo "wrote $file"
  done
done
