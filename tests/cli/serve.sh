#!/bin/sh
# q35 serve end to end on the committed tiny checkpoint (tests/data/models/talker), on loopback
# ports the server picks itself: health and models, greedy chat and completions (non-streaming and
# streaming) against `q35 generate`, stop sequences, max_tokens, concurrent requests against the
# sequential answers, prefix reuse across the turns of a conversation (bitwise the answer without
# reuse), a client that disconnects mid-answer, every error status, the API key, the
# openai Python package (pinned, installed into a venv), the chat page in headless Chromium, and a
# clean exit on SIGTERM (the sanitizer run checks for leaks there).
BIN=${Q35_BIN:-build/q35}
DATA=${Q35_TEST_DATA:-tests/data}
WORK=${Q35_TEST_WORK:-build/testwork}/serve
VENV=${Q35_PYVENV:-build/pyvenv}
M=$DATA/models/talker
CHECK="python3 tests/cli/serve_check.py"
rm -rf "$WORK"
mkdir -p "$WORK"
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null; done' EXIT

t() { # name, command...: ok / not ok
    name=$1
    shift
    if "$@"; then echo "ok $name"; else echo "not ok $name"; fi
}
same() { # name, got, expected
    if [ "$2" = "$3" ]; then echo "ok $1"; else echo "not ok $1: got [$2], expected [$3]"; fi
}

# start_server LOG ARGS...: sets PID and URL (empty when it did not come up)
start_server() {
    log=$1
    shift
    "$BIN" serve --port 0 -t 2 "$@" > "$log" 2>&1 &
    PID=$!
    PIDS="$PIDS $PID"
    URL=
    i=0
    while [ $i -lt 300 ]; do
        port=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log" 2>/dev/null)
        if [ -n "$port" ]; then URL=http://127.0.0.1:$port; return 0; fi
        kill -0 $PID 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    echo "not ok serve_start: the server did not come up:"
    sed 's/^/    /' "$log"
    return 1
}

# post PATH BODY OUT [curl args...]: prints the HTTP status; the body goes to OUT
post() {
    path=$1 body=$2 out=$3
    shift 3
    curl -s -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' "$@" --data-binary "$body" "$URL$path"
}

# expect_error NAME STATUS PATH BODY [JSON-FIELD VALUE] [curl args...]
expect_error() {
    name=$1 status=$2 path=$3 body=$4
    shift 4
    f= v=
    if [ $# -ge 2 ] && [ "${1#-}" = "$1" ]; then f=$1 v=$2; shift 2; fi
    code=$(post "$path" "$body" "$WORK/err.json" "$@")
    # the error object has all four fields (param and code may be null); f, when given, equals v
    fields=$($CHECK get "$WORK/err.json" error.type error.param error.code ${f:+error.$f} error.message 2>/dev/null)
    set -- $fields
    if [ "$code" = "$status" ] && [ $# -ge 4 ] && [ "$1" != - ] && [ "$2" != - ] && [ "$3" != - ] &&
        { [ -z "$f" ] || [ "$4" = "$v" ]; }; then
        echo "ok $name ($code: $(echo "$fields" | cut -d' ' -f4- | cut -c1-70))"
    else
        echo "not ok $name: HTTP $code, expected $status with error.$f = $v; body: $(head -c 300 "$WORK/err.json")"
    fi
}

start_server "$WORK/server.log" -m "$M" --max-body 65536 --image-size 96x64 -v || exit 1

# ---- health and models
code=$(curl -s -o "$WORK/h.json" -w '%{http_code}' "$URL/health")
same serve_health "$code $($CHECK get "$WORK/h.json" status)" "200 ok"
code=$(curl -s -o "$WORK/m.json" -w '%{http_code}' "$URL/v1/models")
same serve_models "$code $($CHECK get "$WORK/m.json" data.0.id object)" "200 talker list"

# ---- greedy chat against q35 generate
Q1="Tell me a fortune"
"$BIN" generate -m "$M" -p "$Q1" --greedy -n 200 -q -t 2 > "$WORK/gen1.txt"
"$BIN" generate -m "$M" -p "$Q1" --greedy -n 200 -q -t 2 --print-ids > "$WORK/gen1.ids"
A1=$(cat "$WORK/gen1.txt")
n_ids=$(wc -w < "$WORK/gen1.ids")
t serve_reference_answer test -n "$A1" -a "$n_ids" -gt 3
code=$(post /v1/chat/completions "{\"model\":\"talker\",\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"max_tokens\":200}" "$WORK/c1.json")
same serve_chat_greedy "$code $($CHECK get "$WORK/c1.json" choices.0.message.content)" "200 $A1"
set -- $($CHECK get "$WORK/c1.json" choices.0.finish_reason usage.prompt_tokens usage.completion_tokens usage.total_tokens object)
fin=$1 pt=$2 ct=$3 tt=$4 obj=$5
# completion tokens: the ids generate printed, plus the end-of-answer token when it stopped
exp_ct=$n_ids
[ "$fin" = stop ] && exp_ct=$((n_ids + 1))
same serve_chat_usage "$fin $ct $((pt + ct)) $obj" "$fin $exp_ct $tt chat.completion"
t serve_chat_prompt_tokens [ "$pt" -gt 5 ]

code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"max_tokens\":200,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" "$WORK/s1.txt" -N)
same serve_chat_stream "$code $($CHECK sse "$WORK/s1.txt" text)" "200 $A1"
same serve_chat_stream_finish "$($CHECK sse "$WORK/s1.txt" finish usage)" "$fin $pt $ct $tt"

# content parts (text only) render like a string content
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"$Q1\"}]}],\"temperature\":0,\"max_tokens\":200}" "$WORK/c1p.json")
same serve_chat_parts "$code $($CHECK get "$WORK/c1p.json" choices.0.message.content)" "200 $A1"

# ---- an image (a PNG data URL) answers like q35 generate --image (talker: a random tiny vision tower)
IMG=$DATA/models/tiny-vision/cli_image.png
QI="What is in the picture?"
AI=$("$BIN" generate -m "$M" --image "$IMG" --image-size 96x64 -p "$QI" --greedy -n 12 -q -t 2)
IMGBODY="{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,$(base64 -w0 "$IMG")\"}},{\"type\":\"text\",\"text\":\"$QI\"}]}],\"temperature\":0,\"max_tokens\":12}"
t serve_image_reference test -n "$AI"
code=$(post /v1/chat/completions "$IMGBODY" "$WORK/img1.json")
same serve_image_greedy "$code $($CHECK get "$WORK/img1.json" choices.0.message.content)" "200 $AI"
# the same request again (the session's own exact point may be reused) gives the same answer
code=$(post /v1/chat/completions "$IMGBODY" "$WORK/img2.json")
same serve_image_again "$code $($CHECK get "$WORK/img2.json" choices.0.message.content)" "200 $AI"

# ---- max_tokens and stop sequences
"$BIN" generate -m "$M" -p "$Q1" --greedy -n 5 -q -t 2 > "$WORK/gen5.txt"
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"max_completion_tokens\":5}" "$WORK/c5.json")
same serve_max_tokens "$code $($CHECK get "$WORK/c5.json" choices.0.finish_reason usage.completion_tokens choices.0.message.content)" \
    "200 length 5 $(cat "$WORK/gen5.txt")"
STOP=$(python3 -c 'import sys; print(sys.argv[1][12:16])' "$A1")
EXP=$($CHECK before "$A1" "$STOP")
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"stop\":[\"zzzz\",\"$STOP\"]}" "$WORK/cs.json")
same serve_stop "$code $($CHECK get "$WORK/cs.json" choices.0.finish_reason) [$($CHECK get "$WORK/cs.json" choices.0.message.content)]" "200 stop [$EXP]"
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"stop\":\"$STOP\",\"stream\":true}" "$WORK/ss.txt" -N)
same serve_stop_stream "$code [$($CHECK sse "$WORK/ss.txt" finish text)]" "200 [stop $EXP]"

# ---- /v1/completions: the raw prompt, no template
Q2="The secret of life is"
A2=$("$BIN" generate -m "$M" --raw -p "$Q2" --greedy -n 24 -q -t 2)
code=$(post /v1/completions "{\"prompt\":\"$Q2\",\"temperature\":0,\"max_tokens\":24}" "$WORK/p1.json")
same serve_completions "$code $($CHECK get "$WORK/p1.json" object choices.0.text)" "200 text_completion $A2"
code=$(post /v1/completions "{\"prompt\":\"$Q2\",\"temperature\":0,\"max_tokens\":24,\"stream\":true}" "$WORK/p1s.txt" -N)
same serve_completions_stream "$code $($CHECK sse "$WORK/p1s.txt" text)" "200 $A2"

# ---- sampling is reproducible with a seed, and takes the penalties
body="{\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":1,\"top_p\":0.9,\"seed\":7,\"presence_penalty\":0.5,\"frequency_penalty\":0.5,\"max_tokens\":30}"
post /v1/chat/completions "$body" "$WORK/r1.json" > /dev/null
post /v1/chat/completions "$body" "$WORK/r2.json" > /dev/null
r1=$($CHECK get "$WORK/r1.json" choices.0.message.content)
same serve_seed "$($CHECK get "$WORK/r2.json" choices.0.message.content)" "$r1"
t serve_seed_nonempty [ -n "$r1" ]

# ---- concurrent requests give the sequential answers
i=1
for q in "Tell me a fortune" "What is love?" "Say something about computers" "Give me advice"; do
    post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$q\"}],\"temperature\":0,\"max_tokens\":60}" "$WORK/seq$i.json" > /dev/null
    i=$((i + 1))
done
i=1
cpids=
for q in "Tell me a fortune" "What is love?" "Say something about computers" "Give me advice"; do
    stream=false
    [ $((i % 2)) -eq 0 ] && stream=true
    post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$q\"}],\"temperature\":0,\"max_tokens\":60,\"stream\":$stream}" "$WORK/par$i.out" -N > /dev/null &
    cpids="$cpids $!"
    i=$((i + 1))
done
for p in $cpids; do wait $p; done
for i in 1 2 3 4; do
    want=$($CHECK get "$WORK/seq$i.json" choices.0.message.content)
    if [ $((i % 2)) -eq 0 ]; then got=$($CHECK sse "$WORK/par$i.out" text); else got=$($CHECK get "$WORK/par$i.out" choices.0.message.content); fi
    same serve_concurrent_$i "$got" "$want"
done

# ---- a client that goes away stops its answer; the next request is served
long="{\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"ignore_eos\":true,\"max_tokens\":4000"
curl -sN -H 'Content-Type: application/json' --data-binary "$long,\"stream\":true}" "$URL/v1/chat/completions" | head -c 1500 > "$WORK/cut.txt"
curl -s --max-time 0.3 -H 'Content-Type: application/json' --data-binary "$long}" "$URL/v1/chat/completions" > /dev/null
i=0
while [ $i -lt 100 ]; do
    [ "$(grep -c 'cancelled after' "$WORK/server.log")" -ge 2 ] && break
    sleep 0.1
    i=$((i + 1))
done
same serve_disconnect_cancels "$(grep -c 'cancelled after [0-9]* of at most 40[0-9][0-9] tokens' "$WORK/server.log")" 2
curl -s -o "$WORK/h2.json" "$URL/health"
same serve_disconnect_freed "$($CHECK get "$WORK/h2.json" active queued)" "0 0"
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"max_tokens\":200}" "$WORK/c1b.json")
same serve_after_disconnect "$code $($CHECK get "$WORK/c1b.json" choices.0.message.content)" "200 $A1"

# ---- prefix reuse: turn 2 of a conversation resumes from turn 1's checkpoint (a system message
# longer than the 128-token grid), with the answer a server without reuse gives (checked below)
SYS=$(python3 -c 'print("You are a fortune teller who speaks in riddles about cats, code and the sea. " * 12)')
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"system\",\"content\":\"$SYS\"},{\"role\":\"user\",\"content\":\"$Q1\"}],\"temperature\":0,\"max_tokens\":40}" "$WORK/t1.json")
set -- $($CHECK get "$WORK/t1.json" usage.prompt_tokens usage.prompt_tokens_details.cached_tokens)
T1_PT=$1 T1_CACHED=$2
T1=$($CHECK get "$WORK/t1.json" choices.0.message.content)
python3 -c 'import json, sys; print(json.dumps({"messages": [{"role": "system", "content": sys.argv[1]}, {"role": "user", "content": sys.argv[2]},
    {"role": "assistant", "content": sys.argv[3]}, {"role": "user", "content": "And another one?"}], "temperature": 0, "max_tokens": 40}))' \
    "$SYS" "$Q1" "$T1" > "$WORK/turn2.json"
code2=$(post /v1/chat/completions "@$WORK/turn2.json" "$WORK/t2.json")
set -- $($CHECK get "$WORK/t2.json" usage.prompt_tokens usage.prompt_tokens_details.cached_tokens)
T2_PT=$1 T2_CACHED=$2
T2=$($CHECK get "$WORK/t2.json" choices.0.message.content)
same serve_reuse_turn1 "$code $T1_CACHED" "200 0"
# cached: a multiple of the 128-token grid, more than zero, within turn 1's prompt
t serve_reuse_turn2 test "$code2" = 200 -a "$T1_PT" -gt 128 -a "$T2_CACHED" -ge 128 -a "$T2_CACHED" -le "$T1_PT" -a $((T2_CACHED % 128)) -eq 0
echo "# turn 1: $T1_PT prompt tokens, $T1_CACHED cached; turn 2: $T2_PT prompt tokens, $T2_CACHED cached"

# ---- prefix reuse with images: a long question after a picture is checkpointed past the picture;
# the same question with another picture resumes before it, and each answer is q35 generate's
IMG2=$WORK/other.png
python3 -c 'import struct, sys, zlib
w, h = 96, 64
raw = b"".join(b"\0" + b"".join(bytes(((x * 7 + y * 3) % 256, (x * y) % 256, (255 - x * 2) % 256)) for x in range(w)) for y in range(h))
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))' "$IMG2"
QL="$SYS What is in the picture?"
img_body() { python3 -c 'import base64, json, sys
url = "data:image/png;base64," + base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": sys.argv[2]}]}],
                  "temperature": 0, "max_tokens": 12}))' "$1" "$2" > "$3"; }
img_body "$IMG" "$QL" "$WORK/imgA.json"
img_body "$IMG2" "$QL" "$WORK/imgB.json"
AA=$("$BIN" generate -m "$M" --image "$IMG" --image-size 96x64 -p "$QL" --greedy -n 12 -q -t 2)
AB=$("$BIN" generate -m "$M" --image "$IMG2" --image-size 96x64 -p "$QL" --greedy -n 12 -q -t 2)
codeA=$(post /v1/chat/completions "@$WORK/imgA.json" "$WORK/iA.json")
codeB=$(post /v1/chat/completions "@$WORK/imgB.json" "$WORK/iB.json")
codeA2=$(post /v1/chat/completions "@$WORK/imgA.json" "$WORK/iA2.json")
same serve_image_reuse_first "$codeA $($CHECK get "$WORK/iA.json" usage.prompt_tokens_details.cached_tokens choices.0.message.content)" "200 0 $AA"
same serve_image_other_picture "$codeB $($CHECK get "$WORK/iB.json" usage.prompt_tokens_details.cached_tokens choices.0.message.content)" "200 0 $AB"
set -- $($CHECK get "$WORK/iA2.json" usage.prompt_tokens usage.prompt_tokens_details.cached_tokens)
t serve_image_reuse_again test "$codeA2" = 200 -a "$2" -ge 128 -a "$2" -lt "$1"
same serve_image_reuse_answer "$($CHECK get "$WORK/iA2.json" choices.0.message.content)" "$AA"
echo "# image prompts: $1 tokens, $2 reused on the repeat; answers [$AA] and [$AB]"

# ---- errors: the OpenAI error object and its status
MSG="\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
expect_error serve_err_json 400 /v1/chat/completions '{"messages": [' type invalid_request_error
expect_error serve_err_not_object 400 /v1/chat/completions '[1,2]'
expect_error serve_err_type_temperature 400 /v1/chat/completions "{$MSG,\"temperature\":\"hot\"}" param temperature
expect_error serve_err_type_stream 400 /v1/chat/completions "{$MSG,\"stream\":\"yes\"}" param stream
expect_error serve_err_type_max_tokens 400 /v1/chat/completions "{$MSG,\"max_tokens\":1.5}" param max_tokens
expect_error serve_err_type_stop 400 /v1/chat/completions "{$MSG,\"stop\":[1]}" param stop
expect_error serve_err_type_messages 400 /v1/chat/completions '{"messages":"hi"}' param messages
expect_error serve_err_type_content 400 /v1/chat/completions '{"messages":[{"role":"user","content":5}]}' param 'messages[0]'
expect_error serve_err_role 400 /v1/chat/completions '{"messages":[{"role":"wizard","content":"x"}]}' param 'messages[0]'
expect_error serve_err_missing_messages 400 /v1/chat/completions '{"model":"talker"}' param messages
expect_error serve_err_missing_prompt 400 /v1/completions '{"model":"talker"}' param prompt
expect_error serve_err_n 400 /v1/chat/completions "{$MSG,\"n\":2}" param n
python3 -c 'import json; print(json.dumps({"messages": [{"role": "user", "content": "word " * 5000}]}))' > "$WORK/long.json"
expect_error serve_err_too_long 400 /v1/chat/completions "@$WORK/long.json" code context_length_exceeded
python3 -c 'import json; print(json.dumps({"messages": [{"role": "user", "content": "x" * 100000}]}))' > "$WORK/big.json"
expect_error serve_err_body_limit 413 /v1/chat/completions "@$WORK/big.json" code request_too_large
img() { echo "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"what is this?\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"$1\"}}]}]}"; }
PNG=iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==
expect_error serve_err_image_base64 400 /v1/chat/completions "$(img 'data:image/png;base64,@@@@')" code invalid_image_url
expect_error serve_err_image_not_data 400 /v1/chat/completions "$(img 'https://example.com/cat.png')" code invalid_image_url
expect_error serve_err_image_not_image 400 /v1/chat/completions "$(img 'data:image/png;base64,aGVsbG8gd29ybGQ=')" code invalid_image
expect_error serve_err_image_truncated 400 /v1/chat/completions "$(img 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==')" code invalid_image
expect_error serve_err_route 404 /v1/nothing '{}' code not_found
code=$(curl -s -o "$WORK/err.json" -w '%{http_code}' "$URL/v1/chat/completions")
same serve_err_method "$code $($CHECK get "$WORK/err.json" error.code)" "405 method_not_allowed"
expect_error serve_err_method_post 405 /health '{}' code method_not_allowed
code=$(curl -s -o "$WORK/h3.json" -w '%{http_code}' "$URL/health")
same serve_alive_after_errors "$code $($CHECK get "$WORK/h3.json" status)" "200 ok"

# ---- the openai Python package
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import openai' 2>/dev/null; then
    python3 -m venv "$VENV" > "$WORK/venv.log" 2>&1 && "$VENV/bin/pip" install -q -r tests/cli/requirements-openai.txt >> "$WORK/venv.log" 2>&1 ||
        { echo "not ok serve_openai_install: see $WORK/venv.log"; tail -5 "$WORK/venv.log"; }
fi
printf '%s' "$A1" > "$WORK/a1.txt"
"$VENV/bin/python" tests/cli/serve_openai.py "$URL" talker "$Q1" "$WORK/a1.txt" || echo "not ok serve_openai (exit status $?)"

# ---- the chat page in headless Chromium
code=$(curl -s -o "$WORK/page.html" -w '%{http_code}' "$URL/")
same serve_page_served "$code $(grep -c 'fetch(./v1/chat/completions' "$WORK/page.html")" "200 2"
Q35_CHROME_PROFILE="$WORK/chrome" python3 tests/cli/serve_page.py "$URL/?q=Tell%20me%20a%20fortune&temperature=0" 30 > "$WORK/page.txt" 2> "$WORK/page.err"
same serve_page_reply "$(cat "$WORK/page.txt")" "$A1"

# ---- a second server: API key, a checkpoint without a vision tower
NOVIS=$WORK/novis
mkdir -p "$NOVIS"
for f in "$M"/*; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$NOVIS/"; done
rm "$NOVIS/config.json"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c.pop("vision_config"); json.dump(c, open(sys.argv[2], "w"))' "$M/config.json" "$NOVIS/config.json"
MAIN_URL=$URL MAIN_PID=$PID
if start_server "$WORK/server2.log" -m "$NOVIS" --api-key sekret --parallel 1 --no-reuse; then
    code=$(post /v1/chat/completions "@$WORK/turn2.json" "$WORK/t2n.json" -H 'Authorization: Bearer sekret')
    same serve_reuse_same_answer "$code $($CHECK get "$WORK/t2n.json" usage.prompt_tokens_details.cached_tokens usage.prompt_tokens) [$($CHECK get "$WORK/t2n.json" choices.0.message.content)]" \
        "200 0 $T2_PT [$T2]"
    # one slot: concurrent requests wait in the queue and still get their own answers
    i=1
    cpids=
    for q in "Tell me a fortune" "What is love?" "Say something about computers"; do
        post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$q\"}],\"temperature\":0,\"max_tokens\":60}" "$WORK/q$i.json" \
            -H 'Authorization: Bearer sekret' > /dev/null &
        cpids="$cpids $!"
        i=$((i + 1))
    done
    for p in $cpids; do wait $p; done
    for i in 1 2 3; do
        same serve_queued_$i "$($CHECK get "$WORK/q$i.json" choices.0.message.content)" "$($CHECK get "$WORK/seq$i.json" choices.0.message.content)"
    done
    expect_error serve_key_missing 401 /v1/chat/completions "{$MSG}" type authentication_error
    expect_error serve_key_wrong 401 /v1/chat/completions "{$MSG}" type authentication_error -H 'Authorization: Bearer nope'
    code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/models")
    same serve_key_models 401 "$code"
    code=$(post /v1/chat/completions "{$MSG,\"max_tokens\":3}" "$WORK/k.json" -H 'Authorization: Bearer sekret')
    same serve_key_right "$code $($CHECK get "$WORK/k.json" usage.completion_tokens choices.0.finish_reason)" "200 3 length"
    expect_error serve_err_no_vision 400 /v1/chat/completions "$(img "data:image/png;base64,$PNG")" code model_not_multimodal -H 'Authorization: Bearer sekret'
    kill -TERM $PID
    wait $PID
    same serve_sigterm_second $? 0
fi

# ---- SIGTERM: a clean exit (no leaks under the sanitizers)
kill -TERM $MAIN_PID
wait $MAIN_PID
rc=$?
same serve_sigterm $rc 0
[ $rc -eq 0 ] || tail -30 "$WORK/server.log"
