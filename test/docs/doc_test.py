#!/usr/bin/python3
"""Runs the shell examples of weft's documentation, as a user would type them.

usage: doc_test.py --bin BUILD/bin --root CHECKOUT [--scratch DIR] [FILE.md ...]

Without FILE arguments it reads ROOT/README.md and ROOT/docs/*.md.

The conventions a doc follows (README.md, "Running the examples", says the
same in one sentence):

* Every fenced block tagged ```sh is run; a block of any other tag
  (```console, ```text, ```json, none) is not. Commands that cannot run in
  CI (a GPU, PyTorch 2, a download, minutes of compute, the build itself)
  go in ```console blocks, and the doc says why in a short phrase.
* Each file's commands run in order, each in its own `bash -o pipefail -c`
  (so `cd` and `export` do not carry over), in one scratch folder per file
  that holds symbolic links `data` and `test` to the checkout's folders of
  those names: a command reads `data/corpus.txt` or
  `test/e2e/fixtures/*.onnx` as it would from the checkout's root, and
  writes its own files beside them. The tools are found on PATH
  (BUILD/bin first), as after `export PATH=$PWD/build/bin:$PATH`.
* A command is one line, or several joined by a trailing backslash, `|`,
  `||` or `&&`, or by a quoted string left open (no heredocs). `#` comments are
  ignored, except two kinds:
    # expect: TEXT      after a command: TEXT must occur in what that
                        command printed (stdout and stderr). A doc marks
                        with it each figure it quotes as this command's
                        output.
    # doc-test: NAME=VALUE [NAME=VALUE ...]
                        sets environment variables for the rest of the
                        block. A doc writes its sizes as `--steps
                        ${STEPS:-100}`: a reader gets 100 steps, the doc
                        test the small value the block names.
* The test fails when a command exits non-zero or an expected TEXT is
  missing; it names the file, the line and the command, and stops that
  file (later commands may need what the failed one makes).
* Keep the examples small: the whole doc test must run in under 90 s on 2
  cores (all the docs took about 9 s on 2026-12-04); `-v` prints each
  command's time.

Environment the test sets beside the doc's: PATH (BUILD/bin first), HOME
(inside the scratch folder, so nothing outside it is written), Open MPI's
session directory inside the scratch folder (OMPI_MCA_orte_tmpdir_base: lit
runs other mpirun tests at the same time) and OMP_WAIT_POLICY=PASSIVE
(weft-run's OpenMP threads otherwise spin against the other tests on 2
cores, up to 60x slower).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

EXPECT = re.compile(r"^#\s*expect:\s?(.*)$")
SETENV = re.compile(r"^#\s*doc-test:\s*(.*)$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")


class Command:
    def __init__(self, path, line, text, env):
        self.path, self.line, self.text, self.env = path, line, text, dict(env)
        self.expects = []


def scan(line, quote):
    """Follows quotes through one line. Returns (code, quote) where code is
    the line without a trailing comment and quote the quote left open
    ('' when none)."""
    out, i, n = [], 0, len(line)
    while i < n:
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = ""
        elif quote == '"':
            if c == "\\" and i + 1 < n:
                out.append(c)
                i += 1
                c = line[i]
            elif c == '"':
                quote = ""
        elif c == "\\" and i + 1 < n:
            out.append(c)
            i += 1
            c = line[i]
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t;|&("):
            break
        out.append(c)
        i += 1
    return "".join(out), quote


def parse(path):
    """The ```sh commands of a markdown file, with their expectations."""
    commands, lines = [], open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, tag = m.group(1), m.group(2), m.group(3)
        body_start = i + 1
        j = body_start
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        if tag == "sh":
            commands += parse_block(path, lines, body_start, j, len(indent))
        i = j + 1
    return commands


def parse_block(path, lines, start, end, indent):
    commands, env, k = [], {}, start
    while k < end:
        raw = lines[k][indent:] if lines[k][:indent].strip() == "" else lines[k]
        stripped = raw.strip()
        if not stripped:
            k += 1
            continue
        if stripped.startswith("#"):
            m, s = EXPECT.match(stripped), SETENV.match(stripped)
            if m:
                if not commands:
                    sys.exit(f"{path}:{k + 1}: '# expect:' before any command")
                commands[-1].expects.append(m.group(1).rstrip())
            elif s:
                for item in s.group(1).split():
                    name, eq, value = item.partition("=")
                    if not eq:
                        sys.exit(f"{path}:{k + 1}: '# doc-test:' wants NAME=VALUE, got '{item}'")
                    env[name] = value
            k += 1
            continue
        # Continuation lines ("\\" at the end) join with a space; a quoted
        # string spanning lines keeps its newlines.
        first, text, quote = k, "", ""
        while True:
            code, quote = scan(raw, quote)
            if quote:
                text += raw + "\n"
            elif code.rstrip().endswith("\\"):
                text += code.rstrip()[:-1] + " "
            elif code.rstrip().endswith(("|", "&&")):
                text += code.rstrip() + " "
            else:
                text += code
                break
            k += 1
            if k >= end:
                sys.exit(f"{path}:{first + 1}: command runs past the end of its block")
            raw = lines[k][indent:] if lines[k][:indent].strip() == "" else lines[k]
        commands.append(Command(path, first + 1, text.strip(), env))
        k += 1
    return commands


def run_file(path, args, base_env):
    name = os.path.relpath(path, args.root) if path.startswith(args.root) else path
    commands = parse(path)
    if not commands:
        return name, 0, [], 0.0
    work = os.path.join(args.scratch, re.sub(r"[^A-Za-z0-9_.-]", "_", name))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "home"))
    os.makedirs(os.path.join(work, "ompi"))
    for link in ("data", "test"):
        os.symlink(os.path.join(args.root, link), os.path.join(work, link))
    env = dict(base_env, HOME=os.path.join(work, "home"),
               OMPI_MCA_orte_tmpdir_base=os.path.join(work, "ompi"))
    start, failures = time.time(), []
    for c in commands:
        shown = c.text.replace("\n", "\n    ")
        t0 = time.time()
        try:
            r = subprocess.run(["bash", "-o", "pipefail", "-c", c.text], cwd=work,
                               env=dict(env, **c.env), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=args.timeout)
            out, rc = r.stdout.decode("utf-8", "replace"), r.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode("utf-8", "replace")
            rc = f"timeout after {args.timeout} s"
        took = time.time() - t0
        if args.verbose:
            print(f"{name}:{c.line}: {took:.2f} s: {shown}")
        missing = [e for e in c.expects if e not in out]
        if rc != 0 or missing:
            why = (f"exit {rc}" if rc != 0 else
                   "expected output missing: " + "; ".join(repr(m) for m in missing))
            tail = "\n".join("    | " + l for l in out.rstrip().split("\n")[-20:])
            failures.append(f"{name}:{c.line}: {why}\n  command: {shown}\n  output:\n{tail}")
            break
    return name, len(commands), failures, time.time() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True, help="the built binaries (build/bin)")
    p.add_argument("--root", required=True, help="the checkout")
    p.add_argument("--scratch", default=None, help="work folder (default: a new one in /tmp)")
    p.add_argument("--timeout", type=int, default=120, help="seconds per command")
    p.add_argument("-v", "--verbose", action="store_true", help="print each command's time")
    p.add_argument("--list", action="store_true", help="print the commands, run nothing")
    p.add_argument("files", nargs="*")
    args = p.parse_args()
    args.root = os.path.abspath(args.root)
    files = [os.path.abspath(f) for f in args.files] or (
        [os.path.join(args.root, "README.md")] +
        sorted(glob.glob(os.path.join(args.root, "docs", "*.md"))))
    if args.list:
        for f in files:
            for c in parse(f):
                print(f"{f}:{c.line}: {c.env or ''} {c.text}")
                for e in c.expects:
                    print(f"    expect: {e}")
        return 0
    if args.scratch is None:
        import tempfile
        args.scratch = tempfile.mkdtemp(prefix="weft-doc-test-")
    os.makedirs(args.scratch, exist_ok=True)
    env = dict(os.environ, PATH=os.path.abspath(args.bin) + os.pathsep + os.environ.get("PATH", ""),
               OMP_WAIT_POLICY="PASSIVE")
    total, failures, t0 = 0, [], time.time()
    for f in files:
        name, n, failed, took = run_file(f, args, env)
        total += n
        print(f"{name}: {n} commands, {took:.1f} s{': FAILED' if failed else ''}")
        failures += failed
    print(f"doc test: {total} commands in {len(files)} files, {time.time() - t0:.1f} s")
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
