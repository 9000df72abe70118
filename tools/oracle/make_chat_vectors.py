#!/usr/bin/env python3
"""Render reference vectors for q35's C chat-template renderer (src/text/chat.c).

Uses transformers' own apply_chat_template(tokenize=False) with the real Qwen3.5 template text taken from
docs/qwen35-spec.md §6.2 (the full template, whose generation prompt defaults to thinking ON, and the same
text with the small-model tail, which defaults to thinking OFF). Writes:

  tests/data/chat/qwen3.5-chat_template.jinja        the full template (SHA-256 a4aee8af..., as in the spec)
  tests/data/chat/qwen3.5-small-chat_template.jinja  the same with the 0.8B/2B/4B generation-prompt tail
  tests/data/chat/vectors.json                       [{name, variant, messages_json, tools_json, opts,
                                                       expected | error, note?}]

messages_json / tools_json are JSON *texts* (so that 1.0 stays a float and 1E5 keeps its spelling for the C
side); the oracle renders json.loads() of the same text. Run with the pinned venv:

  /work/oracle-venv/bin/python tools/oracle/make_chat_vectors.py [--spec PATH] [--out tests/data/chat]

A differential run over random conversations (not committed):

  /work/oracle-venv/bin/python tools/oracle/make_chat_vectors.py --random 5000 --seed 7 --random-file /tmp/r.json
  Q35_CHAT_VECTORS=/tmp/r.json build/tests/test_chat
"""
import argparse
import copy
import hashlib
import json
import os
import re
import sys

import jinja2
import transformers
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_template_utils import render_jinja_template

FULL_SHA256 = "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"


def load_templates(spec_path):
    s = open(spec_path, encoding="utf-8").read()
    i = s.index("### 6.2 Chat template")
    blocks = re.findall(r"```jinja\n(.*?)```", s[i:], re.S)
    full = blocks[0].rstrip("\n")
    tail = blocks[1].rstrip("\n")
    if hashlib.sha256(full.encode()).hexdigest() != FULL_SHA256:
        sys.exit("the template in the spec does not have the expected SHA-256")
    k = full.index("{%- if add_generation_prompt %}")
    small = full[:k] + tail
    assert "enable_thinking is true" in small and "enable_thinking is false" not in small
    return full, small


# ----------------------------------------------------------------------------------------------- data
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather — in °C or °F. 天气查询",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "City, e.g. \"Paris\" / 'Zürich'"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 3},
        }, "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the web.\nReturns <b>results</b> & snippets\ttabbed \u0001 ctrl \u007f del \u2028 ls",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "filters": {"type": "object", "properties": {
                "site": {"type": ["string", "null"], "default": None},
                "score": {"type": "number", "minimum": 0.0, "maximum": 1.5, "default": 0.75},
                "safe": {"type": "boolean", "default": True},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            }},
            "limit": {"type": "integer", "default": 10},
        }, "required": ["query"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "noop", "description": "", "parameters": {}}},
]

SMALL_TOOLS = [{"type": "function", "function": {"name": "calc", "description": "Evaluate an expression",
                "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}]

# Raw JSON texts: the C side must see these spellings (exotic numbers, duplicate keys).
RAW_NUM_TOOLS = ('[{"type":"function","function":{"name":"nums","description":"numbers",'
                 '"parameters":{"a":1E5,"b":-0.0,"c":12345678901234567890,"d":1.5e-7,"e":0.1,"f":100,'
                 '"g":1e16,"h":123456789012345680000.0,"i":-0,"j":1.10,"k":0.0001,"l":0.00001,'
                 '"m":9007199254740993,"n":1e22,"o":5e-324,"p":1.7976931348623157e308,"q":2.5E+3,'
                 '"r":[1.0,2,3.25e0],"s":true,"t":false,"u":null,"v":"x","name":"dup-last-wins"}}}]')
RAW_NUM_MESSAGES = ('[{"role":"user","content":"compute"},{"role":"assistant","content":"",'
                    '"tool_calls":[{"type":"function","function":{"name":"nums","arguments":'
                    '{"a":1E5,"b":-0.0,"c":12345678901234567890,"d":1.5e-7,"e":0.1,"f":100,"g":1e16,'
                    '"h":1e400,"i":-0,"j":[1E5,-0.0,1e400,-1e400],"k":{"x":1.0,"y":{"z":[]},"w":{}},'
                    '"l":true,"m":false,"n":null,"o":"a \\"q\\" \\\\ \\n","p":[],"q":0.000123,'
                    '"r":123456.789e3,"a":"dup"}}}]},'
                    '{"role":"tool","content":"{\\"ok\\": true}"}]')


def u(content, **kw):
    return {"role": "user", "content": content, **kw}


def a(content, **kw):
    m = {"role": "assistant", "content": content}
    m.update(kw)
    return m


def s(content):
    return {"role": "system", "content": content}


def t(content):
    return {"role": "tool", "content": content}


def call(name, args, wrap=True):
    f = {"name": name, "arguments": args}
    return {"type": "function", "id": "call_" + name, "function": f} if wrap else f


IMG = {"type": "image", "image": "file:///tmp/cat.png"}
IMG_URL = {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}
IMG_TYPE = {"type": "image"}
VID = {"type": "video", "video": "file:///tmp/clip.mp4"}
VID_KEY = {"video": ["f1.jpg", "f2.jpg"]}


def txt(x):
    return {"type": "text", "text": x}


# Each case: (name, messages, tools, list of option sets). An option set: dict with keys variant
# ('full'|'small'), gen (bool), think (None|True|False), vid (bool).
def O(variant="small", gen=True, think=None, vid=False):
    return {"variant": variant, "gen": gen, "think": think, "vid": vid}


ALL_THINK = [O(v, True, th) for v in ("full", "small") for th in (None, True, False)]
BOTH = [O("full"), O("small")]

CASES = [
    ("single_user", [u("Hello")], None, ALL_THINK + [O("small", False), O("full", False)]),
    ("system_user", [s("You are a helpful assistant."), u("Who are you?")], None, BOTH),
    ("multi_turn", [s("Be brief."), u("Hi"), a("Hello! How can I help?"), u("What is 2+2?"), a("4"),
                    u("And 3+3?")], None, BOTH + [O("small", True, True)]),
    ("multi_turn_ends_with_assistant", [u("Hi"), a("Hello!")], None, [O("full", False), O("small", True)]),
    ("assistant_think_inline_history", [u("Q1"), a("<think>\nstep 1\nstep 2\n</think>\n\nA1"), u("Q2")], None,
     BOTH),
    ("assistant_think_inline_last", [u("Q1"), a("<think>\n  step 1\n</think>\n\n\nA1  ")], None,
     [O("full", False), O("small", True, False)]),
    ("assistant_think_no_open_tag", [u("Q"), a("just reasoning\n</think>\n\nanswer")], None, [O("small", False)]),
    ("assistant_think_nested_tags", [u("Q"), a("pre<think>b<think>\nc\n\n</think>d</think>\n\ne</think>\n\nf")],
     None, [O("small", False)]),
    ("reasoning_content_separate_last", [u("Q"), a("The answer.", reasoning_content="  I think.\n\n")], None,
     [O("small", False), O("full", True)]),
    ("reasoning_content_separate_history", [u("Q"), a("A", reasoning_content="hidden"), u("Q2")], None,
     [O("full")]),
    ("reasoning_content_and_inline_think", [u("Q"), a("<think>inline</think>\n\nA", reasoning_content="given")],
     None, [O("small", False)]),
    ("reasoning_content_empty_string", [u("Q"), a("<think>x</think>A", reasoning_content="")], None,
     [O("small", False)]),
    ("reasoning_alias_field", [u("Q"), a("A", reasoning="via reasoning"), u("Q2"), a("B", thinking="via thinking")],
     None, [O("small", False)]),
    ("reasoning_content_null", [u("Q"), a("<think>r</think>A", reasoning_content=None, thinking="t")], None,
     [O("small", False)]),
    ("tools_no_system", [u("Weather in Paris?")], TOOLS, BOTH + [O("full", True, False)]),
    ("tools_with_system", [s("  You are a weather bot.  \n"), u("Weather?")], TOOLS, [O("small")]),
    ("tools_with_empty_system", [s(" \n "), u("Hi")], SMALL_TOOLS, [O("small")]),
    ("tools_empty_list", [u("Hi")], [], [O("small")]),
    ("tool_call_object_args", [
        u("Weather in Paris and Zürich?"),
        a("", tool_calls=[call("get_weather", {"location": "Paris", "days": 2, "unit": "celsius"}),
                          call("get_weather", {"location": "Zürich", "detail": {"hourly": True, "hours": [6, 12.5]},
                                               "ratio": 0.5, "flag": False, "none": None, "big": 10 ** 20,
                                               "text": "multi\nline", "empty": {}, "list": []})]),
        t("{\"temp\": 21.5}"), t("{\"temp\": 18}"),
        a("Paris is 21.5°C, Zürich 18°C."), u("Thanks")], TOOLS, [O("small"), O("full")]),
    ("tool_call_with_content", [u("Weather?"), a("Let me check.", tool_calls=[call("get_weather", {"location": "Oslo"})]),
                                t("sunny")], TOOLS, [O("small"), O("full", True, True)]),
    ("tool_call_whitespace_content", [u("Weather?"), a("  \n", tool_calls=[call("calc", {"expr": "1+1"})]),
                                      t("2")], SMALL_TOOLS, [O("small")]),
    ("tool_call_null_content", [u("Weather?"), a(None, tool_calls=[call("calc", {"expr": "1+1"})]), t("2")],
     SMALL_TOOLS, [O("small")]),
    ("tool_call_flat_shape", [u("calc"), a("", tool_calls=[call("calc", {"expr": "2*3"}, wrap=False),
                                                           {"name": "noop"}]), t("6"), t("done")],
     SMALL_TOOLS, [O("small")]),
    ("tool_call_string_args", [u("calc"), a("ok", tool_calls=[call("calc", json.dumps({"expr": "2*3", "n": 1.0,
                                                                                           "deep": {"k": [1, 2.0]}})),
                                                               call("noop", "{}")]), t("6")],
     SMALL_TOOLS, [O("small")]),
    ("tool_call_think_and_calls", [u("calc"), a("<think>\nneed calc\n</think>\n\n", reasoning_content=None,
                                                 tool_calls=[call("calc", {"expr": "1"})]), t("1")],
     SMALL_TOOLS, [O("small"), O("full", True, True)]),
    ("multi_step_tool_flow", [
        s("sys"), u("Plan a trip"),
        a("<think>first</think>step 1", tool_calls=[call("search", {"query": "flights"})]),
        t("flights: 3"),
        a("", reasoning_content="second", tool_calls=[call("search", {"query": "hotels", "limit": 5})]),
        t("hotels: 2"), t("extra")], TOOLS, [O("small", True, True), O("full")]),
    ("user_tool_response_multi_step", [
        u("Find x"), a("<think>r1</think>calling", tool_calls=[call("calc", {"expr": "x"})]),
        u("<tool_response>\n42\n</tool_response>"), a("<think>r2</think>x is 42")],
     SMALL_TOOLS, [O("small", False), O("small", True)]),
    ("user_tool_response_then_real_query", [
        u("first"), a("<think>r1</think>A1"), u("  <tool_response>x</tool_response>  "),
        a("<think>r2</think>A2"), u("<tool_response>y</tool_response> and more")], None, [O("small")]),
    ("tool_first_message", [t("orphan result"), u("Hi")], None, [O("small")]),
    ("tool_then_user", [u("Q"), a("", tool_calls=[call("calc", {"expr": "1"})]), t("1"), u("Next")], SMALL_TOOLS,
     [O("small")]),
    ("image_parts", [u([IMG, txt("Describe this image.")])], None,
     [O("small"), O("small", True, None, True)]),
    ("image_kinds_and_counting", [
        s([txt("You see images.")]),
        u([IMG, IMG_URL, txt("Compare these."), IMG_TYPE]),
        a([txt("They differ.")]),
        u([VID, txt("And this video?"), VID_KEY, {"image_url": "https://example.com/b.png"}]),
        a("A video."), t([IMG, txt("tool image")]), u("last")], None,
     [O("small"), O("small", True, None, True), O("full", True, False, True)]),
    ("text_parts_extra_keys", [u([{"type": "text", "text": "  part one ", "cache_control": {"type": "ephemeral"}},
                                  {"text": "part two  "}])], None, [O("small")]),
    ("trim_whitespace", [s("\u3000\u00a0 sys \x0b\x0c"), u(" \t\n hello \u2028\u2029\u202f\u205f\x1c\x1d\x1e\x1f\x85"),
                         a("\u200bzero-width kept\ufeff"), u("\u1680\u2000\u200a x \u3000")], None,
     [O("small"), O("full")]),
    ("unicode", [u("日本語のテキスト 😀 — ümlaut, עברית, \U0001F9EA"), a("Ответ: да ✅"), u("ok 👍")],
     None, [O("small")]),
    ("empty_content", [u(""), a(""), u("x")], None, [O("small")]),
    ("raw_numbers_tools", RAW_NUM_MESSAGES, RAW_NUM_TOOLS, [O("small", False)]),
    # errors
    ("err_no_messages", [], None, [O("small")]),
    ("err_system_not_first", [u("Hi"), s("late system")], None, [O("small")]),
    ("err_no_user_query", [s("sys"), a("hello")], None, [O("small")]),
    ("err_only_tool_response_users", [u("<tool_response>a</tool_response>"), a("b")], None, [O("small")]),
    ("err_system_with_image", [s([IMG, txt("sys")]), u("Hi")], None, [O("small")]),
    ("err_system_with_video_tools", [s([VID]), u("Hi")], SMALL_TOOLS, [O("small")]),
    ("err_unknown_role", [u("Hi"), {"role": "developer", "content": "x"}], None, [O("small")]),
    ("err_unexpected_item", [u([txt("a"), {"type": "audio", "audio": "x.wav"}])], None, [O("small")]),
    ("err_unexpected_item_type_text_no_text", [u("ok"), a([{"type": "text"}])], None, [O("small")]),
]



# ------------------------------------------------------------------------------- random conversations
def random_cases(n, seed):
    """Random conversations for a differential run (--random N): roles, whitespace, think tags, wrapped tool
    responses, media parts, reasoning fields, tool calls with nested arguments, null fields, bad roles."""
    import random
    R = random.Random(seed)
    ws = [" ", "\n", "\t", "\u3000", "\u00a0", "\x0b", "\u2028", "\u200b", "\x85", ""]
    bits = ["hi", "x", "<think>", "</think>", "<tool_response>", "</tool_response>", "\n", "  ", "ü", "😀", "\"", "\\"]

    def rstr():
        return "".join(R.choice(bits + ws) for _ in range(R.randint(0, 6)))

    def rval(d=0):
        k = R.random()
        if d < 2 and k < 0.15:
            return [rval(d + 1) for _ in range(R.randint(0, 3))]
        if d < 2 and k < 0.3:
            return {R.choice(["a", "b", "c", "ü"]): rval(d + 1) for _ in range(R.randint(0, 3))}
        return R.choice([rstr(), R.randint(-10 ** 20, 10 ** 20), R.random() * 10 ** R.randint(-8, 20), True, False,
                         None, 0.5, -0.0, 1.0])

    def rpart():
        c = R.random()
        for lim, p in ((0.15, IMG), (0.2, IMG_URL), (0.25, IMG_TYPE), (0.3, VID), (0.33, VID_KEY),
                       (0.35, {"type": "audio"})):
            if c < lim:
                return p
        return txt(rstr())

    def rcontent(role):
        c = R.random()
        if c < 0.1:
            return None
        if c < 0.3 and role != "system":
            return [rpart() for _ in range(R.randint(0, 3))]
        if c < 0.35:
            return [txt(rstr())]
        if c < 0.45:
            return "<tool_response>" + rstr() + "</tool_response>"
        return rstr()

    def rmsg(i):
        role = R.choice(["user", "user", "assistant", "assistant", "tool", "system" if R.random() < 0.2 else "user",
                         "developer" if R.random() < 0.05 else "tool"])
        if i == 0 and R.random() < 0.4:
            role = "system"
        m = {"role": role, "content": rcontent(role)}
        if role == "assistant":
            if R.random() < 0.3:
                m["reasoning_content"] = R.choice([rstr(), None, 5])
            if R.random() < 0.1:
                m["reasoning"] = rstr()
            if R.random() < 0.3:
                calls = []
                for _ in range(R.randint(0, 3)):
                    args = {R.choice(["p", "q", "r", "é"]): rval() for _ in range(R.randint(0, 3))}
                    name = R.choice(["f", "get", "x_y"])
                    if R.random() < 0.5:
                        calls.append(call(name, args))
                    else:
                        c = {"name": name}
                        if R.random() < 0.8:
                            c["arguments"] = args
                        calls.append(c)
                m["tool_calls"] = calls
        return m

    out = []
    for k in range(n):
        msgs = [rmsg(i) for i in range(R.randint(1, 7))]
        out.append((f"random_{seed}_{k}", msgs, R.choice([None, [], SMALL_TOOLS, TOOLS]),
                    [O(R.choice(["full", "small"]), R.random() < 0.8, R.choice([None, True, False]), R.random() < 0.3)]))
    return out


def oracle_messages(msgs):
    """What transformers should see: string tool-call arguments parsed (our documented extension)."""
    msgs = copy.deepcopy(msgs)
    notes = []
    for m in msgs:
        for tc in m.get("tool_calls") or []:
            f = tc.get("function", tc)
            if isinstance(f.get("arguments"), str):
                f["arguments"] = json.loads(f["arguments"]) if f["arguments"].strip() else {}
                notes.append("tool-call arguments given as a JSON string; the oracle rendered json.loads() of it")
    return msgs, sorted(set(notes))


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap.add_argument("--spec", default=None)
    ap.add_argument("--out", default=os.path.join(root, "tests", "data", "chat"))
    ap.add_argument("--random", type=int, default=0, metavar="N",
                    help="instead: write N random conversations to --random-file (not committed; run the C side "
                         "with Q35_CHAT_VECTORS=FILE build/tests/test_chat)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--random-file", default="/tmp/q35-chat-random.json")
    args = ap.parse_args()
    spec = args.spec
    if spec is None:
        for c in (os.path.join(root, "docs", "qwen35-spec.md"), os.path.join(root, "..", "shared", "docs", "qwen35-spec.md"),
                  "/work/shared/docs/qwen35-spec.md"):
            if os.path.exists(c):
                spec = c
                break
    full, small = load_templates(spec)
    if not args.random:
        os.makedirs(args.out, exist_ok=True)
        for fn, txt_ in (("qwen3.5-chat_template.jinja", full), ("qwen3.5-small-chat_template.jinja", small)):
            with open(os.path.join(args.out, fn), "w", encoding="utf-8") as f:
                f.write(txt_)
    templates = {"full": full, "small": small}

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>")))
    vectors = []
    cases = random_cases(args.random, args.seed) if args.random else CASES
    for name, msgs, tools, optsets in cases:
        if isinstance(msgs, str):
            msgs_json, py_msgs, notes = msgs, json.loads(msgs), []
        else:
            msgs_json = json.dumps(msgs, ensure_ascii=False)
            py_msgs, notes = oracle_messages(msgs)
        if isinstance(tools, str):
            tools_json, py_tools = tools, json.loads(tools)
        else:
            tools_json = None if tools is None else json.dumps(tools, ensure_ascii=False)
            py_tools = tools
        for o in optsets:
            kw = {}
            if o["think"] is not None:
                kw["enable_thinking"] = o["think"]
            if o["vid"]:
                kw["add_vision_id"] = True
            v = {"name": name, "variant": o["variant"], "messages_json": msgs_json, "tools_json": tools_json,
                 "opts": {"add_generation_prompt": o["gen"], "enable_thinking": o["think"], "add_vision_id": o["vid"]}}
            if notes:
                v["note"] = "; ".join(notes)
            try:
                if not py_msgs:
                    # apply_chat_template refuses an empty conversation before the template runs
                    # ("Cannot apply chat template to an empty conversation"); record the template's own message.
                    out, _ = render_jinja_template(conversations=[py_msgs], tools=py_tools,
                                                   chat_template=templates[o["variant"]],
                                                   add_generation_prompt=o["gen"], **kw)
                    out = out[0]
                    v["note"] = "rendered with render_jinja_template: apply_chat_template rejects [] first"
                else:
                    out = tok.apply_chat_template(py_msgs, tools=py_tools, chat_template=templates[o["variant"]],
                                                  add_generation_prompt=o["gen"], tokenize=False, **kw)
                v["expected"] = out
            except jinja2.exceptions.TemplateError as e:
                v["error"] = str(e)
            except (TypeError, ValueError) as e:  # not a template refusal: q35 reports these as FORMAT errors
                if not args.random:
                    raise
                continue
            if not args.random and name.startswith("err_") != ("error" in v):
                sys.exit(f"{name}: unexpected outcome {v.get('error') or 'rendered'}")
            vectors.append(v)
    meta = {"generator": "tools/oracle/make_chat_vectors.py", "transformers": transformers.__version__,
            "jinja2": jinja2.__version__, "template_sha256": FULL_SHA256}
    path = args.random_file if args.random else os.path.join(args.out, "vectors.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "vectors": vectors}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(vectors)} vectors ({len(cases)} conversations) -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
