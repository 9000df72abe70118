#!/usr/bin/env python3
"""Split DIR/model.safetensors into shards of at most --max-mb MB, named and indexed the way
transformers' save_pretrained(max_shard_size=...) does (model-0000i-of-0000n.safetensors and
model.safetensors.index.json). Tensor bytes, dtypes, shapes and the header's __metadata__ are
copied as they are, so every fixture computed from the single file still holds.
Pure Python (no torch): the committed talker checkpoint stays under the repository's 8 MiB
per-file limit this way.

usage: shard_safetensors.py DIR [--max-mb 5]
"""
import argparse
import json
import os
import struct


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    return header, meta, data


def write(path, tensors, meta):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off = {}, 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, b in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for t in tensors:
            f.write(t[3])
    os.replace(path + ".tmp", path)


def shard(dir, max_mb=5.0):
    src = os.path.join(dir, "model.safetensors")
    header, meta, data = read(src)
    limit = int(max_mb * 1e6)
    shards, cur, size, total = [], [], 0, 0
    for name in sorted(header, key=lambda k: header[k]["data_offsets"][0]):
        e = header[name]
        b = data[e["data_offsets"][0]:e["data_offsets"][1]]
        if cur and size + len(b) > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, e["dtype"], e["shape"], b))
        size += len(b)
        total += len(b)
    shards.append(cur)
    n = len(shards)
    weight_map = {}
    for i, sh in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        write(os.path.join(dir, fname), sh, meta)
        for t in sh:
            weight_map[t[0]] = fname
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    os.remove(src)
    print(f"{src}: {len(header)} tensors, {total} bytes -> {n} shards of at most {limit} bytes")


def shard_files(dir):
    """The shard paths of a checkpoint directory, single file or indexed."""
    p = os.path.join(dir, "model.safetensors.index.json")
    if not os.path.exists(p):
        return [os.path.join(dir, "model.safetensors")]
    return [os.path.join(dir, f) for f in sorted(set(json.load(open(p))["weight_map"].values()))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--max-mb", type=float, default=5.0)
    a = ap.parse_args()
    shard(a.dir, a.max_mb)


if __name__ == "__main__":
    main()
