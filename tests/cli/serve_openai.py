#!/usr/bin/env python3
"""q35 serve through the official openai Python package (pinned in requirements-openai.txt):
a non-streaming and a streaming greedy chat completion must both return EXPECTED.
usage: serve_openai.py BASE_URL MODEL PROMPT EXPECTED_FILE"""
import sys

import openai

base, model, prompt, expected_file = sys.argv[1:5]
expected = open(expected_file, encoding="utf-8").read()
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)
msgs = [{"role": "user", "content": prompt}]
r = client.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=200)
got = r.choices[0].message.content
ok = True
if got.rstrip("\n") != expected.rstrip("\n"):
    print("not ok serve_openai_chat: got %r, expected %r" % (got, expected))
    ok = False
elif r.usage.total_tokens != r.usage.prompt_tokens + r.usage.completion_tokens or r.choices[0].finish_reason not in ("stop", "length"):
    print("not ok serve_openai_chat: usage or finish_reason wrong: %r %r" % (r.usage, r.choices[0].finish_reason))
    ok = False
else:
    print("ok serve_openai_chat")
parts, finish = [], None
for chunk in client.chat.completions.create(model=model, messages=msgs, temperature=0, max_tokens=200, stream=True):
    for c in chunk.choices:
        parts.append(c.delta.content or "")
        finish = c.finish_reason or finish
streamed = "".join(parts)
if streamed.rstrip("\n") != expected.rstrip("\n") or finish != r.choices[0].finish_reason:
    print("not ok serve_openai_stream: got %r (%s), expected %r" % (streamed, finish, expected))
    ok = False
else:
    print("ok serve_openai_stream")
try:
    client.chat.completions.create(model=model, messages=msgs, n=2)
    print("not ok serve_openai_error: n=2 was accepted")
    ok = False
except openai.BadRequestError as e:
    print("ok serve_openai_error (%s)" % e.body.get("message", "")[:60] if isinstance(e.body, dict) else "ok serve_openai_error")
sys.exit(0 if ok else 1)
