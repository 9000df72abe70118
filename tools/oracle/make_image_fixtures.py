#!/usr/bin/env python3
"""Image fixtures for tests/test_image.c: small PNG/JPEG files made with PIL, and what the Hugging Face
reference makes of them.

    python tools/oracle/make_image_fixtures.py [--out tests/data/images]

Writes into OUT:
  *.png, *.jpg               the test images (deterministic synthetic content, seed 0)
  preprocessor_config.json   a small test config (Qwen3.5 values but min/max pixels 1024/4096)
  reference.safetensors.gz   gzip of a safetensors file with, for each image FILE (name less extension)
  and each case NAME:
      FILE.rgb            U8  [h][w][3]  the decoded image as the reference sees it: PIL.Image.open,
                                         ImageOps.exif_transpose (what transformers' load_image does),
                                         then the image processor's convert_to_rgb (alpha composited
                                         over white)
      NAME.pixel_values   F32 [patches][1536] Qwen2VLImageProcessorPil output (the PIL backend)
      NAME.grid           I64 [3]        image_grid_thw
    cases whose pixel_values would be large (the real-config case) store NAME.rows (I64 [k]) and
    NAME.pixel_rows F32 [k][1536] (a sample of rows) and NAME.pixel_sum F64 [1] instead.
  cases.json                 per case: file, config ("test" or "real"), options (fixed size, max tokens)

The reference processor is transformers' Qwen2VLImageProcessorPil (backend="pil"): the class
AutoImageProcessor picks for Qwen3.5 when torchvision is not installed (as in this venv); with torchvision
it picks the torchvision backend, whose uint8 antialiased bicubic follows the same PIL algorithm.
"""
import argparse
import gzip
import io
import json
import os
import struct
import zlib

import numpy as np
import PIL
import PIL.Image
import PIL.ImageOps
import safetensors.numpy
import transformers
from transformers.image_transforms import resize as np_resize
from transformers.image_utils import PILImageResampling, ChannelDimension
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

REAL_CONFIG = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast",
}
TEST_CONFIG = dict(REAL_CONFIG, size={"longest_edge": 4096, "shortest_edge": 1024})

rng = np.random.default_rng(0)
# 8-bit RGB PNGs decode to their stored samples; their pixel_values check them (no FILE.rgb, to stay small).
PLAIN_RGB_PNG = {"rgb_97x61.png", "rgb_160x120.png", "rgb_40x25.png", "tall_33x240.png"}
# Cases whose pixel_values are stored (the others are checked through their decoded RGB, which feeds
# the same preprocessing; this keeps the fixture small).
PIXELS = {"rgb_97x61", "rgb_40x25", "tall_33x240", "fixed_64x32", "max_tokens_4", "palette_trns_64x48",
          "rgba_120x90", "baseline_120x80", "exif6_48x32", "gray_66x99"}


def scene(w, h, channels=3, noise=2.0):
    """Smooth gradients + a few sharp edges + noise: every resampler difference shows."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    out = []
    for c in range(channels):
        f = 127 + 100 * np.sin(x / (3 + 2 * c) + c) * np.cos(y / (4 + c))
        f += 60 * ((x // 7 + y // 5 + c) % 2) - 30
        f += rng.normal(0, noise, size=(h, w)) if noise else 0
        out.append(f)
    return np.clip(np.stack(out, -1), 0, 255).round().astype(np.uint8)


def exif_bytes(orientation):
    ex = PIL.Image.Exif()
    ex[0x0112] = orientation
    return ex.tobytes()


def write_png_raw(path, w, h, color_type, bit_depth, raw_rows, extra_chunks=b""):
    """A PNG written by hand (filter 0), for 16-bit gray whose PIL writer would need mode I;16."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    data = b"".join(b"\x00" + r for r in raw_rows)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0))
                + extra_chunks + chunk(b"IDAT", zlib.compress(data, 9)) + chunk(b"IEND", b""))


def make_images(out):
    """Returns [(name, file, config, options)]."""
    cases = []

    def add(name, file, config="test", **opts):
        cases.append((name, file, config, opts))

    def save(img, file, **kw):
        img.save(os.path.join(out, file), **kw)

    save(PIL.Image.fromarray(scene(97, 61)), "rgb_97x61.png"); add("rgb_97x61", "rgb_97x61.png")
    save(PIL.Image.fromarray(scene(160, 120)), "rgb_160x120.png"); add("rgb_160x120", "rgb_160x120.png")
    add("fixed_64x32", "rgb_160x120.png", fixed=[64, 32])
    add("max_tokens_4", "rgb_160x120.png", max_tokens=4)
    save(PIL.Image.fromarray(scene(40, 25)), "rgb_40x25.png"); add("rgb_40x25", "rgb_40x25.png")
    save(PIL.Image.fromarray(scene(33, 240)), "tall_33x240.png"); add("tall_33x240", "tall_33x240.png")
    save(PIL.Image.fromarray(scene(80, 80, 1)[:, :, 0], "L"), "gray_80x80.png"); add("gray_80x80", "gray_80x80.png")
    la = scene(70, 50, 2); la[:, :, 1] = np.linspace(0, 255, 70).round().astype(np.uint8)[None, :]
    save(PIL.Image.fromarray(la, "LA"), "gray_alpha_70x50.png"); add("gray_alpha_70x50", "gray_alpha_70x50.png")
    pal = PIL.Image.fromarray(scene(64, 48)).quantize(colors=37, method=PIL.Image.Quantize.MEDIANCUT, dither=PIL.Image.Dither.NONE)
    save(pal, "palette_64x48.png"); add("palette_64x48", "palette_64x48.png")
    trns = bytes((i * 7) % 256 for i in range(37))
    save(pal, "palette_trns_64x48.png", transparency=trns); add("palette_trns_64x48", "palette_trns_64x48.png")
    rgba = scene(120, 90, 4); rgba[:, :, 3] = np.clip(np.arange(120)[None, :] * 2.2 + np.arange(90)[:, None] - 40, 0, 255).astype(np.uint8)
    save(PIL.Image.fromarray(rgba, "RGBA"), "rgba_120x90.png"); add("rgba_120x90", "rgba_120x90.png")
    # Every alpha (x) against 16 colour values (y): the compositing rule, exhaustively for alpha.
    all_alpha = np.zeros((16, 256, 4), np.uint8)
    all_alpha[:, :, 3] = np.arange(256)[None, :]
    for c in range(3):
        all_alpha[:, :, c] = (np.arange(16)[:, None] * 17 + c * 85 + np.arange(256)[None, :] * 3) % 256
    save(PIL.Image.fromarray(all_alpha, "RGBA"), "rgba_all_alpha.png"); add("rgba_all_alpha", "rgba_all_alpha.png")
    rgb16 = (scene(50, 90).astype(np.uint16) * 257 + rng.integers(0, 256, size=(90, 50, 3))).astype(">u2")
    write_png_raw(os.path.join(out, "rgb16_50x90.png"), 50, 90, 2, 16, [r.tobytes() for r in rgb16])
    add("rgb16_50x90", "rgb16_50x90.png")
    # Decode-only cases (checked through NAME.rgb): 1-bit, gray + tRNS, RGB + tRNS, PNG with an eXIf chunk.
    save(PIL.Image.fromarray(scene(40, 30, 1)[:, :, 0] > 127), "bw_40x30.png"); add("bw_40x30", "bw_40x30.png")
    g = scene(40, 30, 1)[:, :, 0]; g[::3, ::2] = 77
    save(PIL.Image.fromarray(g, "L"), "gray_trns_40x30.png", transparency=77); add("gray_trns_40x30", "gray_trns_40x30.png")
    c = scene(40, 30); c[1::4, ::3] = (10, 200, 30)
    save(PIL.Image.fromarray(c), "rgb_trns_40x30.png", transparency=(10, 200, 30)); add("rgb_trns_40x30", "rgb_trns_40x30.png")
    save(PIL.Image.fromarray(scene(48, 32)), "exif6png_48x32.png", exif=exif_bytes(6)); add("exif6png_48x32", "exif6png_48x32.png")
    # 16-bit grayscale: PIL clips its I;16 values to 255 when converting to RGB; q35 keeps the high byte
    # like every other 16-bit PNG (NAME.high_byte holds that expectation; this case is not a reference).
    g16 = (np.arange(40)[None, :] * 1500 + np.arange(30)[:, None] * 97).astype(">u2")
    write_png_raw(os.path.join(out, "gray16_40x30.png"), 40, 30, 0, 16, [r.tobytes() for r in g16])
    save(PIL.Image.fromarray(scene(120, 80)), "baseline_120x80.jpg", quality=90); add("baseline_120x80", "baseline_120x80.jpg")
    save(PIL.Image.fromarray(scene(99, 61)), "progressive_99x61.jpg", quality=85, progressive=True)
    add("progressive_99x61", "progressive_99x61.jpg")
    save(PIL.Image.fromarray(scene(90, 70)), "subsampling444_90x70.jpg", quality=92, subsampling=0)
    add("subsampling444_90x70", "subsampling444_90x70.jpg")
    save(PIL.Image.fromarray(scene(66, 99, 1)[:, :, 0], "L"), "gray_66x99.jpg", quality=90); add("gray_66x99", "gray_66x99.jpg")
    save(PIL.Image.fromarray(scene(72, 40, 4), "CMYK"), "cmyk_72x40.jpg", quality=90); add("cmyk_72x40", "cmyk_72x40.jpg")
    base = PIL.Image.fromarray(scene(48, 32))
    for o in range(1, 9):
        save(base, f"exif{o}_48x32.jpg", quality=90, exif=exif_bytes(o)); add(f"exif{o}_48x32", f"exif{o}_48x32.jpg")
    save(PIL.Image.fromarray(scene(520, 360, noise=0)), "real_520x360.jpg", quality=70); add("real_520x360", "real_520x360.jpg", config="real")
    return cases


def reference_rgb(path):
    img = PIL.Image.open(path)
    img = PIL.ImageOps.exif_transpose(img)            # transformers.image_utils.load_image does this
    return transformers.image_transforms.convert_to_rgb(img, return_numpy=True)  # the processor's do_convert_rgb


def processor(config, max_pixels=None):
    kw = {k: v for k, v in config.items() if k not in ("processor_class", "image_processor_type")}
    if max_pixels is not None:
        kw["size"] = {"longest_edge": max_pixels, "shortest_edge": min(max_pixels, kw["size"]["shortest_edge"])}
    return Qwen2VLImageProcessorPil(**kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/images")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        if f.endswith((".png", ".jpg")):
            os.remove(os.path.join(a.out, f))
    cases = make_images(a.out)
    tensors, meta = {}, []
    for name, file, config_name, opts in cases:
        config = TEST_CONFIG if config_name == "test" else REAL_CONFIG
        rgb = reference_rgb(os.path.join(a.out, file))
        factor = config["patch_size"] * config["merge_size"]
        if "fixed" in opts:      # the fixed-size profile: resize to exactly W x H, then the processor (no-op resize)
            w, h = opts["fixed"]
            chw = np_resize(np.moveaxis(rgb, -1, 0), (h, w), resample=PILImageResampling.BICUBIC,
                            data_format=ChannelDimension.FIRST, input_data_format=ChannelDimension.FIRST)
            rgb_in = np.ascontiguousarray(np.moveaxis(chw, 0, -1))
            proc = processor(config, max_pixels=w * h)
        elif "max_tokens" in opts:  # at most N LLM tokens: max_pixels = N * factor^2
            rgb_in = rgb
            proc = processor(config, max_pixels=min(config["size"]["longest_edge"], opts["max_tokens"] * factor * factor))
        else:
            rgb_in = rgb
            proc = processor(config)
        out = proc(images=[PIL.Image.fromarray(rgb_in)], return_tensors="np")
        pv = np.asarray(out["pixel_values"], dtype=np.float32)
        grid = np.asarray(out["image_grid_thw"], dtype=np.int64).reshape(3)
        if "fixed" in opts:
            assert grid[1] * config["patch_size"] == opts["fixed"][1] and grid[2] * config["patch_size"] == opts["fixed"][0]
        tensors[f"{name}.grid"] = grid
        if config_name == "test":
            if file not in PLAIN_RGB_PNG:
                tensors[f"{os.path.splitext(file)[0]}.rgb"] = np.ascontiguousarray(rgb)
            if name in PIXELS:
                tensors[f"{name}.pixel_values"] = np.ascontiguousarray(pv)
        else:
            rows = np.unique(np.linspace(0, pv.shape[0] - 1, 12).round().astype(np.int64))
            tensors[f"{name}.rows"] = rows
            tensors[f"{name}.pixel_rows"] = np.ascontiguousarray(pv[rows])
            tensors[f"{name}.pixel_sum"] = np.array([pv.astype(np.float64).sum()], dtype=np.float64)
        e = {"name": name, "file": file, "config": config_name}
        e.update(opts)
        meta.append(e)
        print(f"{name:24s} {file:28s} {config_name} grid {grid.tolist()} pixel_values {list(pv.shape)}")
    g16 = (np.arange(40)[None, :] * 1500 + np.arange(30)[:, None] * 97).astype(np.uint16)
    tensors["gray16_40x30.high_byte"] = np.ascontiguousarray((g16 >> 8).astype(np.uint8))
    md = {"transformers": transformers.__version__, "pillow": PIL.__version__, "numpy": np.__version__,
          "processor": "Qwen2VLImageProcessorPil"}
    blob = safetensors.numpy.save(tensors, metadata=md)
    with gzip.GzipFile(os.path.join(a.out, "reference.safetensors.gz"), "wb", compresslevel=9, mtime=0) as f:
        f.write(blob)
    with open(os.path.join(a.out, "cases.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    with open(os.path.join(a.out, "preprocessor_config.json"), "w") as f:
        json.dump(TEST_CONFIG, f, indent=2)
        f.write("\n")
    print(f"reference.safetensors: {len(blob)} bytes, gzip {os.path.getsize(os.path.join(a.out, 'reference.safetensors.gz'))}")


if __name__ == "__main__":
    main()
