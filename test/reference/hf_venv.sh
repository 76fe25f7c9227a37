#!/bin/sh
# Creates the Hugging Face transformers venv that test/reference/hf_reference.py
# compares weft with:
#
#   test/reference/hf_venv.sh [VENV_DIR]        (default: build/hf-venv)
#
# Debian's /usr/bin/python3 with --system-site-packages, so it uses Debian's
# python3-torch 1.13 and python3-numpy; transformers is pinned to the newest
# release that still runs its models on torch 1.13 (4.50 imports
# torch.distributed.tensor, a torch 2.x module; 4.52+ disables torch < 2.1).
# PyPI's torch is never installed: a constraint file forbids it, and numpy is
# held at Debian's version.
#
# Exit 0: the venv is ready (its python is printed on the last line); a
# second call is a fast no-op.  Exit 3: SKIP, with the reason (no Debian
# torch, no venv module, or PyPI unreachable).  Exit 1: the venv was
# installed but does not work.
set -u
TRANSFORMERS=4.49.0
PINS="transformers==$TRANSFORMERS tokenizers==0.21.4 huggingface-hub==0.36.2 safetensors==0.8.0"
STAMP="weft hf-venv: $PINS"

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${1:-$repo/build/hf-venv}
py=/usr/bin/python3

skip() { echo "SKIP: hf-venv: $*"; exit 3; }

ready() {
  [ -x "$venv/bin/python" ] && [ -f "$venv/.weft-hf-venv" ] &&
    [ "$(cat "$venv/.weft-hf-venv")" = "$STAMP" ] &&
    "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('transformers') != '$TRANSFORMERS')" \
      >/dev/null 2>&1
}

if ready; then
  echo "hf-venv: ready (transformers $TRANSFORMERS over Debian's torch)"
  echo "$venv/bin/python"
  exit 0
fi

[ -x "$py" ] || skip "$py not found (Debian's python3)"
"$py" -c "import torch, numpy" >/dev/null 2>&1 ||
  skip "Debian's python3-torch / python3-numpy are not importable by $py (scripts/install-deps.sh installs them)"
"$py" -c "import venv, ensurepip" >/dev/null 2>&1 || skip "$py has no venv/ensurepip (apt-get install python3-venv)"

mkdir -p "$(dirname "$venv")"
# one installer at a time
if command -v flock >/dev/null 2>&1; then
  exec 9>"$venv.lock"
  flock 9
  if ready; then echo "hf-venv: ready"; echo "$venv/bin/python"; exit 0; fi
fi

echo "hf-venv: creating $venv (transformers $TRANSFORMERS over Debian's torch $("$py" -c 'import torch; print(torch.__version__)'))"
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv" || skip "python3 -m venv failed"
numpy_version=$("$py" -c 'import numpy; print(numpy.__version__)')
cons="$venv/weft-constraints.txt"
# torch: never from PyPI (an impossible version makes pip fail instead of downloading it)
printf 'torch==0.0.0+never-from-pypi\nnumpy==%s\n' "$numpy_version" >"$cons"
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q --timeout 30 --retries 1 \
     -c "$cons" $PINS; then
  rm -rf "$venv"
  skip "pip could not install $PINS (offline, or PyPI unreachable)"
fi
torch_file=$("$venv/bin/python" -c 'import torch; print(torch.__file__)' 2>/dev/null)
case "$torch_file" in
  /usr/lib/python3/dist-packages/*) ;;
  *) echo "hf-venv: torch does not come from Debian ($torch_file)"; exit 1 ;;
esac
if ! "$venv/bin/python" - <<'EOF'
import warnings
warnings.filterwarnings("ignore")
import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers import MistralForCausalLM, Qwen2ForCausalLM  # noqa: F401
x = torch.randint(0, 64, (1, 8))
for cfg, cls in ((GPT2Config(vocab_size=64, n_embd=16, n_head=2, n_layer=1, n_positions=16), GPT2LMHeadModel),
                 (LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                              num_attention_heads=2), LlamaForCausalLM)):
    m = cls._from_config(cfg, attn_implementation="eager", torch_dtype=torch.float64)
    m(input_ids=x).logits.sum().backward()
print("hf-venv: transformers", transformers.__version__, "runs GPT-2 and Llama on torch", torch.__version__)
EOF
then
  echo "hf-venv: transformers $TRANSFORMERS was installed but does not run on this torch"
  exit 1
fi
echo "$STAMP" >"$venv/.weft-hf-venv"
echo "$venv/bin/python"
