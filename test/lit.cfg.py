# lit configuration for weft: dialect, pass and tool tests.
import os
import lit.formats

config.name = "weft"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["unit", "reference", "bench", "lit.cfg.py", "Inputs", "check_learning.py", "equivalence.py", "resharding.py", "memory.py", "e2e_util.py"]
config.environment["PATH"] = os.pathsep.join(
    [config.weft_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["OMP_NUM_THREADS"] = "2"
# mpirun with a session directory of the test's own: Open MPI removes its
# shared per-user session directory when a job ends, racing another test's
# job creating its own inside it ("A call to mkdir was unable to create the
# desired directory", orte_init failed) when lit runs them in parallel.
config.substitutions.append(
    ("%mpirun", "mpirun --allow-run-as-root --oversubscribe --mca btl self,vader"
                " --mca orte_tmpdir_base %t.ompi"))
config.substitutions.append(("%srcroot", config.weft_src_root))
config.substitutions.append(("%bindir", config.weft_bin_dir))
config.substitutions.append(("%python", "/usr/bin/python3"))
# ONNX's node tests (Debian's libonnx-testdata; scripts/install-deps.sh
# installs it): without them, test/e2e/onnx_node_tests.test reports
# UNSUPPORTED rather than failing.
if os.path.isdir("/usr/share/libonnx-testdata/data/node"):
    config.available_features.add("onnx-testdata")
