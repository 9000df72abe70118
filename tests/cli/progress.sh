#!/bin/sh
# Progress bars: loading a model draws one on stderr when asked (Q35_PROGRESS=1 stands in for a
# terminal), and never when stderr is piped. Prints "ok NAME" / "not ok NAME".
Q35=${Q35_BIN:-build/q35}
W=${Q35_TEST_WORK:-build/testwork}/progress
M=tests/data/models/tiny-vl
mkdir -p "$W"
check() { name=$1; shift; if "$@"; then echo "ok $name"; else echo "not ok $name"; tail -3 "$W/err" | sed 's/^/    # /'; fi; }
Q35_PROGRESS=1 "$Q35" generate -m $M --prompt-ids 1,2,3 -n 2 --greedy --print-ids -q > "$W/out" 2> "$W/err"
check progress_load_bar sh -c "[ $? -eq 0 ] && grep -q 'loading \[#*\] 100%' '$W/err'"
Q35_PROGRESS=1 "$Q35" generate -m $M --prompt-ids 1,2,3 -n 2 --greedy --print-ids -q --weights q8 > "$W/out" 2> "$W/err"
check progress_convert_bar sh -c "[ $? -eq 0 ] && grep -q 'loading \[#*\] 100%' '$W/err'"
"$Q35" generate -m $M --prompt-ids 1,2,3 -n 2 --greedy --print-ids -q > "$W/out2" 2> "$W/err"
check progress_quiet_when_piped sh -c "[ $? -eq 0 ] && ! grep -q 'loading' '$W/err' && cmp -s '$W/out' '$W/out2'"
exit 0
