#!/bin/sh
# Builds every tests/fuzz/fuzz_*.c as a libFuzzer binary (clang, ASan + UBSan) against a libq35.a
# built the usual way (make, so every SIMD file gets its own flags), and runs each for $1 seconds
# (default 60) on a copy of its committed seed corpus tests/fuzz/corpus/<name>/. Anything a fuzzer
# finds is written to build-fuzz/crash-*; commit it to the corpus as a regression input.
set -e
secs=${1:-60}
out=build-fuzz
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
make -s -j2 BUILD=$out CC=clang OPT=-O1 CFLAGS="-O1 -g $SAN -fsanitize=fuzzer-no-link -fno-omit-frame-pointer" $out/libq35.a
FUZZ_PKGS="libpcre2-8 libcjson libutf8proc libpng libjpeg libexif zlib libcurl libcrypto libmicrohttpd"
CFLAGS="-std=c11 -g -O1 $SAN -fsanitize=fuzzer -D_GNU_SOURCE -Iinclude -Isrc $(pkg-config --cflags $FUZZ_PKGS)"
LIBS="$(pkg-config --libs $FUZZ_PKGS) -lm -lpthread"
status=0
# The tokenizer target encodes with the real Qwen3 tokenizer.
if [ ! -f $out/qwen3-tokenizer.json ]; then
    gzip -dc tests/data/qwen3-tokenizer/tokenizer.json.gz > $out/qwen3-tokenizer.json.tmp && mv $out/qwen3-tokenizer.json.tmp $out/qwen3-tokenizer.json
fi
export Q35_FUZZ_TOKENIZER=$out/qwen3-tokenizer.json
export Q35_THREADS=1
for t in tests/fuzz/fuzz_*.c; do
    name=$(basename "$t" .c)
    clang $CFLAGS -o $out/$name $t $out/libq35.a $LIBS
    mkdir -p $out/corpus-$name
    [ -d tests/fuzz/corpus/$name ] && cp -r tests/fuzz/corpus/$name/. $out/corpus-$name/
    # Regression inputs: every committed seed must run clean first.
    if [ -d tests/fuzz/corpus/$name ]; then
        if ! ./$out/$name -runs=0 tests/fuzz/corpus/$name > $out/$name.seeds.log 2>&1; then
            echo "not ok fuzz_regress_$name"; tail -30 $out/$name.seeds.log; status=1; continue
        fi
    fi
    if ./$out/$name -max_total_time=$secs -max_len=65536 -rss_limit_mb=4096 -artifact_prefix=$out/crash-$name- \
        $out/corpus-$name > $out/$name.log 2>&1; then
        echo "ok $name ($(ls $out/corpus-$name | wc -l) corpus entries)"
    else
        echo "not ok $name"; tail -30 $out/$name.log; status=1
    fi
done
exit $status
