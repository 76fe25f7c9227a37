"""Shared by the e2e scripts: running weft tools and mpirun."""
import atexit
import shutil
import subprocess
import sys
import tempfile

# A session directory of this script's own: Open MPI removes its shared
# per-user one when a job ends, racing another test's job creating its own
# inside it when lit runs tests in parallel (orte_init fails).
_SESSIONS = tempfile.mkdtemp(prefix="weft-ompi-")
atexit.register(shutil.rmtree, _SESSIONS, True)
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe",
          "--mca", "btl", "self,vader", "--mca", "orte_tmpdir_base", _SESSIONS]


def run(cmd, timeout=600):
    """Runs cmd; on failure exits naming the command and its output. A run
    past `timeout` seconds (a hang) is a failure too, not a stuck suite."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        sys.exit(f"FAIL (no exit after {timeout} s): {' '.join(cmd)}\n"
                 f"{(e.stdout or b'')[-2000:]!r}\n{(e.stderr or b'')[-2000:]!r}")
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout + r.stderr


def launch(ranks):
    """The command prefix that starts `ranks` processes."""
    return MPIRUN + ["-np", str(ranks)] if ranks > 1 else []


def expect_close(what, got, want, tol, reference):
    """Exits naming `what` unless got is want to `tol` relative; prints the
    agreement with `reference` (whose value want is) otherwise."""
    rel = abs(got - want) / abs(want)
    if not rel <= tol:
        sys.exit(f"FAIL: {what}: {got} != {reference} {want} (relative {rel:.1e})")
    print(f"{what} {got:.8f} = {reference} {want:.8f} (relative {rel:.1e})")
