#!/bin/sh
# Creates the onnxruntime venv that test/e2e/onnx_parity.py compares weft
# with:
#
#   test/e2e/ort_venv.sh [VENV_DIR]        (default: build/ort-venv)
#
# Debian's /usr/bin/python3 with --system-site-packages (its numpy and onnx),
# plus onnxruntime from PyPI (a ~28 MB wheel), pinned; numpy is held at
# Debian's version.
#
# Exit 0: the venv is ready (its python is printed on the last line); a
# second call is a fast no-op. Exit 3: SKIP, with the reason (no venv
# module, or PyPI unreachable). Exit 1: installed but does not run a model.
set -u
ORT=1.32.0
STAMP="weft ort-venv: onnxruntime==$ORT"

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${1:-$repo/build/ort-venv}
py=/usr/bin/python3

skip() { echo "SKIP: ort-venv: $*"; exit 3; }

ready() {
  [ -x "$venv/bin/python" ] && [ -f "$venv/.weft-ort-venv" ] &&
    [ "$(cat "$venv/.weft-ort-venv")" = "$STAMP" ]
}

if ready; then
  echo "ort-venv: ready (onnxruntime $ORT)"
  echo "$venv/bin/python"
  exit 0
fi

[ -x "$py" ] || skip "$py not found (Debian's python3)"
"$py" -c "import numpy, onnx" >/dev/null 2>&1 ||
  skip "Debian's python3-numpy / python3-onnx are not importable by $py (scripts/install-deps.sh installs them)"
"$py" -c "import venv, ensurepip" >/dev/null 2>&1 || skip "$py has no venv/ensurepip (apt-get install python3-venv)"

mkdir -p "$(dirname "$venv")"
# one installer at a time
if command -v flock >/dev/null 2>&1; then
  exec 9>"$venv.lock"
  flock 9
  if ready; then echo "ort-venv: ready"; echo "$venv/bin/python"; exit 0; fi
fi

echo "ort-venv: creating $venv (onnxruntime $ORT)"
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv" || skip "python3 -m venv failed"
cons="$venv/weft-constraints.txt"
printf 'numpy==%s\n' "$("$py" -c 'import numpy; print(numpy.__version__)')" >"$cons"
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q --timeout 30 --retries 1 \
     -c "$cons" "onnxruntime==$ORT"; then
  rm -rf "$venv"
  skip "pip could not install onnxruntime==$ORT (offline, or PyPI unreachable)"
fi
if ! "$venv/bin/python" - <<'PYEOF'
import numpy as np
import onnx
from onnx import TensorProto, helper
import onnxruntime as ort
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
assert list(s.run(None, {"x": np.array([-1, 2], np.float32)})[0]) == [0, 2]
print("ort-venv: onnxruntime", ort.__version__, "runs a model")
PYEOF
then
  echo "ort-venv: onnxruntime $ORT was installed but does not run a model"
  exit 1
fi
echo "$STAMP" >"$venv/.weft-ort-venv"
echo "$venv/bin/python"
