#!/usr/bin/python3
"""Prints what weft-compile makes of each published config in test/configs/:
"accepted  <file>  <parameters>" or "refused   <file>  <the message>".
usage: published_configs.py BIN_DIR CONFIG_DIR"""
import os
import subprocess
import sys

bin_dir, config_dir = sys.argv[1:3]
for name in sorted(os.listdir(config_dir)):
    if not name.endswith(".json"):
        continue
    path = os.path.join(config_dir, name)
    r = subprocess.run([os.path.join(bin_dir, "weft-compile"), path, "--batch", "1",
                        "--seq", "16", "--emit-mlir=forward"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        print(f"accepted  {name}  {r.stdout.count('weft.param')} parameters")
    elif r.returncode == 1 and "error:" in r.stderr:
        message = r.stderr.strip().splitlines()[0]
        print(f"refused   {name}  {message[message.index('error:'):]}")
    else:
        print(f"CRASHED   {name}  exit {r.returncode}: {r.stderr[-300:]}")
