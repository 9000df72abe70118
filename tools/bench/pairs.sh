#!/bin/bash
# Interleaved rounds of llama-bench and q35 bench on the same GGUF files (docs/speed.md).
# usage: LLAMA_BENCH=path/to/llama-bench Q35=build/q35 tools/bench/pairs.sh ROUNDS FILE.gguf...
# Prints per round, file and thread count: llama.cpp prompt 512 / generation 64 (mean ± sd of 3),
# then q35's prompt, generation (medians of 3) and the bandwidth it measured.
set -u
L=${LLAMA_BENCH:?set LLAMA_BENCH to llama-bench}
Q=${Q35:-build/q35}
rounds=$1; shift
for round in $(seq "$rounds"); do
  for f in "$@"; do
    for t in 1 2; do
      l=$("$L" -m "$f" -p 512 -n 64 -t $t -r 3 -lm none 2>&1 | grep -E "pp512|tg64" | awk -F'|' '{printf "%s ", $9}')
      q=$("$Q" bench -m "$f" -p 512 -n 64 -t $t --reps 3 2>&1 | awk '/^prompt/{printf "%s ",$3} /^generate/{printf "%s ",$3} /^bandw/{printf "%s ",$2}')
      echo "$(date +%H:%M:%S) r$round $(basename "$f") t$t llama: $l q35: $q"
    done
  done
done
