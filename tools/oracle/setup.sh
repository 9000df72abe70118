#!/bin/sh
# Make tools/oracle/.venv from tools/oracle/requirements.txt. Idempotent: does nothing when the venv
# exists and was built from the same requirements.txt (a checksum is kept in .venv/.q35-requirements).
#   PYTHON=python3.11 tools/oracle/setup.sh        choose the interpreter (default python3, >= 3.10)
#   PIP_EXTRA="--index-url URL" tools/oracle/setup.sh   extra pip arguments (e.g. a CPU-only torch index)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
req="$here/requirements.txt"
py=${PYTHON:-python3}
want=$(cksum < "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.q35-requirements" 2>/dev/null)" = "$want" ]; then
    echo "tools/oracle/.venv is up to date"
    exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install --quiet ${PIP_EXTRA:-} -r "$req"
"$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors, numpy"
echo "$want" > "$venv/.q35-requirements"
echo "tools/oracle/.venv ready: $("$venv/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
