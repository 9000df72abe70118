#!/bin/sh
# q35 pull and q35 verify against tests/hub/fake_hub.py (a local stand-in for the Hugging Face Hub,
# Python standard library only) serving the committed tiny checkpoint: verified downloads, the
# manifest, resume, and each failure mode (tampered, truncated, missing file, unsafe path, 401).
# Prints "ok NAME" / "not ok NAME" lines for tests/run.sh.
Q35=${Q35_BIN:-build/q35}
W=${Q35_TEST_WORK:-build/testwork}/hub
FIX=tests/data/models/tiny-vl
rm -rf "$W"
mkdir -p "$W/fixture"
# The served repository: the tiny checkpoint plus a file q35 does not need (synthetic.json).
for f in config.json generation_config.json model.safetensors synthetic.json; do cp "$FIX/$f" "$W/fixture/$f"; done
python3 tests/hub/fake_hub.py --root "$W/fixture" --port-file "$W/port" --log "$W/log" --lifetime 90 &
server=$!
trap 'kill $server 2>/dev/null' EXIT INT TERM
i=0
while [ ! -f "$W/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if [ ! -f "$W/port" ]; then echo "not ok hub_server_start (tests/hub/fake_hub.py did not start)"; exit 1; fi
EP=http://127.0.0.1:$(cat "$W/port")
SIZE=$(wc -c < "$FIX/model.safetensors" | tr -d ' ')
SHA=$(sha256sum "$FIX/model.safetensors" | cut -d' ' -f1)

check() { # name, condition...
    name=$1; shift
    if "$@"; then echo "ok $name"; else echo "not ok $name"; sed 's/^/    # /' "$W/err" | tail -5; fi
}
same_files() { # dir: the needed files arrived byte for byte, the unneeded one did not
    cmp -s "$1/config.json" "$FIX/config.json" && cmp -s "$1/generation_config.json" "$FIX/generation_config.json" &&
        cmp -s "$1/model.safetensors" "$FIX/model.safetensors" && [ ! -e "$1/synthetic.json" ] && [ ! -e "$1/.q35-tmp" ]
}
pull() { # repo, dir, extra args...: runs q35 pull, stderr to $W/err; sets rc
    repo=$1; dir=$2; shift 2
    "$Q35" pull "$repo" --endpoint "$EP" --dir "$dir" "$@" > "$W/out" 2> "$W/err"
    rc=$?
}

# 1. A clean pull: files, manifest, verify.
pull test/tiny "$W/a"
check hub_pull_ok [ $rc -eq 0 ]
check hub_pull_files same_files "$W/a"
check hub_manifest_hash grep -q "\"sha256\":[[:space:]]*\"$SHA\"" "$W/a/q35-manifest.json"
check hub_manifest_model sh -c "grep -q '\"layers\":[[:space:]]*4' '$W/a/q35-manifest.json' && grep -q '\"revision\":[[:space:]]*\"0123456789abcdef0123456789abcdef01234567\"' '$W/a/q35-manifest.json'"
check hub_lfs_redirect grep -q "GET /cdn/test/tiny/model.safetensors range=- status=200 sent=$SIZE" "$W/log"
"$Q35" verify "$W/a" > "$W/out" 2> "$W/err"
check hub_verify_ok [ $? -eq 0 -a ! -s "$W/out" ]

# 2. Pulling again keeps verified files and downloads nothing.
: > "$W/log"
pull test/tiny "$W/a"
check hub_pull_up_to_date sh -c "[ $rc -eq 0 ] && [ \$(grep -c 'up to date' '$W/err') -eq 3 ] && ! grep -q resolve '$W/log'"

# 3. Damage found by verify: one line per problem, exit 1.
cp -r "$W/a" "$W/b"
printf 'X' | dd of="$W/b/model.safetensors" bs=1 seek=5000 conv=notrunc 2>/dev/null
printf '{}' > "$W/b/config.json"
rm "$W/b/generation_config.json"
"$Q35" verify "$W/b" > "$W/out" 2> "$W/err"
rc=$?
check hub_verify_fail [ $rc -eq 1 -a "$(wc -l < "$W/out")" -eq 3 ]
check hub_verify_hash grep -q "model.safetensors: SHA-256 mismatch: expected $SHA, got" "$W/out"
check hub_verify_size grep -q "config.json: size mismatch: expected" "$W/out"
check hub_verify_missing grep -q "generation_config.json: missing" "$W/out"
"$Q35" verify "$W/nonexistent" > "$W/out" 2> "$W/err"
check hub_verify_no_manifest [ $? -eq 1 -a -s "$W/err" ]

# 4. Tampered content: refused, nothing left behind.
pull test/tampered "$W/t"
check hub_tampered_fails [ $rc -ne 0 ]
check hub_tampered_message grep -q "model.safetensors: SHA-256 mismatch: expected $SHA, got" "$W/err"
check hub_tampered_no_file sh -c "[ ! -e '$W/t/model.safetensors' ] && [ ! -e '$W/t/.q35-tmp' ] && [ ! -e '$W/t/q35-manifest.json' ]"

# 5. A transfer cut short (every attempt): fails, keeps only the partial file...
pull test/truncated "$W/c" --retries 1
check hub_truncated_fails [ $rc -ne 0 ]
check hub_truncated_message grep -q "model.safetensors: transfer failed after .* of $SIZE bytes.*run again to resume" "$W/err"
check hub_truncated_no_file sh -c "[ ! -e '$W/c/model.safetensors' ] && [ -f '$W/c/.q35-tmp/model.safetensors.part' ]"
# ... which the next pull resumes: only the rest is fetched.
kept=$(wc -c < "$W/c/.q35-tmp/model.safetensors.part" | tr -d ' ')
: > "$W/log"
pull test/tiny "$W/c"
check hub_resume_after_truncation sh -c "[ $rc -eq 0 ] && [ $kept -gt 0 ] && grep -q 'range=bytes=$kept- status=206 sent=$((SIZE - kept))' '$W/log'"
check hub_resume_files same_files "$W/c"

# 6. A partial file from an earlier run: only the rest is fetched, and the result verifies.
mkdir -p "$W/r/.q35-tmp"
head -c 100000 "$FIX/model.safetensors" > "$W/r/.q35-tmp/model.safetensors.part"
: > "$W/log"
pull test/tiny "$W/r"
check hub_resume_ok [ $rc -eq 0 ]
check hub_resume_range grep -q "GET /cdn/test/tiny/model.safetensors range=bytes=100000- status=206 sent=$((SIZE - 100000))" "$W/log"
check hub_resume_reported grep -q "resumed at 100000" "$W/err"
check hub_resume_verifies sh -c "cmp -s '$W/r/model.safetensors' '$FIX/model.safetensors' && '$Q35' verify '$W/r' 2>/dev/null"

# 7. A server that ignores Range: the partial file is replaced by the whole answer.
mkdir -p "$W/n/.q35-tmp"
head -c 100000 "$FIX/model.safetensors" > "$W/n/.q35-tmp/model.safetensors.part"
: > "$W/log"
pull test/norange "$W/n"
check hub_norange_restarts sh -c "[ $rc -eq 0 ] && grep -q 'range=bytes=100000- status=200 sent=$SIZE' '$W/log' && cmp -s '$W/n/model.safetensors' '$FIX/model.safetensors'"

# 8. A listed file the server does not have.
pull test/missing "$W/m"
check hub_missing_fails [ $rc -ne 0 ]
check hub_missing_message grep -q "generation_config.json: HTTP 404" "$W/err"
check hub_missing_no_file sh -c "[ ! -e '$W/m/generation_config.json' ] && [ ! -e '$W/m/.q35-tmp' ] && [ ! -e '$W/m/q35-manifest.json' ]"

# 9. An unsafe path in the listing: nothing is written.
pull test/evil "$W/e/x"
check hub_unsafe_path sh -c "[ $rc -ne 0 ] && grep -q \"unsafe path '../evil.json'\" '$W/err' && [ ! -e '$W/e' ]"

# 10. Authorization: 401 without HF_TOKEN, fine with it.
pull test/private "$W/p"
check hub_private_needs_token sh -c "[ $rc -ne 0 ] && grep -q 'HTTP 401.*HF_TOKEN' '$W/err'"
HF_TOKEN=secret "$Q35" pull test/private --endpoint "$EP" --dir "$W/p" > "$W/out" 2> "$W/err"
check hub_private_with_token [ $? -eq 0 ]

# 11. Bad names never reach the network; HF_ENDPOINT is honoured; the progress bar draws when asked.
"$Q35" pull ../etc --endpoint "$EP" --dir "$W/x" > "$W/out" 2> "$W/err"
check hub_bad_repo_name sh -c "[ $? -eq 2 ] && [ ! -e '$W/x' ]"
"$Q35" pull test/tiny --dir "$W/x" --endpoint file:///etc > "$W/out" 2> "$W/err"
check hub_bad_endpoint sh -c "[ $? -eq 2 ] && [ ! -e '$W/x' ]"
HF_ENDPOINT=$EP Q35_PROGRESS=1 "$Q35" pull test/tiny --dir "$W/h" > "$W/out" 2> "$W/err"
check hub_env_endpoint_progress sh -c "[ $? -eq 0 ] && grep -q 'model.safetensors \[#' '$W/err'"
"$Q35" pull test/tiny --endpoint "$EP" --revision nosuchbranch --dir "$W/y" > "$W/out" 2> "$W/err"
check hub_bad_revision sh -c "[ $? -ne 0 ] && grep -q 'HTTP 404' '$W/err' && [ ! -e '$W/y' ]"

# 12. verify --write makes a manifest for a directory q35 did not download.
mkdir -p "$W/w"
cp "$FIX/config.json" "$FIX/model.safetensors" "$W/w/"
"$Q35" verify --write "$W/w" > "$W/out" 2> "$W/err" && "$Q35" verify "$W/w" > "$W/out" 2>> "$W/err"
check hub_verify_write [ $? -eq 0 -a "$(grep -c "\"path\"" "$W/w/q35-manifest.json")" -eq 2 ]
exit 0
