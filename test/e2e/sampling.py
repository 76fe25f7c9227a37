"""--data's sampling modes train reproducibly and resume bit-identically.

  sampling.py BIN_DIR DATA WORKDIR

For gpt-tiny (f64) and each of --sampling random and shuffled:
  1. 6 steps without a break, and 3 steps saved (--save-every 3) then
     --resume to 6: the resumed steps' losses equal the uninterrupted run's,
     digit for digit;
  2. dp=2 reads the same windows as one rank (equal losses);
  3. another --data-seed draws other windows (the losses differ), and
     --resume with another --sampling or --data-seed is refused by name.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch  # noqa: E402

BIN, DATA, WORK = sys.argv[1:4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def compile_(tag, flags=()):
    prog = f"{WORK}/{tag}.weft"
    subprocess.run([f"{BIN}/weft-compile", "gpt-tiny", "--batch", "4", "--seq", "32",
                    "--dtype", "f64", "--quiet", "-o", prog] + list(flags), check=True)
    return prog


def losses(prog, tag, flags, ranks=1, check=True):
    metrics = f"{WORK}/{tag}.jsonl"
    r = subprocess.run(launch(ranks) + [f"{BIN}/weft-run", prog, "--data", DATA,
                                        "--threads", "1", "--quiet", "--metrics", metrics]
                       + flags, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"FAIL: {tag}: {r.stdout[-400:]}{r.stderr[-400:]}")
    if r.returncode != 0:
        return None, r.stderr + r.stdout
    return [json.loads(line)["loss"] for line in open(metrics)], ""


one, two = compile_("one"), compile_("dp2", ["--mesh", "dp=2"])
for mode in ("random", "shuffled"):
    draw = ["--sampling", mode, "--data-seed", "5"]
    full, _ = losses(one, f"{mode}-full", draw + ["--steps", "6"])
    ckpt = f"{WORK}/{mode}-ckpt"
    first, _ = losses(one, f"{mode}-first", draw + ["--steps", "3", "--save-every", "3",
                                                    "--checkpoint-dir", ckpt])
    resumed, _ = losses(one, f"{mode}-resumed", draw + ["--steps", "6", "--resume", ckpt])
    same = first == full[:3] and resumed == full[3:]
    print(f"{mode}: resumed at step 3, steps 4-6 {'equal' if same else 'DIFFER from'} "
          f"the uninterrupted run's")
    if not same:
        failures.append(f"{mode}: {first} + {resumed} vs {full}")
    dp, _ = losses(two, f"{mode}-dp2", draw + ["--steps", "6"], ranks=2)
    print(f"{mode}: dp=2 {'reads' if dp == full else 'DOES NOT read'} one rank's windows")
    if dp != full:
        failures.append(f"{mode}: dp=2 {dp} vs one rank {full}")
    other, _ = losses(one, f"{mode}-seed6", ["--sampling", mode, "--data-seed", "6",
                                             "--steps", "6"])
    print(f"{mode}: another --data-seed {'draws other windows' if other != full else 'DRAWS THE SAME'}")
    if other == full:
        failures.append(f"{mode}: --data-seed 6 trains like 5")
    _, err = losses(one, f"{mode}-wrong", ["--sampling", mode, "--data-seed", "6",
                                           "--steps", "6", "--resume", ckpt], check=False)
    line = next((l for l in err.splitlines() if "error" in l), "")
    print(f"{mode}: resumed with another seed: {line}")
    if "would not see the tokens" not in err:
        failures.append(f"{mode}: a resume with another seed was not refused: {err[-300:]}")
if failures:
    sys.exit("FAIL:\n  " + "\n  ".join(failures))
print("PASS: sampling")
