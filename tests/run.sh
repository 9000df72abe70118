#!/bin/sh
# Runs every test binary in $BUILD/tests and every script in tests/cli/, counts "ok" / "not ok"
# lines, and ends with "N passed, N failed". A binary that crashes or exits non-zero without
# reporting a failure counts as one failed test.
BUILD=${BUILD:-build}
export Q35_TEST_DATA=${Q35_TEST_DATA:-tests/data}
export Q35_TEST_WORK=${Q35_TEST_WORK:-$BUILD/testwork}
export Q35_BIN=${Q35_BIN:-$BUILD/q35}
mkdir -p "$Q35_TEST_WORK"

# Fixtures committed compressed are unpacked once per build directory.
if [ -f tests/data/qwen3-tokenizer/tokenizer.json.gz ] && [ ! -f "$Q35_TEST_WORK/qwen3-tokenizer/tokenizer.json" ]; then
    mkdir -p "$Q35_TEST_WORK/qwen3-tokenizer"
    gzip -dc tests/data/qwen3-tokenizer/tokenizer.json.gz > "$Q35_TEST_WORK/qwen3-tokenizer/tokenizer.json.tmp" &&
        mv "$Q35_TEST_WORK/qwen3-tokenizer/tokenizer.json.tmp" "$Q35_TEST_WORK/qwen3-tokenizer/tokenizer.json"
    cp tests/data/qwen3-tokenizer/tokenizer_config.json "$Q35_TEST_WORK/qwen3-tokenizer/" 2>/dev/null
fi

pass=0
fail=0
log=$Q35_TEST_WORK/last-run.log
: > "$log"
run_one() { # name, command...
    name=$1; shift
    out=$Q35_TEST_WORK/out.$$
    start=$(date +%s)
    "$@" > "$out" 2>&1
    rc=$?
    end=$(date +%s)
    p=$(grep -c '^ok ' "$out")
    f=$(grep -c '^not ok ' "$out")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "not ok $name (exit status $rc)" >> "$out"; fi
    pass=$((pass + p)); fail=$((fail + f))
    cat "$out" >> "$log"
    if [ "$f" -ne 0 ]; then
        echo "FAIL $name ($p passed, $f failed, $((end - start))s)"; sed 's/^/    /' "$out" | tail -40
    else
        echo "PASS $name ($p passed, $((end - start))s)"
    fi
    rm -f "$out"
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for s in tests/cli/*.sh; do
    [ -f "$s" ] || continue
    run_one "$(basename "$s")" sh "$s"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
