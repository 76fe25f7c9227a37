#!/usr/bin/env python3
"""Writes what a transformers version's own save_pretrained makes of each
published config (test/configs/<name>.v4.json):

    PY -m pip install 'transformers==4.57.6'   # no torch needed: configs only
    PY test/configs/resave.py v4-saved         # -> <name>.v4-saved.json
    PY -m pip install 'transformers==5.24.0'
    PY test/configs/resave.py v5               # -> <name>.v5.json

Each file is AutoConfig.from_pretrained(<dir with the published file>) then
save_pretrained(), the exact bytes transformers writes.  Run by hand when a
spelling changes; the outputs are committed.
"""
import glob
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("v4-saved", "v5"):
        sys.exit("usage: resave.py v4-saved|v5")
    tag = sys.argv[1]
    import transformers
    from transformers import AutoConfig
    major = int(transformers.__version__.split(".")[0])
    if (tag == "v5") != (major >= 5):
        sys.exit(f"{tag} needs transformers {'5' if tag == 'v5' else '4'}.x, found {transformers.__version__}")
    for src in sorted(glob.glob(os.path.join(HERE, "*.v4.json"))):
        name = os.path.basename(src)[:-len(".v4.json")]
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(src, os.path.join(d, "config.json"))
            cfg = AutoConfig.from_pretrained(d)
            out = os.path.join(d, "out")
            cfg.save_pretrained(out)
            shutil.copy(os.path.join(out, "config.json"), os.path.join(HERE, f"{name}.{tag}.json"))
        print(f"{name}.{tag}.json  ({type(cfg).__name__}, transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
