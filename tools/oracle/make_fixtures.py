#!/usr/bin/env python3
"""Reference fixtures for q35: small synthetic Qwen3.5 checkpoints + Hugging Face float32 outputs.

  make_fixtures.py all [--only NAME ...] [--work DIR]
      (Re)generate every fixture under tests/data/models/<name>/ deterministically. Weights come from
      the seeded generator (synth.py, docs/synthetic-weights.md) and are written with save_pretrained.
      Checkpoints too large to commit (shape08b) are built under --work (default build/oracle, ignored
      by git); only their config.json, synthetic.json and reference.safetensors go to tests/data.
  make_fixtures.py weights NAME --out DIR
      Write only the checkpoint of fixture NAME (config + weights + synthetic.json) into DIR.
  make_fixtures.py record --model DIR --out FILE [--prompts-text "a" "b" ...] [--lengths 7 1 33]
      Record the reference format for any Qwen3.5 checkpoint directory. With --prompts-text the prompts
      are tokenized with DIR/tokenizer.json (tokenizers, add_special_tokens=False); otherwise random ids.

The format of reference.safetensors is documented in docs/fixtures.md.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import synth  # noqa: E402

REF_FORMAT = "q35-reference-1"
GREEDY_N = 32
MIN_MARGIN = 1e-3

L, F = "linear_attention", "full_attention"

# Tiny vision tower used by the multimodal-wrapper fixtures (the tensors exist so that a loader sees the
# real layout; no reference output depends on them).
TINY_VISION = dict(depth=2, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=16,
                   temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=16,
                   hidden_act="gelu_pytorch_tanh", deepstack_visual_indexes=[])


def rope(head_dim_rot_freqs_sections, theta=10000000.0):
    return dict(rope_type="default", rope_theta=theta, partial_rotary_factor=0.25, mrope_interleaved=True,
                mrope_section=list(head_dim_rot_freqs_sections))


FIXTURES = {
    # multimodal wrapper, tied, bf16 + F32 A_log/gated-norm as in the real checkpoints
    "tiny-vl": dict(
        seed=3501, prompt_seed=19, wrapper=True, commit_weights=True,
        lengths=[7, 1, 33, 100], greedy_logits=[0, 3],
        text=dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  layer_types=[L, L, L, F], linear_num_key_heads=2, linear_num_value_heads=2,
                  linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32,  # 8 rotary dims = 4 freqs
                  rope_parameters=rope([2, 1, 1]), max_position_embeddings=262144, tie_word_embeddings=True),
    ),
    # flat text-only config, untied (lm_head.weight stored), 8 layers, GQA 4:1, head_dim 48
    "narrow8": dict(
        seed=3502, prompt_seed=17, wrapper=False, commit_weights=True,
        lengths=[9, 1, 70], greedy_logits="first",
        text=dict(vocab_size=1024, hidden_size=96, intermediate_size=96, num_hidden_layers=8,
                  layer_types=[L, L, L, F, L, L, L, F], linear_num_key_heads=2, linear_num_value_heads=2,
                  linear_key_head_dim=24, linear_value_head_dim=24, linear_conv_kernel_dim=4,
                  num_attention_heads=4, num_key_value_heads=1, head_dim=48,  # 12 rotary dims = 6 freqs
                  rope_parameters=rope([2, 2, 2]), max_position_embeddings=4096, tie_word_embeddings=False),
    ),
    # linear attention with more value heads than key heads (grouped: value head j uses key head j // 2)
    "hv-gt-hk": dict(
        seed=3503, prompt_seed=11, wrapper=False, commit_weights=True,
        lengths=[6, 1, 65], greedy_logits="all",
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
                  layer_types=[L, L, L, F], linear_num_key_heads=2, linear_num_value_heads=4,
                  linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=32,
                  rope_parameters=rope([2, 1, 1]), max_position_embeddings=4096, tie_word_embeddings=True),
    ),
    # the real Qwen3.5-0.8B per-layer shapes, 4 layers, vocab 2048; weights not committed
    "shape08b": dict(
        seed=3504, prompt_seed=14, wrapper=True, commit_weights=False,
        lengths=[5, 24], greedy_logits="first",
        text=dict(vocab_size=2048, hidden_size=1024, intermediate_size=3584, num_hidden_layers=4,
                  layer_types=[L, L, L, F], linear_num_key_heads=16, linear_num_value_heads=16,
                  linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
                  num_attention_heads=8, num_key_value_heads=2, head_dim=256,
                  rope_parameters=rope([11, 11, 10]), max_position_embeddings=262144,
                  tie_word_embeddings=True),
    ),
}


def torch_setup():
    import torch

    torch.set_num_threads(1)  # deterministic reductions, and the CPU is shared
    torch.use_deterministic_algorithms(True)
    return torch


def build_model(spec):
    torch_setup()
    from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,
                              Qwen3_5TextConfig)

    text = dict(spec["text"], hidden_act="silu", rms_norm_eps=1e-6, attention_bias=False,
                attention_dropout=0.0)
    if spec["wrapper"]:
        vision = dict(TINY_VISION, out_hidden_size=text["hidden_size"])
        cfg = Qwen3_5Config(text_config=text, vision_config=vision,
                            tie_word_embeddings=text["tie_word_embeddings"])
        return Qwen3_5ForConditionalGeneration(cfg).eval()
    return Qwen3_5ForCausalLM(Qwen3_5TextConfig(**text)).eval()


def write_weights(name, out_dir):
    spec = FIXTURES[name]
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    model = build_model(spec)
    rows = synth.write_checkpoint(model, out_dir, spec["seed"])
    del model
    return rows


def random_prompts(lengths, vocab, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=n).astype(np.int32) for n in lengths]


# ----------------------------------------------------------------------------- recording

def load_reference_model(model_dir):
    torch = torch_setup()
    import transformers

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    arch = (cfg.get("architectures") or ["Qwen3_5ForCausalLM"])[0]
    cls = getattr(transformers, arch)
    model = cls.from_pretrained(model_dir, dtype=torch.float32).eval()
    return model, arch, cfg


def check_loaded_exactly(model, model_dir):
    """Every tensor of the checkpoint must arrive in the float32 model unchanged (bf16 -> f32 is exact)."""
    import torch

    sd = model.state_dict()
    for path in synth.checkpoint_files(model_dir):
        tensors, _ = synth.read_safetensors_raw(path)
        for name, dt, shape, raw in tensors:
            if name not in sd:
                if name.startswith("mtp."):
                    continue  # ignored by transformers (_keys_to_ignore_on_load_unexpected)
                raise SystemExit(f"record: {name} is in the checkpoint but not in the model")
            if dt == "BF16":
                want = synth.bf16_to_f32(np.frombuffer(raw, dtype="<u2")).reshape(shape)
            elif dt == "F32":
                want = np.frombuffer(raw, dtype="<f4").reshape(shape)
            else:
                continue
            got = sd[name].detach().to(torch.float32).numpy()
            if got.shape != want.shape or not np.array_equal(got, want):
                raise SystemExit(f"record: {name} is not loaded exactly as stored")


def forward(model, ids, past=None, start=0, hidden=False):
    import torch

    n = len(ids)
    inp = torch.as_tensor(np.asarray(ids, dtype=np.int64)).view(1, n)
    pos = torch.arange(start, start + n, dtype=torch.long).view(1, n)
    with torch.no_grad():
        out = model(input_ids=inp, position_ids=pos, past_key_values=past, use_cache=past is not None,
                    output_hidden_states=hidden)
    return out


def new_cache(model):
    from transformers import DynamicCache

    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return DynamicCache(config=cfg)


def record(model_dir, out_file, prompts, texts=None, greedy_logits="all", greedy_n=GREEDY_N,
           hidden=True, check_exact=True, label=None, quiet=False):
    """Write reference.safetensors for prompts (lists of ids). Returns a summary dict."""
    import torch
    import transformers

    model, arch, _ = load_reference_model(model_dir)
    if check_exact:
        check_loaded_exactly(model, model_dir)
    tensors = {}
    summary = {"min_greedy_margin": float("inf"), "chunk_vs_recurrent_max_abs": 0.0,
               "chunk_vs_recurrent_max_rel": 0.0, "prefill_cache_vs_nocache_max_abs": 0.0}
    for p, ids in enumerate(prompts):
        ids = np.asarray(ids, dtype=np.int32)
        T = len(ids)
        tensors[f"prompt.{p}.ids"] = ids
        if texts is not None:
            tensors[f"prompt.{p}.text"] = np.frombuffer(texts[p].encode("utf-8"), dtype=np.uint8).copy()
        # 1. whole prompt at once, no cache (HF chunked gated-delta path, chunk 64)
        out = forward(model, ids, hidden=(hidden and p == 0))
        logits = out.logits[0].float().numpy()
        tensors[f"prompt.{p}.logits"] = np.ascontiguousarray(logits, dtype=np.float32)
        if hidden and p == 0:
            for l, h in enumerate(out.hidden_states):
                tensors[f"prompt.0.hidden.{l}"] = np.ascontiguousarray(h[0].float().numpy(), dtype=np.float32)
        # 2. token by token with the cache (HF recurrent path + causal_conv1d_update) -> compare
        cache = new_cache(model)
        step = np.empty_like(logits)
        for t in range(T):
            step[t] = forward(model, ids[t:t + 1], past=cache, start=t).logits[0, -1].float().numpy()
        d = np.abs(step - logits)
        summary["chunk_vs_recurrent_max_abs"] = max(summary["chunk_vs_recurrent_max_abs"], float(d.max()))
        summary["chunk_vs_recurrent_max_rel"] = max(summary["chunk_vs_recurrent_max_rel"],
                                                    float(d.max() / max(1e-30, np.abs(logits).max())))
        # 3. greedy: prefill the whole prompt with the cache, then one token at a time, never stopping
        cache = new_cache(model)
        last = forward(model, ids, past=cache, start=0).logits[0].float().numpy()
        summary["prefill_cache_vs_nocache_max_abs"] = max(summary["prefill_cache_vs_nocache_max_abs"],
                                                          float(np.abs(last - logits).max()))
        cur = last[-1]
        toks, glog, margins = [], [], []
        for s in range(greedy_n):
            tok = int(np.argmax(cur))  # first index of the maximum
            top2 = np.partition(cur, -2)[-2:]
            margins.append(float(top2[1] - top2[0]))
            toks.append(tok)
            glog.append(cur.copy())
            if s + 1 < greedy_n:
                cur = forward(model, [tok], past=cache, start=T + s).logits[0, -1].float().numpy()
        tensors[f"prompt.{p}.greedy"] = np.asarray(toks, dtype=np.int32)
        tensors[f"prompt.{p}.greedy_margin"] = np.asarray(margins, dtype=np.float32)
        if greedy_logits == "all" or (greedy_logits == "first" and p == 0) or \
                (isinstance(greedy_logits, (list, tuple)) and p in greedy_logits):
            tensors[f"prompt.{p}.greedy_logits"] = np.ascontiguousarray(np.stack(glog), dtype=np.float32)
        summary["min_greedy_margin"] = min(summary["min_greedy_margin"], min(margins))
        if not quiet:
            print(f"  prompt {p}: T={T} greedy={toks[:8]}... min margin {min(margins):.4g} "
                  f"logit std {logits.std():.3g} chunk-vs-recurrent {float(d.max()):.3g}", flush=True)
    meta = {
        "format": REF_FORMAT,
        "model": label or os.path.basename(os.path.normpath(model_dir)),
        "architecture": arch,
        "dtype": "float32",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "n_prompts": str(len(prompts)),
        "greedy_n": str(greedy_n),
        "min_greedy_margin": repr(summary["min_greedy_margin"]),
        "chunk_vs_recurrent_max_abs": repr(summary["chunk_vs_recurrent_max_abs"]),
        "chunk_vs_recurrent_max_rel": repr(summary["chunk_vs_recurrent_max_rel"]),
        "prefill_cache_vs_nocache_max_abs": repr(summary["prefill_cache_vs_nocache_max_abs"]),
    }
    os.makedirs(os.path.dirname(os.path.abspath(out_file)), exist_ok=True)
    synth.save_safetensors(tensors, out_file, metadata=meta)
    del model
    return summary


# ----------------------------------------------------------------------------- independent check of the spec

def load_weights_f64(model_dir):
    out = {}
    for path in synth.checkpoint_files(model_dir):
        tensors, _ = synth.read_safetensors_raw(path)
        for name, dt, shape, raw in tensors:
            if dt == "BF16":
                a = synth.bf16_to_f32(np.frombuffer(raw, dtype="<u2"))
            elif dt == "F32":
                a = np.frombuffer(raw, dtype="<f4")
            else:
                continue
            out[name] = a.reshape(shape).astype(np.float64)
    return out


def spec_logits(W, cfg, ids):
    """Qwen3.5 text forward written from docs (qwen35-spec.md §3), float64 numpy, GDN token by token.
    Independent of transformers: only the checkpoint's tensors and config.json are used."""
    tc = cfg.get("text_config", cfg)
    eps = tc.get("rms_norm_eps", 1e-6)
    pre = "model.language_model." if "model.language_model.embed_tokens.weight" in W else "model."
    silu = lambda t: t / (1.0 + np.exp(-t))
    sigmoid = lambda t: 1.0 / (1.0 + np.exp(-t))
    softplus = lambda t: np.where(t > 20.0, t, np.log1p(np.exp(np.minimum(t, 20.0))))

    def rms1p(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1.0 + w)

    def gdn(x, p):
        T = x.shape[0]
        hk, hv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
        dk, dv = tc["linear_key_head_dim"], tc["linear_value_head_dim"]
        qkv = x @ W[p + "in_proj_qkv.weight"].T
        z = (x @ W[p + "in_proj_z.weight"].T).reshape(T, hv, dv)
        b = x @ W[p + "in_proj_b.weight"].T
        a = x @ W[p + "in_proj_a.weight"].T
        cw = W[p + "conv1d.weight"][:, 0, :]  # [C, K]
        K = cw.shape[1]
        xin = np.concatenate([np.zeros((K - 1, qkv.shape[1])), qkv], 0)
        conv = sum(cw[:, j][None, :] * xin[j:j + T] for j in range(K))  # w[:, K-1] hits the current token
        conv = silu(conv)
        q = conv[:, :hk * dk].reshape(T, hk, dk)
        k = conv[:, hk * dk:2 * hk * dk].reshape(T, hk, dk)
        v = conv[:, 2 * hk * dk:].reshape(T, hv, dv)
        beta = sigmoid(b)
        g = -np.exp(W[p + "A_log"]) * softplus(a + W[p + "dt_bias"])
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(dk)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
        S = np.zeros((hv, dk, dv))
        o = np.zeros((T, hv, dv))
        for t in range(T):
            for j in range(hv):
                kh = j // (hv // hk)  # grouped: value head j reads key/query head j // (Hv/Hk)
                S[j] *= np.exp(g[t, j])
                u = beta[t, j] * (v[t, j] - S[j].T @ k[t, kh])
                S[j] += np.outer(k[t, kh], u)
                o[t, j] = S[j].T @ q[t, kh]
        y = o / np.sqrt((o * o).mean(-1, keepdims=True) + eps) * W[p + "norm.weight"] * silu(z)
        return y.reshape(T, hv * dv) @ W[p + "out_proj.weight"].T

    def attn(x, p):
        T = x.shape[0]
        nh, nkv, hd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
        rp = tc.get("rope_parameters") or {}
        theta = rp.get("rope_theta", 10000.0)
        rot = int(hd * rp.get("partial_rotary_factor", 0.25))
        half = rot // 2
        qg = (x @ W[p + "q_proj.weight"].T).reshape(T, nh, 2 * hd)
        q, gate = qg[:, :, :hd], qg[:, :, hd:].reshape(T, nh * hd)
        q = rms1p(q, W[p + "q_norm.weight"])
        k = rms1p((x @ W[p + "k_proj.weight"].T).reshape(T, nkv, hd), W[p + "k_norm.weight"])
        v = (x @ W[p + "v_proj.weight"].T).reshape(T, nkv, hd)
        inv = 1.0 / theta ** (np.arange(half) * 2.0 / rot)
        ang = np.arange(T)[:, None] * inv[None, :]  # text only: T = H = W position components
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

        def rope(t):
            t = t.copy()
            x1, x2 = t[..., :half].copy(), t[..., half:rot].copy()
            t[..., :half] = x1 * c - x2 * s
            t[..., half:rot] = x2 * c + x1 * s
            return t

        q, k = rope(q), rope(k)
        out = np.zeros((T, nh, hd))
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for h in range(nh):
            g_ = h // (nh // nkv)
            sc = q[:, h] @ k[:, g_].T / np.sqrt(hd) + mask
            pr = np.exp(sc - sc.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)
            out[:, h] = pr @ v[:, g_]
        return (out.reshape(T, nh * hd) * sigmoid(gate)) @ W[p + "o_proj.weight"].T

    E = W[pre + "embed_tokens.weight"]
    h = E[np.asarray(ids)]
    for i, lt in enumerate(tc["layer_types"]):
        p = f"{pre}layers.{i}."
        x = rms1p(h, W[p + "input_layernorm.weight"])
        h = h + (gdn(x, p + "linear_attn.") if lt == "linear_attention" else attn(x, p + "self_attn."))
        x = rms1p(h, W[p + "post_attention_layernorm.weight"])
        x = (silu(x @ W[p + "mlp.gate_proj.weight"].T) * (x @ W[p + "mlp.up_proj.weight"].T))
        h = h + x @ W[p + "mlp.down_proj.weight"].T
    h = rms1p(h, W[pre + "norm.weight"])
    head = W.get("lm_head.weight", E)  # tied: the embedding
    return h @ head.T


def spec_check(model_dir, ref_file):
    from safetensors.numpy import load_file

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    W = load_weights_f64(model_dir)
    ref = load_file(ref_file)
    worst = 0.0
    p = 0
    while f"prompt.{p}.ids" in ref:
        want = ref[f"prompt.{p}.logits"].astype(np.float64)
        got = spec_logits(W, cfg, ref[f"prompt.{p}.ids"])
        worst = max(worst, float(np.abs(got - want).max()))
        p += 1
    return worst


# ----------------------------------------------------------------------------- fixtures

COMMITTED_FILES = ["config.json", "generation_config.json", "synthetic.json"]


def make_fixture(name, work):
    spec = FIXTURES[name]
    dest = os.path.join(ROOT, "tests", "data", "models", name)
    build = dest if spec["commit_weights"] else os.path.join(work, name)
    print(f"{name}: writing weights to {os.path.relpath(build, ROOT)}", flush=True)
    write_weights(name, build)
    if build != dest:
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        os.makedirs(dest)
        for f in COMMITTED_FILES:
            shutil.copyfile(os.path.join(build, f), os.path.join(dest, f))
    prompts = random_prompts(spec["lengths"], spec["text"]["vocab_size"], spec["prompt_seed"])
    s = record(build, os.path.join(dest, "reference.safetensors"), prompts,
               greedy_logits=spec["greedy_logits"], label=name)
    print(f"{name}: min greedy margin {s['min_greedy_margin']:.4g}, chunked vs token-by-token max |diff| "
          f"{s['chunk_vs_recurrent_max_abs']:.3g} (rel {s['chunk_vs_recurrent_max_rel']:.3g}), "
          f"prefill with/without cache {s['prefill_cache_vs_nocache_max_abs']:.3g}", flush=True)
    if s["min_greedy_margin"] < MIN_MARGIN:
        raise SystemExit(f"{name}: a greedy step has a top-1/top-2 margin below {MIN_MARGIN}; "
                         "change the fixture's seed or prompt_seed")
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a_all = sub.add_parser("all", help="regenerate every fixture")
    a_all.add_argument("--only", nargs="+", choices=sorted(FIXTURES), help="just these fixtures")
    a_all.add_argument("--work", default=os.path.join(ROOT, "build", "oracle"),
                       help="where uncommitted checkpoints are built (default build/oracle)")
    a_w = sub.add_parser("weights", help="write the checkpoint of one fixture")
    a_w.add_argument("name", choices=sorted(FIXTURES))
    a_w.add_argument("--out", required=True)
    a_r = sub.add_parser("record", help="record reference outputs for a checkpoint directory")
    a_r.add_argument("--model", required=True)
    a_r.add_argument("--out", required=True)
    a_r.add_argument("--prompts-text", nargs="+", help="prompts, tokenized with MODEL/tokenizer.json")
    a_r.add_argument("--lengths", nargs="+", type=int, default=[7, 1, 33, 100],
                     help="random prompt lengths when --prompts-text is not given")
    a_r.add_argument("--seed", type=int, default=0, help="numpy seed of the random prompts")
    a_r.add_argument("--greedy-n", type=int, default=GREEDY_N)
    a_r.add_argument("--greedy-logits", choices=["all", "first", "none"], default="all")
    a_r.add_argument("--no-hidden", action="store_true", help="omit prompt.0.hidden.*")
    a_s = sub.add_parser("spec-check", help="compare a numpy float64 forward written from the spec with "
                         "the recorded logits")
    a_s.add_argument("--model", required=True)
    a_s.add_argument("--ref", help="reference.safetensors (default MODEL/reference.safetensors)")
    args = ap.parse_args(argv)

    if args.cmd == "all":
        names = args.only or list(FIXTURES)
        for n in names:
            make_fixture(n, os.path.abspath(args.work))
    elif args.cmd == "spec-check":
        worst = spec_check(args.model, args.ref or os.path.join(args.model, "reference.safetensors"))
        print(f"spec forward (float64 numpy) vs recorded float32 HF logits: max |diff| {worst:.3g}")
        if worst > 1e-3:
            raise SystemExit("spec-check: the spec's forward does not match transformers")
    elif args.cmd == "weights":
        rows = write_weights(args.name, args.out)
        print(f"{args.name}: {len(rows)} tensors written to {args.out}")
    else:
        texts = None
        if args.prompts_text:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
            texts = list(args.prompts_text)
            prompts = [np.asarray(tok.encode(t, add_special_tokens=False).ids, dtype=np.int32) for t in texts]
            if any(len(p) == 0 for p in prompts):
                raise SystemExit("record: a prompt tokenized to zero tokens")
        else:
            with open(os.path.join(args.model, "config.json")) as f:
                cfg = json.load(f)
            vocab = cfg.get("text_config", cfg)["vocab_size"]
            prompts = random_prompts(args.lengths, vocab, args.seed)
        s = record(args.model, args.out, prompts, texts=texts, greedy_logits=args.greedy_logits,
                   greedy_n=args.greedy_n, hidden=not args.no_hidden, check_exact=True)
        print(json.dumps(s))
        if s["min_greedy_margin"] < MIN_MARGIN:
            print(f"warning: a greedy step has a top-1/top-2 margin below {MIN_MARGIN}; an engine that "
                  "matches the logits closely may still pick another token there", file=sys.stderr)


if __name__ == "__main__":
    main()
