#!/usr/bin/python3
"""Facts the docs state that the code decides, checked against the code:

  - README.md is a guide of at most 300 lines;
  - docs/program-format.md's title names program/Program.h's
    ProgramFormatVersion;
  - every folder docs/design.md's folder map names exists, and every
    top-level source folder of the tree is in the map.

usage: doc_facts.py ROOT
"""
import os
import re
import sys

root = sys.argv[1]
problems = []
readme = open(os.path.join(root, "README.md")).read().splitlines()
if len(readme) > 300:
    problems.append(f"README.md has {len(readme)} lines, more than 300")

header = open(os.path.join(root, "program/Program.h")).read()
version = re.search(r"ProgramFormatVersion = (\d+);", header).group(1)
title = open(os.path.join(root, "docs/program-format.md")).readline()
if f"(format version {version})" not in title:
    problems.append(f"docs/program-format.md's title '{title.strip()}' does "
                    f"not name format version {version} (program/Program.h)")

design = open(os.path.join(root, "docs/design.md")).read()
folders = re.search(r"## Folders\n\n```\n(.*?)```", design, re.S).group(1)
named = re.findall(r"^(\S+)/\s", folders, re.M)
for folder in named:
    if not os.path.isdir(os.path.join(root, folder)):
        problems.append(f"docs/design.md's folder map names '{folder}/', "
                        "which is not in the tree")
for entry in sorted(os.listdir(root)):
    path = os.path.join(root, entry)
    if (os.path.isdir(path) and not entry.startswith(".") and
            not entry.startswith("build") and entry not in named and
            entry != "gpu-bundle"):
        problems.append(f"the tree's folder '{entry}/' is not in "
                        "docs/design.md's folder map")
if problems:
    sys.exit("FAIL:\n  " + "\n  ".join(problems))
print(f"PASS: README {len(readme)} lines, format version {version}, "
      f"{len(named)} folders mapped")
