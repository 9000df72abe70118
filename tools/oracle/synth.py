#!/usr/bin/env python3
"""Synthetic Qwen3.5 weights, format v1 (docs/synthetic-weights.md), and checkpoint writing.

The generator is pure numpy with only the operations the doc allows (uint64 wrap-around integer ops,
one IEEE float32 rounding per step, bf16 round-to-nearest-even of the float32 bits), so q35's C
implementation reproduces it bit for bit.

CLI:
  synth.py checksums DIR              print name, dtype, shape, fnv1a64 for every tensor of DIR/*.safetensors
  synth.py verify DIR [--seed S]      check that DIR's tensors equal the generator's output (seed from
                                      DIR/synthetic.json unless given) and match synthetic.json
  synth.py selftest                   compare the numpy generator with a slow pure-Python one, print
                                      known-answer values (also listed in docs/fixtures.md)
"""
import argparse
import glob
import json
import math
import os
import struct
import sys

import numpy as np

FORMAT = 2
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
M64 = 0xFFFFFFFFFFFFFFFF
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
CHUNK = 1 << 20  # elements generated per numpy batch (bounds memory for the big tensors)


def fnv1a64(data: bytes) -> int:
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & M64
    return h


def fnv1a64_hex(data: bytes) -> str:
    return "%016x" % fnv1a64(data)


def rule(name: str, shape) -> tuple[str, float, float]:
    """(dtype, center, scale) for a tensor, by the table of docs/synthetic-weights.md (first match wins).

    Two rows are EXTENSIONS the doc does not (yet) state; they only apply to vision-tower tensors, which
    the doc's table does not cover (see docs/fixtures.md, "Generator gaps"):
      * a `.weight` with more than 2 dimensions (model.visual.patch_embed.proj.weight, a Conv3d
        [out, in, kt, kh, kw]): scale = float32(1/sqrt(prod(shape[1:]))), i.e. fan-in as for [out, in];
      * any other 1-D `.weight` (vision LayerNorm norm1/norm2): BF16, center 1, scale 0.1.
    """
    vision = name.startswith("model.visual.") or ".visual." in name
    if name.endswith("linear_attn.A_log"):
        return "F32", -2.0, 1.0
    if name.endswith("linear_attn.norm.weight"):
        return "F32", 1.0, 0.1
    if name.endswith("linear_attn.dt_bias"):
        return "BF16", 0.0, 1.0
    if name.endswith("linear_attn.conv1d.weight"):
        return "BF16", 0.0, 0.5
    if name.endswith("norm.weight") and not vision:
        return "BF16", 0.0, 0.1
    if name.endswith(".bias"):
        if not vision:
            raise ValueError(f"{name}: the generator defines .bias only for the vision tower")
        return "BF16", 0.0, 0.02
    if name.endswith(".weight") and len(shape) == 1:
        return "BF16", 1.0, 0.1
    if name.endswith(".weight") and len(shape) >= 2:
        fan_in = int(np.prod(shape[1:]))
        return "BF16", 0.0, float(np.float32(1.0 / math.sqrt(float(fan_in))))
    raise ValueError(f"{name} {list(shape)}: no generator rule")


def bf16_rne(v: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint16), round to nearest, ties to even (finite inputs)."""
    b = v.view(np.uint32)
    return ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def generate_f32(name: str, n: int, seed: int, center: float, scale: float) -> np.ndarray:
    """The float32 values v of the doc (before the bf16 rounding), flat, length n."""
    key = np.uint64((fnv1a64(name.encode("utf-8")) ^ seed) & M64)
    scale32 = np.float32(scale)
    center32 = np.float32(center)
    out = np.empty(n, dtype=np.float32)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        i1 = np.arange(start + 1, stop + 1, dtype=np.uint64)  # i + 1
        z = key + i1 * GOLDEN  # uint64 arrays wrap mod 2^64
        z = (z ^ (z >> np.uint64(30))) * MIX1
        z = (z ^ (z >> np.uint64(27))) * MIX2
        z = z ^ (z >> np.uint64(31))
        u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)  # exact
        r = np.float32(2.0) * u - np.float32(1.0)  # exact
        v = scale32 * r  # one float32 rounding
        if center != 0.0:
            v = v + center32  # one float32 rounding
        out[start:stop] = v
    return out


def generate(name: str, shape, seed: int, dtype: str | None = None) -> tuple[str, np.ndarray]:
    """(dtype, stored array): F32 -> float32 array, BF16 -> uint16 array of bf16 bits; both in `shape`."""
    rdtype, center, scale = rule(name, shape)
    if dtype is not None and dtype != rdtype:
        raise ValueError(f"{name}: stored as {dtype}, generator says {rdtype}")
    n = int(np.prod(shape)) if len(shape) else 1
    v = generate_f32(name, n, seed, center, scale)
    if rdtype == "BF16":
        v = bf16_rne(v)
    return rdtype, v.reshape(tuple(shape))


def stored_bytes(arr: np.ndarray) -> bytes:
    return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


# ----------------------------------------------------------------------------- safetensors reading (raw)

def read_safetensors_raw(path: str):
    """[(name, dtype, shape, raw bytes)] in the file's data order, and the __metadata__ dict."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        meta = header.pop("__metadata__", {})
        items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
        out = []
        for name, info in items:
            a, b = info["data_offsets"]
            f.seek(base + a)
            out.append((name, info["dtype"], list(info["shape"]), f.read(b - a)))
    return out, meta


def checkpoint_files(d: str) -> list[str]:
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(d, x) for x in files]
    return sorted(glob.glob(os.path.join(d, "model*.safetensors")))


def describe_checkpoint(d: str) -> list[dict]:
    """synthetic.json "tensors" entries for every tensor of the checkpoint, in file then data order."""
    rows = []
    for path in checkpoint_files(d):
        tensors, _ = read_safetensors_raw(path)
        for name, dt, shape, raw in tensors:
            rows.append({"name": name, "dtype": dt, "shape": shape, "fnv1a64": fnv1a64_hex(raw)})
    return rows


def verify_checkpoint(d: str, seed: int) -> list[dict]:
    """Check every tensor of d against the generator (bit exact); returns the synthetic.json rows."""
    rows = []
    for path in checkpoint_files(d):
        tensors, _ = read_safetensors_raw(path)
        for name, dt, shape, raw in tensors:
            _, arr = generate(name, shape, seed, dt)
            want = stored_bytes(arr)
            if want != raw:
                raise SystemExit(f"verify: {path}: {name} differs from the generator (seed {seed})")
            rows.append({"name": name, "dtype": dt, "shape": shape, "fnv1a64": fnv1a64_hex(raw)})
    return rows


_ST_DTYPES = {np.dtype("float32"): "F32", np.dtype("int32"): "I32", np.dtype("uint8"): "U8",
              np.dtype("uint16"): "BF16", np.dtype("float64"): "F64", np.dtype("int64"): "I64"}


def save_safetensors(tensors: dict, path: str, metadata: dict | None = None) -> None:
    """Write a safetensors file with a byte-for-byte reproducible header (safetensors' own writer keeps
    __metadata__ in a hash map, so its key order changes from run to run). Tensors are laid out in
    insertion order, the 1-byte ones last, so every 4-byte tensor starts 4-byte aligned; the header is
    padded with spaces to a multiple of 8. uint16 arrays are written as BF16 bits."""
    order = [k for k, v in tensors.items() if v.dtype.itemsize >= 4] + \
            [k for k, v in tensors.items() if v.dtype.itemsize < 4]
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for k in order:
        a = np.ascontiguousarray(tensors[k])
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[k] = {"dtype": _ST_DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- writing a checkpoint with HF

def fill_model(model, seed: int) -> None:
    """Replace every parameter by the generator's values for its state_dict name, in the stored dtype
    (BF16, or F32 for A_log / linear_attn.norm.weight), so save_pretrained writes them unchanged."""
    import torch

    for name, p in model.named_parameters():  # tied parameters appear once, under the embedding's name
        dt, arr = generate(name, list(p.shape), seed)
        if dt == "BF16":
            t = torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(arr.copy())
        p.data = t  # buffers are non-persistent (rotary inv_freq) and not saved


def write_checkpoint(model, out_dir: str, seed: int) -> list[dict]:
    """fill_model + save_pretrained + a bit-exact check of the written file + synthetic.json."""
    fill_model(model, seed)
    model.config.dtype = "bfloat16"
    model.save_pretrained(out_dir)
    rows = verify_checkpoint(out_dir, seed)
    written = {r["name"] for r in rows}
    expected = {n for n, _ in model.named_parameters()}
    if written != expected:
        raise SystemExit(f"write_checkpoint: saved names differ from parameter names: "
                         f"{sorted(written ^ expected)[:10]}")
    write_synthetic_json(out_dir, seed, rows)
    return rows


def write_synthetic_json(out_dir: str, seed: int, rows: list[dict]) -> None:
    lines = ",\n".join("  " + json.dumps({k: r[k] for k in ("name", "dtype", "shape", "fnv1a64")}) for r in rows)
    with open(os.path.join(out_dir, "synthetic.json"), "w") as f:
        f.write('{"format": %d, "seed": %d, "tensors": [\n%s\n]}\n' % (FORMAT, seed, lines))


def _slow_values(name: str, n: int, seed: int, center: float, scale: float) -> list[float]:
    """The doc's pseudo-code with Python ints and struct-rounded float32 (independent of numpy)."""
    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
    key = fnv1a64(name.encode("utf-8")) ^ seed
    out = []
    for i in range(n):
        z = (key + (i + 1) * 0x9E3779B97F4A7C15) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z = z ^ (z >> 31)
        r = 2.0 * (float(z >> 40) * 2.0 ** -24) - 1.0
        v = f32(f32(scale) * r)  # the double product of two float32 is exact; one rounding to float32
        if center != 0.0:
            v = f32(v + f32(center))
        out.append(v)
    return out


KNOWN_ANSWER_CASES = [
    ("model.language_model.layers.0.linear_attn.A_log", [4], 3501),
    ("model.language_model.layers.0.linear_attn.norm.weight", [4], 3501),
    ("model.language_model.embed_tokens.weight", [2, 2], 3501),
    ("model.layers.3.self_attn.q_proj.weight", [2, 96], 3502),
]


def selftest() -> None:
    for name, shape, seed in KNOWN_ANSWER_CASES + [("x.mlp.up_proj.weight", [33, 77], 2**64 - 1)]:
        dt, c, s = rule(name, shape)
        n = int(np.prod(shape))
        fast = generate_f32(name, n, seed, c, s)
        if fast.tobytes() != np.asarray(_slow_values(name, n, seed, c, s), dtype=np.float32).tobytes():
            raise SystemExit(f"selftest: numpy generator differs from the reference for {name}")
    v = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 2 ** -8 + 2 ** -9, 1.0 + 3 * 2 ** -8, -3.3], dtype=np.float32)
    if bf16_rne(v).tolist() != [0x3F80, 0x3F80, 0x3F81, 0x3F82, 0xC053]:
        raise SystemExit("selftest: bf16 rounding")
    if fnv1a64(b"a") != 0xAF63DC4C8601EC8C:
        raise SystemExit("selftest: fnv1a64")
    for name, shape, seed in KNOWN_ANSWER_CASES:
        dt, arr = generate(name, shape, seed)
        flat = arr.reshape(-1)[:4]
        vals = ["0x%04x" % x for x in flat] if dt == "BF16" else ["0x%08x" % x for x in flat.view(np.uint32)]
        print(f"{name} seed {seed} {dt} {shape}: key 0x{(fnv1a64(name.encode()) ^ seed) & M64:016x} "
              f"first stored values {' '.join(vals)}")
    print("selftest ok")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("checksums")
    c.add_argument("dir")
    v = sub.add_parser("verify")
    v.add_argument("dir")
    v.add_argument("--seed", type=int)
    sub.add_parser("selftest")
    a = ap.parse_args(argv)
    if a.cmd == "selftest":
        selftest()
    elif a.cmd == "checksums":
        for r in describe_checkpoint(a.dir):
            print(r["name"], r["dtype"], r["shape"], r["fnv1a64"])
    else:
        sj = os.path.join(a.dir, "synthetic.json")
        meta = json.load(open(sj)) if os.path.exists(sj) else None
        seed = a.seed if a.seed is not None else (meta or {}).get("seed")
        if seed is None:
            raise SystemExit("verify: no --seed and no synthetic.json")
        rows = verify_checkpoint(a.dir, seed)
        if meta is not None and meta["tensors"] != rows:
            raise SystemExit("verify: synthetic.json does not match the checkpoint")
        print(f"ok: {len(rows)} tensors equal the generator's output for seed {seed}")


if __name__ == "__main__":
    main()
