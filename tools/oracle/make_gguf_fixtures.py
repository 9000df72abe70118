#!/usr/bin/env python3
"""GGUF fixtures for q35: the small Hugging Face fixtures of tests/data/models/ converted to llama.cpp's
Qwen3.5 GGUF (arch qwen35) the way llama.cpp's converter does it, written with the `gguf` package.

  make_gguf_fixtures.py [--out tests/data/gguf] [--fuzz-corpus tests/fuzz/corpus/fuzz_gguf]

The transforms are those of llama.cpp `conversion/qwen.py` (Qwen3_5TextModel =
_Qwen35MtpMixin + _Qwen35MRopeMixin + _LinearAttentionVReorderBase -> Qwen3NextModel) and the type rules
of `conversion/base.py` (ModelBase.prepare_tensors), re-implemented here on the same torch/numpy
operations:
  - V-head reorder when linear_num_value_heads > linear_num_key_heads (_LinearAttentionVReorderBase):
    the V rows of in_proj_qkv, the rows of in_proj_z / in_proj_b / in_proj_a, A_log, dt_bias, the V
    channels of conv1d and the columns of out_proj go from grouped order (head k*r + v) to tiled order
    (position v*Hk + k): reshape [Hk, r, d] -> swap the first two axes;
  - A_log -> -exp(A_log) (ssm_a), dt_bias -> ssm_dt.bias, conv1d squeezed to [C, K], every
    "*norm.weight" except linear_attn.norm.weight stored as 1 + w (Qwen3NextModel.modify_tensors);
  - tensors converted to float32 first (bf16 is not a numpy type), then: 1-D tensors, "*_norm.weight",
    ssm_conv1d and names not ending in ".weight" are F32; the rest take the output type, falling back to
    F16 where a row is not whole blocks (gguf.quants.QuantError), as the converter does;
  - tied embeddings: no output.weight (lm_head is only written when the checkpoint stores it).
Q4_0 is not a converter --outtype (llama-quantize makes it, with its own per-tensor choices); here it
uses the same rules as Q8_0 so the file holds plain Q4_0 matrices.

Besides each .gguf, a .json holds for every tensor its GGUF type, shape (GGUF order) and the FNV-1a 64
hash of its values dequantized by gguf.quants to float32 (q35's tests compare their own dequantization
to it). Outputs are deterministic.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file

import gguf
from gguf import GGMLQuantizationType as QT

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "tests", "data", "models")


def fnv1a64(b: bytes) -> str:
    h = 0xCBF29CE484222325
    for x in b:
        h ^= x
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def hparams_of(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if "text_config" in cfg:  # TextModel.__init__: move text_config to the root level
        cfg = {**cfg, **cfg["text_config"]}
    return cfg


def reorder_v_heads(t, dim, num_k_heads, num_v_per_k, head_dim):
    """_LinearAttentionVReorderBase._reorder_v_heads: grouped (by K head) -> tiled."""
    shape = list(t.shape)
    if dim < 0:
        dim += len(shape)
    new_shape = shape[:dim] + [num_k_heads, num_v_per_k, head_dim] + shape[dim + 1:]
    t = t.reshape(*new_shape)
    perm = list(range(len(new_shape)))
    perm[dim], perm[dim + 1] = perm[dim + 1], perm[dim]
    return t.permute(*perm).contiguous().reshape(*shape)


def v_reorder(hp, name, t):
    """_LinearAttentionVReorderBase.modify_tensors."""
    nk, nv = hp.get("linear_num_key_heads", 0), hp.get("linear_num_value_heads", 0)
    if not (nk > 0 and nv > 0 and nk != nv and "linear_attn." in name):
        return t
    dk, dv, r = hp["linear_key_head_dim"], hp["linear_value_head_dim"], nv // nk
    if ".in_proj_qkv." in name:
        qd = dk * nk
        q, k, v = t[:qd], t[qd:2 * qd], t[2 * qd:]
        return torch.cat([q, k, reorder_v_heads(v, 0, nk, r, dv)], dim=0)
    if ".in_proj_z." in name:
        return reorder_v_heads(t, 0, nk, r, dv)
    if ".in_proj_b." in name or ".in_proj_a." in name:
        return reorder_v_heads(t, 0, nk, r, 1)
    if ".A_log" in name or ".dt_bias" in name or ".dt_proj" in name:
        return reorder_v_heads(t.unsqueeze(-1), 0, nk, r, 1).squeeze(-1) if t.ndim == 1 else reorder_v_heads(t, -1, nk, r, 1)
    if ".conv1d" in name:
        data = t.squeeze()
        qk = dk * nk * 2
        return torch.cat([data[:qk], reorder_v_heads(data[qk:], 0, nk, r, dv)], dim=0)
    if ".out_proj." in name:
        return reorder_v_heads(t, 1, nk, r, dv)
    return t


def next_modify(name, t):
    """Qwen3NextModel.modify_tensors (the in_proj_qkvz branch is Qwen3-Next only)."""
    if name.endswith(".A_log"):
        t = -torch.exp(t)
    elif name.endswith(".dt_bias"):
        name = name.rpartition(".dt_bias")[0] + ".dt_proj.bias"
    elif "conv1d" in name:
        t = t.squeeze()
    elif name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
        t = t + 1
    return name, t


def convert(model_dir, out_type, mtp_seed=None, weights=None, name=None):
    """Returns (metadata list, [(gguf name, np array, qtype)]) for one fixture."""
    hp = hparams_of(model_dir)
    n_layers = hp["num_hidden_layers"]
    blocks = n_layers + (1 if mtp_seed is not None else 0)
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN35, blocks)
    raw = load_file(weights or os.path.join(model_dir, "model.safetensors"))
    if mtp_seed is not None:
        raw.update(mtp_tensors(hp, mtp_seed))
    tensors = []
    for hf_name in raw:  # safetensors order (sorted by name), as the converter iterates the files
        t = raw[hf_name]
        if hf_name.startswith("model.visual."):  # the vision tower goes to the mmproj file
            continue
        name = hf_name.replace("model.language_model.", "model.", 1)
        if name.startswith("mtp."):  # _Qwen35MtpMixin.filter_tensors
            remap = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm", "norm": "shared_head.norm"}
            parts = name.split(".", 3)
            if len(parts) == 4 and parts[1] == "layers" and parts[2].isdecimal():
                name = f"model.layers.{n_layers + int(parts[2])}.{parts[3]}"
            elif len(parts) == 3 and parts[1] in remap:
                name = f"model.layers.{n_layers}.{remap[parts[1]]}.{parts[2]}"
        if t.dtype not in (torch.float16, torch.float32):  # prepare_tensors
            t = t.to(torch.float32)
        t = v_reorder(hp, name, t)
        name, t = next_modify(name, t)
        new_name = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None and mtp_seed is not None:
            # gguf-py 0.19.0 does not list the NEXTN tensors for QWEN35 yet; llama.cpp's names:
            for hf, gg in (("eh_proj", "nextn.eh_proj"), ("enorm", "nextn.enorm"), ("hnorm", "nextn.hnorm"),
                           ("shared_head.norm", "nextn.shared_head_norm")):
                if name == f"model.layers.{n_layers}.{hf}.weight":
                    new_name = f"blk.{n_layers}.{gg}.weight"
        if new_name is None:
            raise ValueError(f"cannot map {name}")
        data = t.numpy()
        qtype = None
        if data.ndim <= 1 or new_name.endswith("_norm.weight") or ".ssm_conv1d." in new_name or not new_name.endswith(".weight"):
            qtype = QT.F32
        if qtype is None:
            qtype = out_type
        try:
            q = gguf.quants.quantize(data, qtype)
        except gguf.QuantError:
            qtype = QT.F16
            q = gguf.quants.quantize(data, qtype)
        tensors.append((new_name, q, qtype))

    rp = hp.get("rope_parameters") or hp.get("rope_scaling") or {}
    head_dim = hp.get("head_dim") or hp["hidden_size"] // hp["num_attention_heads"]
    sections = list(rp.get("mrope_section", [11, 11, 10]))
    while len(sections) < 4:
        sections.append(0)
    ftype = {QT.F32: gguf.LlamaFileType.ALL_F32, QT.BF16: gguf.LlamaFileType.MOSTLY_BF16, QT.Q8_0: gguf.LlamaFileType.MOSTLY_Q8_0,
             QT.Q4_0: gguf.LlamaFileType.MOSTLY_Q4_0}[out_type]
    meta = [  # TextModel / Qwen3NextModel / mixins set_gguf_parameters, in that order
        ("general.type", "str", "model"),
        ("general.name", "str", name or os.path.basename(model_dir)),
        ("qwen35.block_count", "u32", blocks),
        ("qwen35.context_length", "u32", hp["max_position_embeddings"]),
        ("qwen35.embedding_length", "u32", hp["hidden_size"]),
        ("qwen35.feed_forward_length", "u32", hp["intermediate_size"]),
        ("qwen35.attention.head_count", "u32", hp["num_attention_heads"]),
        ("qwen35.attention.head_count_kv", "u32", hp["num_key_value_heads"]),
        ("qwen35.rope.dimension_sections", "arr", sections[:4]),
        ("qwen35.rope.freq_base", "f32", rp.get("rope_theta", hp.get("rope_theta", 10000000.0))),
        ("qwen35.attention.layer_norm_rms_epsilon", "f32", hp.get("rms_norm_eps", 1e-6)),  # AutoConfig default
        ("qwen35.attention.key_length", "u32", head_dim),
        ("qwen35.attention.value_length", "u32", head_dim),
        ("general.file_type", "u32", int(ftype)),
        ("qwen35.ssm.conv_kernel", "u32", hp["linear_conv_kernel_dim"]),
        ("qwen35.ssm.state_size", "u32", hp["linear_key_head_dim"]),
        ("qwen35.ssm.group_count", "u32", hp["linear_num_key_heads"]),
        ("qwen35.ssm.time_step_rank", "u32", hp["linear_num_value_heads"]),
        ("qwen35.ssm.inner_size", "u32", hp["linear_value_head_dim"] * hp["linear_num_value_heads"]),
        ("qwen35.full_attention_interval", "u32", attention_interval(hp)),
        ("qwen35.rope.dimension_count", "u32", int(head_dim * hp.get("partial_rotary_factor", 0.25))),
    ]
    if mtp_seed is not None:
        meta.append(("qwen35.nextn_predict_layers", "u32", 1))
    meta.append(("general.quantization_version", "u32", gguf.GGML_QUANT_VERSION))
    return meta, tensors


def attention_interval(hp):
    """The converter writes hparams.get("full_attention_interval", 4) (AutoConfig fills it in); a config
    that only gives layer_types (tests/fuzz/micro) gets the interval its layer_types follow."""
    lt = hp.get("layer_types")
    if "full_attention_interval" in hp or not lt:
        return hp.get("full_attention_interval", 4)
    for k in range(1, len(lt) + 1):
        if all((t == "full_attention") == ((i + 1) % k == 0) for i, t in enumerate(lt)):
            return k
    raise ValueError("layer_types follow no full_attention_interval")


def mtp_tensors(hp, seed):
    """A random MTP block (HF names, as the real checkpoints store it) so that a fixture carries one."""
    g = torch.Generator().manual_seed(seed)
    H, F, hd = hp["hidden_size"], hp["intermediate_size"], hp.get("head_dim")
    nh, nkv = hp["num_attention_heads"], hp["num_key_value_heads"]
    shapes = {
        "mtp.fc.weight": [H, 2 * H], "mtp.pre_fc_norm_embedding.weight": [H], "mtp.pre_fc_norm_hidden.weight": [H],
        "mtp.norm.weight": [H], "mtp.layers.0.input_layernorm.weight": [H], "mtp.layers.0.post_attention_layernorm.weight": [H],
        "mtp.layers.0.self_attn.q_proj.weight": [2 * nh * hd, H], "mtp.layers.0.self_attn.k_proj.weight": [nkv * hd, H],
        "mtp.layers.0.self_attn.v_proj.weight": [nkv * hd, H], "mtp.layers.0.self_attn.o_proj.weight": [H, nh * hd],
        "mtp.layers.0.self_attn.q_norm.weight": [hd], "mtp.layers.0.self_attn.k_norm.weight": [hd],
        "mtp.layers.0.mlp.gate_proj.weight": [F, H], "mtp.layers.0.mlp.up_proj.weight": [F, H], "mtp.layers.0.mlp.down_proj.weight": [H, F],
    }
    return {k: (torch.randn(*v, generator=g) * 0.02).to(torch.bfloat16) for k, v in shapes.items()}


def write(path, meta, tensors):
    w = gguf.GGUFWriter(path, "qwen35")
    for key, kind, val in meta:
        if kind == "str":
            w.add_string(key, val)
        elif kind == "u32":
            w.add_uint32(key, int(val))
        elif kind == "f32":
            w.add_float32(key, float(val))
        elif kind == "arr":
            w.add_array(key, val)
    for name, q, qtype in tensors:
        w.add_tensor(name, q, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    side = {}
    for name, q, qtype in tensors:
        deq = gguf.quants.dequantize(q, qtype).astype(np.float32)
        side[name] = dict(type=qtype.name.lower(), ne=list(reversed(deq.shape)), fnv1a64_f32=fnv1a64(np.ascontiguousarray(deq).tobytes()),
                          first=[float(x) for x in deq.reshape(-1)[:4]])
    with open(path[:-5] + ".json", "w") as f:
        json.dump(dict(generator="tools/oracle/make_gguf_fixtures.py", gguf_py=gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0",
                       tensors=side), f, indent=1, sort_keys=True)
        f.write("\n")


def kquant_tensors():
    """Q4_K / Q6_K blocks (gguf-py 0.19.0 dequantizes them but cannot quantize): seeded random bytes
    with the f16 scales set to small finite values, plus F16 / F32 rows; no model, values only."""
    rng = np.random.default_rng(35)
    out = []
    for name, qt, rows, cols in (("q4_k", QT.Q4_K, 2, 512), ("q6_k", QT.Q6_K, 3, 256)):
        bsz, tsz = gguf.GGML_QUANT_SIZES[qt]
        raw = rng.integers(0, 256, size=(rows, cols // bsz, tsz), dtype=np.uint8)
        scales = rng.uniform(0.001, 0.05, size=(rows, cols // bsz, 2)).astype(np.float16).view(np.uint8).reshape(rows, cols // bsz, 4)
        if qt == QT.Q4_K:
            raw[:, :, 0:4] = scales          # f16 d, f16 dmin
        else:
            raw[:, :, tsz - 2:tsz] = scales[:, :, 0:2]  # f16 d at the end
        out.append((name, raw.reshape(rows, -1), qt))
    out.append(("f16", rng.standard_normal((2, 7)).astype(np.float16), QT.F16))
    out.append(("f32", rng.standard_normal((5,)).astype(np.float32), QT.F32))
    return out


FIXTURES = [
    # (file, model dir, output type, MTP block seed or None)
    ("hv-gt-hk.bf16.gguf", "hv-gt-hk", QT.BF16, None),
    ("hv-gt-hk.q8_0.gguf", "hv-gt-hk", QT.Q8_0, None),
    ("hv-gt-hk.q4_0.gguf", "hv-gt-hk", QT.Q4_0, 7),
    ("narrow8.q4_0.gguf", "narrow8", QT.Q4_0, None),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "gguf"))
    ap.add_argument("--fuzz-corpus", default=os.path.join(ROOT, "tests", "fuzz", "corpus", "fuzz_gguf"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for fname, model, qt, mtp in FIXTURES:
        meta, tensors = convert(os.path.join(MODELS, model), qt, mtp)
        path = os.path.join(a.out, fname)
        write(path, meta, tensors)
        print(f"{path}: {os.path.getsize(path)} bytes, {len(tensors)} tensors")
    path = os.path.join(a.out, "kquants.gguf")
    write(path, [("general.name", "str", "kquants")], kquant_tensors())
    print(f"{path}: {os.path.getsize(path)} bytes")
    # Fuzz seeds: the micro model of tests/fuzz (config + the fuzz_model seed weights) as GGUF.
    os.makedirs(a.fuzz_corpus, exist_ok=True)
    micro = os.path.join(ROOT, "tests", "fuzz", "micro")
    for fname, qt in (("micro.f32.gguf", QT.F32), ("micro.bf16.gguf", QT.BF16)):
        meta, tensors = convert(micro, qt, None, os.path.join(ROOT, "tests", "fuzz", "corpus", "fuzz_model", "micro.safetensors"), "micro")
        path = os.path.join(a.fuzz_corpus, fname)
        write(path, meta, tensors)
        os.remove(path[:-5] + ".json")
        print(f"{path}: {os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
