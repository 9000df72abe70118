#!/usr/bin/env python3
"""Reads q35 serve responses for tests/cli/serve.sh (standard library only).
  serve_check.py get FILE PATH...   print fields of a JSON body (PATH like choices.0.message.content),
                                    separated by spaces; strings print raw, other values as JSON;
                                    an absent field prints as "-" and the exit status is 1
  serve_check.py sse FILE WHAT...   check a server-sent-event stream (every event 'data: JSON', the
                                    last 'data: [DONE]', one id, the role first for chat) and print
                                    each WHAT, separated by spaces: text (the joined deltas), finish
                                    (the finish_reason), usage (prompt completion total of the usage
                                    chunk)
  serve_check.py before TEXT STOP   print TEXT up to the first STOP"""
import json
import sys


def field(obj, path):
    for key in path.split("."):
        if isinstance(obj, list):
            obj = obj[int(key)]
        else:
            obj = obj[key]
    return obj


def emit(v):
    sys.stdout.write(v if isinstance(v, str) else json.dumps(v))


def sse(path, whats):
    raw = open(path, encoding="utf-8").read()
    if not raw.endswith("\n\n"):
        sys.exit("%s: the stream does not end with a blank line" % path)
    events = raw[:-2].split("\n\n")
    if events[-1] != "data: [DONE]":
        sys.exit("%s: the last event is not data: [DONE]" % path)
    chunks = []
    for ev in events[:-1]:
        if not ev.startswith("data: "):
            sys.exit("%s: event without 'data: ': %r" % (path, ev[:80]))
        chunks.append(json.loads(ev[6:]))
    if not chunks or len({c.get("id") for c in chunks}) != 1:
        sys.exit("%s: expected chunks sharing one id" % path)
    text, finish, usage = "", None, None
    for i, c in enumerate(chunks):
        if "error" in c:
            sys.exit("%s: error event: %s" % (path, c["error"]))
        if c.get("usage"):
            usage = c["usage"]
        for ch in c["choices"]:
            if c["object"] == "chat.completion.chunk":
                d = ch["delta"]
                if i == 0 and d.get("role") != "assistant":
                    sys.exit("%s: the first chunk has no role" % path)
                text += d.get("content") or ""
            elif c["object"] == "text_completion":
                text += ch["text"]
            else:
                sys.exit("%s: unexpected object %r" % (path, c["object"]))
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
    out = []
    for what in whats:
        if what == "text":
            out.append(text)
        elif what == "finish":
            out.append(finish or "")
        elif what == "usage":
            if not usage:
                sys.exit("%s: no usage chunk" % path)
            out.append("%d %d %d" % (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]))
    emit(" ".join(out))


cmd = sys.argv[1]
if cmd == "get":
    try:
        doc = json.load(open(sys.argv[2], encoding="utf-8"))
    except ValueError as e:
        sys.exit("%s: not JSON (%s)" % (sys.argv[2], e))
    out, status = [], 0
    for path in sys.argv[3:]:
        try:
            v = field(doc, path)
            out.append(v if isinstance(v, str) else json.dumps(v))
        except (KeyError, IndexError, TypeError, ValueError):
            out.append("-")
            status = 1
    emit(" ".join(out))
    sys.exit(status)
elif cmd == "sse":
    sse(sys.argv[2], sys.argv[3:])
elif cmd == "before":
    t, s = sys.argv[2], sys.argv[3]
    emit(t[: t.find(s)] if s in t else t)
