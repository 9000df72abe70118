#!/usr/bin/env python3
"""Vision fixture for q35: a small random Qwen3.5 checkpoint WITH a vision tower + transformers' outputs.

  make_vision_fixtures.py [--out tests/data/models/tiny-vision] [--work build/oracle]

Writes, deterministically (the checkpoint is built under --work; its weights are not committed: the seeded
generator rebuilds them bit for bit from synthetic.json, as tests/test_vision.c does):
  config.json, generation_config.json, synthetic.json (+ model.safetensors under --work)
      a Qwen3_5ForConditionalGeneration with the real layout and small dims (vision depth 2, hidden 32,
      2 heads, intermediate 64, patch 16, merge 2, an 8x8 learned position table so that the bilinear
      interpolation is exercised; text as tiny-vl with vocab 256), weights from the seeded generator
      (synth.py), image / vision_start / vision_end token ids inside the vocabulary.
  vision_reference.safetensors  (float32, recorded with transformers' own model in float32)
      pixels are not stored: pixel_values of image i are synth.generate_f32("pixels.<i>", n, seed, 0, 1)
      (uniform in [-1, 1), bit-identical to q35_synth_fill in C), shaped [grid_t*grid_h*grid_w][1536].
      image.<i>.grid          int32 [3]   (t, h, w)
      image.<i>.embeds        f32 [n_tokens][64]   model.visual(pixel_values, grid_thw).pooler_output
      prompt.<p>.ids          int32 [T]   token ids (text, vision_start, a run of image_pad, vision_end, ...)
      prompt.<p>.images       int32 [k]   indices of the images the prompt's image runs take, in order
      prompt.<p>.position_ids int32 [3][T] get_rope_index
      prompt.<p>.rope_delta   int32 [1]
      prompt.<p>.logits       f32 [T][V]  whole prompt, no cache
      prompt.<p>.greedy       int32 [GREEDY_N]  prefill with the cache, then one token at a time; positions
                              after the prompt by transformers' own rule (rope_deltas)
      prompt.<p>.greedy_margin f32 [GREEDY_N]
      cli.prompt_ids          int32 [T]   a prompt with ONE <|image_pad|> for cli_image.png (q35 generate --prompt-ids
                              expands it)
      cli.grid                int32 [3]
      cli.greedy              int32 [CLI_N] greedy continuation of that prompt, the image preprocessed by
                              transformers' Qwen2VLImageProcessorPil at exactly its size (96x64: no resampling)
      talker.prompt_ids       int32 [T]   tests/data/models/talker: the chat template rendered by transformers for
                              [{user: [image, "What is in the picture?"]}] and tokenized (one <|image_pad|>)
      talker.greedy           int32 [12]  its greedy answer with cli_image.png (talker's own random vision tower)
  cli_image.png               96x64 RGB, made here with PIL
The file is named vision_reference.safetensors (not reference.safetensors) so that the text parity test,
which reads every models/*/reference.safetensors, leaves it to tests/test_vision.c.
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
import make_fixtures as mf  # noqa: E402
import synth  # noqa: E402

SEED = 3510
GREEDY_N = 16
VOCAB = 256
IMAGE, VSTART, VEND = 250, 248, 249
L, F = mf.L, mf.F

TEXT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
            layer_types=[L, L, L, F], linear_num_key_heads=2, linear_num_value_heads=2,
            linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            rope_parameters=mf.rope([2, 1, 1]), max_position_embeddings=262144, tie_word_embeddings=True,
            hidden_act="silu", rms_norm_eps=1e-6, attention_bias=False, attention_dropout=0.0)
VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, in_channels=3, patch_size=16,
              temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=64,
              hidden_act="gelu_pytorch_tanh", deepstack_visual_indexes=[], out_hidden_size=64)

# (t, h, w) patch grids: smaller and larger than the 8x8 table, non-square both ways
GRIDS = [(1, 4, 6), (1, 6, 4), (1, 8, 8), (1, 12, 8), (1, 2, 2)]


def pixels(i, grid):
    t, h, w = grid
    n = t * h * w * 3 * 2 * 16 * 16
    return synth.generate_f32(f"pixels.{i}", n, SEED, 0.0, 1.0).reshape(t * h * w, 1536)


def n_tokens(grid):
    return grid[0] * grid[1] * grid[2] // 4


def prompts():
    rng = np.random.default_rng(7)
    text = lambda n: list(rng.integers(0, 240, size=n))  # ordinary ids, below the special ones
    run = lambda i: [VSTART] + [IMAGE] * n_tokens(GRIDS[i]) + [VEND]
    return [
        # one 4x6 image between text
        (text(5) + run(0) + text(4), [0]),
        # two images (8x8 then 6x4): their runs straddle chunk boundaries for most chunk sizes
        (text(3) + run(2) + text(2) + run(1) + text(3), [2, 1]),
        # ends in image tokens: the last partial chunk is all image tokens (24 = 3 chunks of 8)
        (text(5) + [VSTART] + [IMAGE] * n_tokens(GRIDS[3]), [3]),
        # a tiny 2x2 image (one token) first, then a non-square one
        ([VSTART, IMAGE, VEND] + text(6) + run(0) + text(1), [4, 0]),
    ]


def build(out):
    mf.torch_setup()
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    cfg = Qwen3_5Config(text_config=dict(TEXT), vision_config=dict(VISION), tie_word_embeddings=True,
                        image_token_id=IMAGE, vision_start_token_id=VSTART, vision_end_token_id=VEND,
                        video_token_id=251)
    model = Qwen3_5ForConditionalGeneration(cfg).eval()
    if os.path.isdir(out):
        shutil.rmtree(out)
    synth.write_checkpoint(model, out, SEED)


def record(out):
    torch = mf.torch_setup()
    import transformers

    model, arch, _ = mf.load_reference_model(out)
    mf.check_loaded_exactly(model, out)
    T = {}
    with torch.no_grad():
        for i, g in enumerate(GRIDS):
            pv = torch.from_numpy(pixels(i, g))
            grid = torch.tensor([g], dtype=torch.long)
            emb = model.model.visual(pv, grid_thw=grid).pooler_output
            T[f"image.{i}.grid"] = np.asarray(g, dtype=np.int32)
            T[f"image.{i}.embeds"] = np.ascontiguousarray(emb.float().numpy(), dtype=np.float32)
            print(f"image {i}: grid {g} -> {tuple(emb.shape)}, max |v| {float(emb.abs().max()):.3g}", flush=True)
        worst_margin = float("inf")
        for p, (ids, imgs) in enumerate(prompts()):
            ids = np.asarray(ids, dtype=np.int64)
            inp = torch.from_numpy(ids).view(1, -1)
            tt = (inp == IMAGE).to(torch.int32)
            pv = torch.from_numpy(np.concatenate([pixels(i, GRIDS[i]) for i in imgs], 0))
            grid = torch.tensor([GRIDS[i] for i in imgs], dtype=torch.long)
            kw = dict(pixel_values=pv, image_grid_thw=grid, mm_token_type_ids=tt)
            pos, delta = model.model.get_rope_index(inp, tt, image_grid_thw=grid)
            model.model.rope_deltas = None
            logits = model(input_ids=inp, **kw).logits[0].float().numpy()
            # greedy: prefill with the cache, then one token at a time; positions by transformers' rule
            model.model.rope_deltas = None
            cache = mf.new_cache(model)
            cur = model(input_ids=inp, past_key_values=cache, use_cache=True, **kw).logits[0, -1].float().numpy()
            toks, margins = [], []
            for s in range(GREEDY_N):
                tok = int(np.argmax(cur))
                top2 = np.partition(cur, -2)[-2:]
                margins.append(float(top2[1] - top2[0]))
                toks.append(tok)
                if s + 1 < GREEDY_N:
                    cur = model(input_ids=torch.tensor([[tok]]), past_key_values=cache,
                                use_cache=True).logits[0, -1].float().numpy()
            worst_margin = min(worst_margin, min(margins))
            T[f"prompt.{p}.ids"] = ids.astype(np.int32)
            T[f"prompt.{p}.images"] = np.asarray(imgs, dtype=np.int32)
            T[f"prompt.{p}.position_ids"] = np.ascontiguousarray(pos[:, 0, :].numpy(), dtype=np.int32)
            T[f"prompt.{p}.rope_delta"] = np.asarray([int(delta.view(-1)[0])], dtype=np.int32)
            T[f"prompt.{p}.logits"] = np.ascontiguousarray(logits, dtype=np.float32)
            T[f"prompt.{p}.greedy"] = np.asarray(toks, dtype=np.int32)
            T[f"prompt.{p}.greedy_margin"] = np.asarray(margins, dtype=np.float32)
            print(f"prompt {p}: T={len(ids)} images {imgs} rope delta {int(delta.view(-1)[0])} greedy {toks} "
                  f"min margin {min(margins):.3g}", flush=True)
    record_cli(out, T)
    record_talker(out, T)
    meta = {"format": "q35-vision-reference-1", "model": "tiny-vision", "architecture": arch, "dtype": "float32",
            "torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__,
            "pixel_seed": str(SEED), "greedy_n": str(GREEDY_N), "min_greedy_margin": repr(worst_margin)}
    synth.save_safetensors(T, os.path.join(out, "vision_reference.safetensors"), metadata=meta)
    if worst_margin < mf.MIN_MARGIN:
        raise SystemExit(f"a greedy step has a top-1/top-2 margin below {mf.MIN_MARGIN}; change SEED")


CLI_N = 8


def cli_image(out):
    """A 96x64 RGB picture (gradients and a disc), written with PIL; its preprocessed pixel_values and the
    greedy continuation of a prompt holding it."""
    import PIL.Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    w, h = 96, 64
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * x / (w - 1)
    g = 255 * y / (h - 1)
    b = np.where((x - 60) ** 2 + (y - 30) ** 2 < 18 ** 2, 230.0, 40.0)
    img = PIL.Image.fromarray(np.stack([r, g, b], -1).round().astype(np.uint8), "RGB")
    path = os.path.join(out, "cli_image.png")
    img.save(path)
    proc = Qwen2VLImageProcessorPil(size={"longest_edge": w * h, "shortest_edge": w * h}, patch_size=16,
                                    temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    px = proc(images=[PIL.Image.open(path)], return_tensors="np")
    return px["pixel_values"].astype(np.float32), [int(v) for v in px["image_grid_thw"][0]]


def record_cli(out, T):
    torch = mf.torch_setup()
    model, _, _ = mf.load_reference_model(out)
    pv, grid = cli_image(out)
    nt = grid[0] * grid[1] * grid[2] // 4
    rng = np.random.default_rng(11)
    pre, post = list(rng.integers(0, 240, size=4)), list(rng.integers(0, 240, size=3))
    collapsed = pre + [VSTART, IMAGE, VEND] + post
    ids = torch.tensor([pre + [VSTART] + [IMAGE] * nt + [VEND] + post])
    kw = dict(pixel_values=torch.from_numpy(pv), image_grid_thw=torch.tensor([grid]),
              mm_token_type_ids=(ids == IMAGE).to(torch.int32))
    toks = []
    with torch.no_grad():
        model.model.rope_deltas = None
        cache = mf.new_cache(model)
        cur = model(input_ids=ids, past_key_values=cache, use_cache=True, **kw).logits[0, -1]
        for s in range(CLI_N):
            toks.append(int(torch.argmax(cur)))
            top2 = torch.topk(cur, 2).values
            if float(top2[0] - top2[1]) < mf.MIN_MARGIN:
                raise SystemExit("cli prompt: greedy margin too small")
            cur = model(input_ids=torch.tensor([[toks[-1]]]), past_key_values=cache, use_cache=True).logits[0, -1]
    T["cli.prompt_ids"] = np.asarray(collapsed, dtype=np.int32)
    T["cli.grid"] = np.asarray(grid, dtype=np.int32)
    T["cli.greedy"] = np.asarray(toks, dtype=np.int32)
    print(f"cli image: grid {grid}, {nt} tokens, greedy {toks}", flush=True)


TALKER_Q = "What is in the picture?"


def record_talker(out, T):
    """tests/data/models/talker (a trained text model with a random tiny vision tower, a Qwen tokenizer and the
    chat template): the rendered, tokenized, expanded prompt of an image question and its greedy answer, as
    `q35 generate -m talker --image cli_image.png --image-size 96x64 -p QUESTION` must reproduce them."""
    torch = mf.torch_setup()
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    talker = os.path.join(ROOT, "tests", "data", "models", "talker")
    model, _, cfg = mf.load_reference_model(talker)
    pad = cfg["image_token_id"]
    pv, grid = cli_image(out)
    nt = grid[0] * grid[1] * grid[2] // 4
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": TALKER_Q}]}]
    text = AutoTokenizer.from_pretrained(talker).apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    collapsed = Tokenizer.from_file(os.path.join(talker, "tokenizer.json")).encode(text, add_special_tokens=False).ids
    if collapsed.count(pad) != 1:
        raise SystemExit("talker prompt: expected one image pad")
    i = collapsed.index(pad)
    ids = torch.tensor([collapsed[:i] + [pad] * nt + collapsed[i + 1:]])
    kw = dict(pixel_values=torch.from_numpy(pv), image_grid_thw=torch.tensor([grid]),
              mm_token_type_ids=(ids == pad).to(torch.int32))
    toks, margin = [], float("inf")
    with torch.no_grad():
        model.model.rope_deltas = None
        cache = mf.new_cache(model)
        cur = model(input_ids=ids, past_key_values=cache, use_cache=True, **kw).logits[0, -1]
        for s in range(12):
            toks.append(int(torch.argmax(cur)))
            top2 = torch.topk(cur, 2).values
            margin = min(margin, float(top2[0] - top2[1]))
            cur = model(input_ids=torch.tensor([[toks[-1]]]), past_key_values=cache, use_cache=True).logits[0, -1]
    if margin < mf.MIN_MARGIN:
        raise SystemExit("talker prompt: greedy margin too small")
    T["talker.prompt_ids"] = np.asarray(collapsed, dtype=np.int32)
    T["talker.greedy"] = np.asarray(toks, dtype=np.int32)
    print(f"talker image prompt: {len(collapsed)} tokens (+{nt - 1} image), greedy {toks}, min margin {margin:.3g}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "models", "tiny-vision"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "oracle"))
    a = ap.parse_args()
    work = os.path.join(os.path.abspath(a.work), "tiny-vision")
    build(work)
    record(work)
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    for f in ["config.json", "generation_config.json", "synthetic.json", "vision_reference.safetensors", "cli_image.png"]:
        shutil.copyfile(os.path.join(work, f), os.path.join(a.out, f))


if __name__ == "__main__":
    main()
