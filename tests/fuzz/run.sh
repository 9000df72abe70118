#!/bin/sh
# Builds every tests/fuzz/fuzz_*.c as a libFuzzer binary (clang, ASan + UBSan) and runs each for
# $1 seconds (default 60) on a copy of its committed seed corpus tests/fuzz/corpus/<name>/.
# Anything a fuzzer finds is written to build-fuzz/crash-*; commit it as a regression input.
set -e
secs=${1:-60}
out=build-fuzz
mkdir -p $out
CFLAGS="-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -D_GNU_SOURCE -Iinclude -Isrc $(pkg-config --cflags libpcre2-8 libcjson libutf8proc)"
LIBS="$(pkg-config --libs libpcre2-8 libcjson libutf8proc) -lm -lpthread"
lib_src=$(find src -name '*.c' -not -path 'src/cli/*' | sort)
status=0
# The tokenizer target encodes with the real Qwen3 tokenizer.
if [ ! -f $out/qwen3-tokenizer.json ]; then
    gzip -dc tests/data/qwen3-tokenizer/tokenizer.json.gz > $out/qwen3-tokenizer.json.tmp && mv $out/qwen3-tokenizer.json.tmp $out/qwen3-tokenizer.json
fi
export Q35_FUZZ_TOKENIZER=$out/qwen3-tokenizer.json
for t in tests/fuzz/fuzz_*.c; do
    name=$(basename "$t" .c)
    clang $CFLAGS -o $out/$name $t $lib_src $LIBS
    mkdir -p $out/corpus-$name
    [ -d tests/fuzz/corpus/$name ] && cp -r tests/fuzz/corpus/$name/. $out/corpus-$name/
    # Regression inputs: every committed seed must run clean first.
    if [ -d tests/fuzz/corpus/$name ]; then
        ./$out/$name -runs=0 tests/fuzz/corpus/$name >/dev/null 2>&1 || { echo "not ok fuzz_regress_$name"; status=1; continue; }
    fi
    if ./$out/$name -max_total_time=$secs -max_len=65536 -rss_limit_mb=4096 -artifact_prefix=$out/crash-$name- \
        $out/corpus-$name > $out/$name.log 2>&1; then
        echo "ok $name ($(grep -c . $out/$name.log) log lines, $(ls $out/corpus-$name | wc -l) corpus entries)"
    else
        echo "not ok $name"; tail -30 $out/$name.log; status=1
    fi
done
exit $status
