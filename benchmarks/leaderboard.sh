#!/usr/bin/env bash
# The README's leaderboard: every registered agent, 3 seeds, ResNet / Inception / BERT, on every preset with
# three or more devices, under both objectives, and `paper` under throughput (its latency table is Table 2) (SIMULATED). One `placement-gym compare` per (preset, objective);
# `python benchmarks/leaderboard_table.py` turns the JSON files into the README's tables.
# Usage: bash benchmarks/leaderboard.sh [BUDGET] [OUT_DIR] [reverse]
# Existing results are kept (delete them to re-run); a second copy started with "reverse" works through the
# cases from the other end, so two cores share the work (a .running marker keeps them off each other's case).
set -euo pipefail
budget="${1:-100}"
out="${2:-benchmarks/results/leaderboard}"
cases=(ai_pc:throughput ai_pc:latency edge:throughput edge:latency server:throughput server:latency paper:throughput)
if [ "${3:-}" = reverse ]; then
  reversed=(); for ((k=${#cases[@]}-1; k>=0; k--)); do reversed+=("${cases[k]}"); done; cases=("${reversed[@]}")
fi
mkdir -p "$out"
for case in "${cases[@]}"; do
  preset="${case%%:*}"; objective="${case##*:}"
  file="$out/${preset}_${objective}.json"
  if [ -e "$file" ] || [ -e "$file.running" ]; then echo "skipped $file"; continue; fi
  touch "$file.running"
  placement-gym compare --models resnet inception bert --budget "$budget" --seeds 3 --profile "$preset" \
    --objective "$objective" --unsupported repair --json "$file" --no-progress > "$out/${preset}_${objective}.txt" 2>&1
  rm -f "$file.running"
  echo "wrote $file"
done
