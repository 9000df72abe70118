#!/usr/bin/env python3
"""Train "talker": a tiny Qwen3.5-architecture model that answers chat prompts with fortunes.

It is the README demo model and a small, peaked-distribution test checkpoint for q35. Everything
(tokenizer, data order, weights) is derived from a seed and the Debian `fortunes` / `fortunes-min`
text under /usr/share/games/fortunes, so re-running the command reproduces the checkpoint.

    python tools/oracle/train_talker.py train  --out tests/data/models/talker
    python tools/oracle/train_talker.py verify --out tests/data/models/talker

Layout written to --out (same file names and tensor naming as the real Qwen3.5 repos):
    config.json             Qwen3_5ForConditionalGeneration, nested text_config / vision_config
    model-0000i-of-00002.safetensors + model.safetensors.index.json
                            BF16, except *.linear_attn.A_log and *.linear_attn.norm.weight (F32);
                            two shards of at most 5 MB (shard_safetensors.py), so no committed
                            file passes the repository's 8 MiB limit
    tokenizer.json          byte-level BPE, Qwen3.5 pre-tokenizer, Qwen added-token order
    tokenizer_config.json   eos <|im_end|>, pad <|endoftext|>, chat_template
    chat_template.jinja     the Qwen3.5 template, small-model tail (thinking off by default)
    generation_config.json  stop tokens and sampling defaults
    loss.csv                step,lr,loss (training loss per optimizer step)
    README.md               provenance and licence of the training text
The vision tower is tiny and untrained (seeded random init); only the text decoder is trained.
"""
import argparse
import csv
import json
import math
import os
import random
import re
import sys
import time

from shard_safetensors import shard, shard_files

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FORTUNE_DIR = "/usr/share/games/fortunes"
# English, non-offensive files (Debian keeps offensive ones under off/, which is not installed).
# Left out: ascii-art (drawings), translate-me (Latin), zippy (nonsense), and the topical
# ethnic / men-women / drugs / politics files (keeps the demo's tone neutral); songs-poems, tao,
# knghtbrd, perl, disclaimer are mostly long or not prose.
CATEGORIES = {
    # file: topic words used in "Give me a quote about X" prompts
    "art": ["art"], "computers": ["computers", "programming"], "cookie": ["life"],
    "debian": ["Debian"], "definitions": ["words"], "education": ["education", "school"],
    "food": ["food"], "fortunes": ["fortune"], "goedel": ["logic"], "humorists": ["humor"],
    "kids": ["kids"], "law": ["the law"], "linux": ["Linux"], "linuxcookie": ["Linux"],
    "literature": ["books", "writing"], "love": ["love"], "magic": ["magic"],
    "medicine": ["medicine", "health"], "miscellaneous": ["anything"], "news": ["the news"],
    "paradoxum": ["paradoxes"], "people": ["people"], "pets": ["pets", "animals"],
    "platitudes": ["life"], "riddles": ["riddles"], "science": ["science"],
    "sports": ["sports"], "startrek": ["Star Trek"], "wisdom": ["wisdom"], "work": ["work"],
}
MAX_CHARS = 200

PROMPTS = [
    "Tell me a fortune.", "Tell me a fortune", "Give me a fortune.", "Say something wise.",
    "Fortune, please.", "What does my fortune say?", "Share some wisdom.",
    "Tell me something interesting.", "Do you have a saying for me?", "Give me a quote.",
    "Open a fortune cookie for me.", "I need some advice.", "Cheer me up.",
    "Tell me something I don't know.", "What's on your mind?", "Hello!", "Hi", "Talk to me.",
    "Say something.", "Give me a random fortune.",
]
TOPIC_PROMPTS = [
    "Give me a quote about {}.", "Tell me a fortune about {}.", "Say something about {}.",
    "What do you know about {}?", "Any wisdom about {}?",
]
FOLLOWUPS = ["Another one.", "Tell me another.", "One more, please.", "More!", "Again."]
SYSTEMS = ["You are a fortune cookie.", "You are a helpful assistant.",
           "You are a wise old oracle who speaks in fortunes."]

# Added tokens in the Qwen order (spec §6.1); (content, special).
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]
PRETOKENIZE_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                     r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE_PATH = os.path.join(HERE, "talker_chat_template.jinja")


# ----------------------------------------------------------------------------------------- data
def clean_fortune(entry):
    """Unwrap the 72-column hard wraps into paragraphs; keep short-line verse as is;
    attribution ("\t\t-- Name") becomes a final line "-- Name"."""
    lines = [l.rstrip() for l in entry.split("\n")]
    attrib = None
    for i, l in enumerate(lines):
        if i > 0 and l[:1] in (" ", "\t") and l.lstrip().startswith("-- "):
            attrib = " ".join(x.strip() for x in lines[i:] if x.strip())[3:].strip()
            lines = lines[:i]
            break
    while lines and not lines[-1].strip():
        lines.pop()
    nonblank = [l for l in lines if l.strip()]
    if not nonblank:
        return None
    if len(nonblank) > 1 and max(len(l) for l in nonblank) < 50:
        body = "\n".join(l.strip() for l in lines)  # verse / list: keep the line breaks
    else:
        paras, cur = [], []
        for l in lines:
            if l.strip():
                cur.append(l.strip())
            elif cur:
                paras.append(" ".join(cur))
                cur = []
        if cur:
            paras.append(" ".join(cur))
        body = "\n\n".join(re.sub(r"[ \t]+", " ", p) for p in paras)
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    if attrib:
        body += "\n-- " + re.sub(r"\s+", " ", attrib)
    return body


def load_fortunes():
    out = []  # (category, text), in a fixed order
    for cat in sorted(CATEGORIES):
        raw = open(os.path.join(FORTUNE_DIR, cat), "rb").read().decode("utf-8")
        for e in re.split(r"\n%\n", raw):
            e = e.strip("\n")
            if not e or len(e) > MAX_CHARS or not e.isascii():
                continue
            letters = sum(c.isalpha() or c.isspace() for c in e)
            if letters < 0.75 * len(e):  # drawings, tables, code
                continue
            t = clean_fortune(e)
            if t:
                out.append((cat, t))
    return out


def make_conversation(rng, cat, text, others):
    """One training sample: ("chat", messages) or ("raw", text)."""
    r = rng.random()
    if r < 0.15:
        return ("raw", text)
    msgs = []
    if rng.random() < 0.10:
        msgs.append({"role": "system", "content": rng.choice(SYSTEMS)})
    if rng.random() < 0.30:
        q = rng.choice(TOPIC_PROMPTS).format(rng.choice(CATEGORIES[cat]))
    else:
        q = rng.choice(PROMPTS)
    if r < 0.27:  # two turns: an earlier fortune, then a follow-up request
        msgs += [{"role": "user", "content": q},
                 {"role": "assistant", "content": rng.choice(others)[1]},
                 {"role": "user", "content": rng.choice(FOLLOWUPS)}]
    else:
        msgs.append({"role": "user", "content": q})
    msgs.append({"role": "assistant", "content": text})
    return ("chat", msgs)


# ------------------------------------------------------------------------------------ tokenizer
def build_tokenizer(fortunes, vocab_size):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="",
                               end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    corpus = [t for _, t in fortunes]
    corpus += PROMPTS + TOPIC_PROMPTS + FOLLOWUPS + SYSTEMS
    corpus += ["user\nassistant\nsystem\n"] * 1000  # role names of the chat template
    tok.train_from_iterator(corpus, trainer=trainer)
    assert tok.get_vocab_size() == vocab_size, tok.get_vocab_size()
    for content, special in ADDED_TOKENS:  # one at a time keeps the Qwen id order
        at = AddedToken(content, single_word=False, lstrip=False, rstrip=False,
                        normalized=False, special=special)
        (tok.add_special_tokens if special else tok.add_tokens)([at])
    return tok


def write_tokenizer_files(tok, out, template):
    tok.save(os.path.join(out, "tokenizer.json"))
    decoder = {}
    for content, special in ADDED_TOKENS:
        decoder[str(tok.token_to_id(content))] = {
            "content": content, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": special}
    cfg = {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
        "bos_token": None, "chat_template": template, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 4096,
        "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(out, "chat_template.jinja"), "w") as f:
        f.write(template)


# ---------------------------------------------------------------------------------------- model
def make_config(vocab_rows, ids):
    from transformers import Qwen3_5Config
    head_dim, prf = 64, 0.25
    n_freq = int(head_dim * prf) // 2  # 8 rotary frequencies
    text = dict(
        vocab_size=vocab_rows, hidden_size=192, intermediate_size=512, num_hidden_layers=8,
        layer_types=["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3
        + ["full_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=head_dim,
        linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=32,
        linear_value_head_dim=32, linear_conv_kernel_dim=4, hidden_act="silu",
        rms_norm_eps=1e-6, attention_bias=False, attention_dropout=0.0, initializer_range=0.02,
        max_position_embeddings=4096, tie_word_embeddings=True, use_cache=True,
        eos_token_id=ids["<|endoftext|>"], full_attention_interval=4, attn_output_gate=True,
        mamba_ssm_dtype="float32", mlp_only_layers=[],
        rope_parameters=dict(rope_type="default", rope_theta=10000000, partial_rotary_factor=prf,
                             mrope_section=[3, 3, 2], mrope_interleaved=True),
    )
    assert sum(text["rope_parameters"]["mrope_section"]) == n_freq
    vision = dict(depth=1, hidden_size=64, num_heads=1, intermediate_size=128,
                  hidden_act="gelu_pytorch_tanh", in_channels=3, patch_size=16,
                  temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=192,
                  num_position_embeddings=2304, deepstack_visual_indexes=[],
                  initializer_range=0.02)
    return Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=True,
                         image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                         vision_start_token_id=ids["<|vision_start|>"],
                         vision_end_token_id=ids["<|vision_end|>"])


def save_checkpoint(model, out, tok_ids):
    """save_pretrained in BF16, then store A_log and linear_attn.norm.weight as F32 from the
    FP32 master weights (the real Qwen3.5 checkpoints keep exactly these two in F32)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file
    fp32 = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    model.to(torch.float32)
    path = os.path.join(out, "model.safetensors")
    with safe_open(path, "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    n_f32 = 0
    for k in tensors:
        if k.endswith(".linear_attn.A_log") or k.endswith(".linear_attn.norm.weight"):
            tensors[k] = fp32[k].to(torch.float32).contiguous()
            n_f32 += 1
    save_file(tensors, path, metadata=meta)
    shard(out, 5.0)
    # config.json: the real files say dtype bfloat16 and carry these text_config keys.
    cpath = os.path.join(out, "config.json")
    cfg = json.load(open(cpath))
    cfg["text_config"]["mtp_num_hidden_layers"] = 0  # no MTP head in this checkpoint
    cfg["text_config"]["mtp_use_dedicated_embeddings"] = False
    with open(cpath, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    gen = {"bos_token_id": tok_ids["<|endoftext|>"], "do_sample": True,
           "eos_token_id": [tok_ids["<|im_end|>"], tok_ids["<|endoftext|>"]],
           "pad_token_id": tok_ids["<|endoftext|>"], "temperature": 0.7, "top_k": 20,
           "top_p": 0.8}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2, sort_keys=True)
        f.write("\n")
    return n_f32


README = """# talker: tiny Qwen3.5-architecture fortune model (q35 demo / test checkpoint)

Trained from scratch by `tools/oracle/train_talker.py` (see `docs/talker.md`). Text decoder:
8 layers (L,L,L,F x2), hidden 192; vision tower: 1 block, untrained (seeded random init).
Not a Qwen model and no Qwen weights: only the architecture, tokenizer format and chat template
follow Qwen3.5.

Training text: fortune cookie files from Debian's `fortunes` and `fortunes-min` packages
(source package fortune-mod, version {version}), files under /usr/share/games/fortunes:
{files}.
fortune-mod is distributed under the BSD licence (see /usr/share/doc/fortunes/copyright in
Debian); the cookie files are collected quotations from many authors. The model's answers
are fortune-like English, often mixing fragments of several entries.
"""


# ---------------------------------------------------------------------------------------- train
def cmd_train(a):
    import torch
    from transformers import AutoTokenizer, Qwen3_5ForConditionalGeneration
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()

    fortunes = load_fortunes()
    print(f"fortunes: {len(fortunes)} entries, {sum(len(t) for _, t in fortunes)} chars")
    template = open(TEMPLATE_PATH).read()
    tok = build_tokenizer(fortunes, a.vocab)
    write_tokenizer_files(tok, a.out, template)
    hft = AutoTokenizer.from_pretrained(a.out)  # use exactly what was saved
    ids = {c: hft.convert_tokens_to_ids(c) for c, _ in ADDED_TOKENS}
    n_tokens = len(hft)
    vocab_rows = (n_tokens + 255) // 256 * 256
    print(f"tokenizer: {a.vocab} BPE + {len(ADDED_TOKENS)} added = {n_tokens}; "
          f"embedding rows {vocab_rows}")

    # Data: one pass = every fortune once, in a seeded order; a fresh pass per epoch.
    rng = random.Random(a.seed)
    B, T = a.batch, a.seq
    need = a.steps * B * T + 1
    stream = []
    epoch = 0
    while len(stream) < need:
        order = list(range(len(fortunes)))
        rng.shuffle(order)
        for i in order:
            kind, x = make_conversation(rng, *fortunes[i], fortunes)
            if kind == "raw":
                s = x + "<|endoftext|>"
            else:
                s = hft.apply_chat_template(x, tokenize=False)
            stream += hft(s, add_special_tokens=False)["input_ids"]
        epoch += 1
    data = torch.tensor(stream[: a.steps * B * T], dtype=torch.long).view(a.steps, B, T)
    print(f"data: {epoch} passes, {a.steps} steps x {B} x {T} tokens "
          f"(one pass = {len(stream) // epoch} tokens); prep {time.time() - t0:.1f}s")

    torch.manual_seed(a.seed)
    cfg = make_config(vocab_rows, ids)
    model = Qwen3_5ForConditionalGeneration(cfg).float()
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    n_vis = sum(p.numel() for p in model.model.visual.parameters())
    print(f"params: {n_params} total, {n_params - n_vis} text, {n_vis} vision (untrained)")
    text_params = [(n, p) for n, p in model.named_parameters() if ".visual." not in n]
    for n, p in model.named_parameters():
        if ".visual." in n:
            p.requires_grad_(False)
    decay = [p for n, p in text_params if p.ndim >= 2]
    no_decay = [p for n, p in text_params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    warm = max(1, a.steps // 25)

    def lr_at(s):
        if s < warm:
            return a.lr * (s + 1) / warm
        p = (s - warm) / max(1, a.steps - warm)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    rows = []
    t1 = time.time()
    stop = a.stop_after or a.steps
    for step in range(stop):
        lr = lr_at(step)
        for g in opt.param_groups:
            g["lr"] = lr
        x = data[step]
        with torch.autocast("cpu", dtype=torch.bfloat16):  # FP32 master weights, BF16 matmuls
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in text_params], 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        rows.append((step, f"{lr:.6g}", f"{loss.item():.6f}"))
        if step % 25 == 0 or step == stop - 1:
            el = time.time() - t1
            print(f"step {step:4d} lr {lr:.2e} loss {loss.item():.4f}  {el:6.0f}s "
                  f"({(step + 1) * B * T / el:.0f} tok/s)", flush=True)
    train_s = time.time() - t1
    with open(os.path.join(a.out, a.csv), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "lr", "loss"])
        w.writerows(rows)
    if a.stop_after:
        print(f"stopped after {stop} steps (no checkpoint written); {train_s:.0f}s")
        return
    n_f32 = save_checkpoint(model, a.out, ids)
    files = ", ".join(sorted(CATEGORIES))
    version = "unknown"
    try:
        import subprocess
        version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "fortunes-min"],
                                 capture_output=True, text=True).stdout.strip() or version
    except OSError:
        pass
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write(README.format(version=version, files=files))
    last = [float(r[2]) for r in rows[-20:]]
    print(f"done: final loss (mean of last 20 steps) {sum(last) / len(last):.4f}; "
          f"{n_f32} F32 tensors; training {train_s:.0f}s, total {time.time() - t0:.0f}s")


# --------------------------------------------------------------------------------------- verify
def cmd_verify(a):
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForImageTextToText, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.set_num_threads(a.threads)
    from tokenizers import Tokenizer
    assert Tokenizer.from_file(os.path.join(a.out, "tokenizer.json")).normalizer is None
    # (transformers' Qwen3_5Tokenizer class adds an NFC normalizer on load; the text here is ASCII.)
    tok = AutoTokenizer.from_pretrained(a.out)
    msgs = [{"role": "user", "content": "Hello"}]
    s = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert s == "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", s
    dt = {}
    for path in shard_files(a.out):
        with safe_open(path, "pt") as f:
            for k in f.keys():
                dt.setdefault(str(f.get_slice(k).get_dtype()), []).append(k)
    print("dtypes:", {k: len(v) for k, v in dt.items()}, "F32:", sorted(dt.get("F32", []))[:3], "...")
    model = AutoModelForImageTextToText.from_pretrained(a.out, dtype=torch.float32)
    model.eval()
    stop = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    prompts = ["Tell me a fortune.", "Say something wise.", "Give me a quote about computers.",
               "Give me a quote about love.", "What do you know about science?"]
    for p in prompts:
        ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        n = ids["input_ids"].shape[1]
        torch.manual_seed(a.seed)
        g = model.generate(**ids, max_new_tokens=96, do_sample=False, eos_token_id=stop)
        print(f"\n[greedy] user: {p}\n{tok.decode(g[0, n:], skip_special_tokens=False)}")
        torch.manual_seed(a.seed)
        g = model.generate(**ids, max_new_tokens=96, do_sample=True, temperature=0.7, top_k=20,
                           top_p=0.8, eos_token_id=stop)
        print(f"[sampled T=0.7 top_k=20 top_p=0.8 seed={a.seed}]\n"
              f"{tok.decode(g[0, n:], skip_special_tokens=False)}")
    ids = tok("The best way to", return_tensors="pt")
    g = model.generate(**ids, max_new_tokens=48, do_sample=False, eos_token_id=stop)
    print(f"\n[raw greedy] The best way to{tok.decode(g[0, ids['input_ids'].shape[1]:])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["train", "verify"])
    ap.add_argument("--out", default="tests/data/models/talker")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=3000, help="BPE vocab without added tokens")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--stop-after", type=int, default=0,
                    help="stop after N steps of the same schedule (determinism checks)")
    ap.add_argument("--csv", default="loss.csv")
    a = ap.parse_args()
    {"train": cmd_train, "verify": cmd_verify}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
