#!/usr/bin/env python3
"""Copy a GGUF file, adding `tokenizer.ggml.model = "none"` and `<arch>.vocab_size`, so that
llama.cpp's llama-bench loads a checkpoint that has no tokenizer (q35's synthetic checkpoints).

    python3 tools/bench/gguf_novocab.py IN.gguf OUT.gguf        (needs: pip install gguf==0.19.0)

Used for the same-file comparison with llama.cpp in docs/speed.md."""
import sys

import gguf


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            sub = f.types[1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [bytes(f.parts[i]).decode() for i in f.data]
            else:
                vals = [f.parts[i].tolist()[0] for i in f.data]
            w.add_array(name, vals)
        elif t == gguf.GGUFValueType.STRING:
            w.add_string(name, bytes(f.parts[-1]).decode())
        else:
            w.add_key_value(name, f.parts[-1].tolist()[0], t)
    if "tokenizer.ggml.model" not in r.fields:
        w.add_string("tokenizer.ggml.model", "none")
    embd = [t for t in r.tensors if t.name == "token_embd.weight"]
    if not embd:
        sys.exit(f"{src}: no token_embd.weight")
    if f"{arch}.vocab_size" not in r.fields:
        w.add_uint32(f"{arch}.vocab_size", int(embd[0].shape[1]))
    for t in r.tensors:
        w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in r.tensors:
        w.write_tensor_data(t.data)
    w.close()


if __name__ == "__main__":
    main()
