//===- weft-run - Load a weft program and train with it -------------------===//
//
// Thin: parses flags and calls the runtime library. Usage errors exit 2,
// every other failure exits 1; all messages start with "weft-run: error: ".
//
//===----------------------------------------------------------------------===//
#include "program/Bf16.h"
#include "program/Hash.h"
#include "program/Program.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingChecks.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointManifest.h"
#include "runtime/checkpoint/PeriodicCheckpoints.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Watchdog.h"
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cuda/CudaRanks.h"
#include "runtime/data/Data.h"
#include "runtime/data/Npy.h"
#include "runtime/data/Samples.h"
#include "runtime/trace/Trace.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace weft;

namespace {

const char *const Usage = R"(usage: weft-run PROGRAM [options]

Loads a weft program file (docs/program-format.md) and trains with it.

options:
  --steps N         training steps to run (default 10)
  --data FILE       token file: raw uint16 (nanoGPT) or llm.c's header
                    format, version 2 holding uint32 ids (weft-tokenize
                    writes it when an id exceeds 65535); sample i of
                    step k starts at token (k*batch+i)*seq, wrapping
  --sampling MODE   how --data's windows are drawn: contiguous (the
                    default, above), random (a uniform start per sample,
                    nanoGPT's) or shuffled (disjoint windows, each epoch
                    in its own order); each a function of the step, so
                    --resume reads what an uninterrupted run would
  --data-seed N     seed of random and shuffled windows (default --seed);
                    checkpoints record it, and --resume refuses another
  --tokens FILE.npy --targets FILE.npy
                    whole samples instead of --data: token ids and targets
                    [N, seq] (integers; a target of -100 counts for nothing
                    in a masked-LM program, PyTorch's ignore_index); step
                    k's sample i is row (k*batch+i) mod N, and a masked-LM
                    program's recipe is not applied (the targets are given)
  --attention-mask FILE.npy
                    with --tokens/--targets (or a forward-only --input),
                    for a program compiled with --attention-mask or from an
                    ONNX graph with an attention_mask input: each sample's
                    mask [N, seq], 1 a token, 0 padding (a padded
                    position's target is -100)
  --token-type-ids FILE.npy
                    with --tokens/--targets (or a forward-only --input),
                    for a program from an ONNX graph with a token_type_ids
                    input: each sample's token types [N, seq] (BERT's
                    segments: 0, 1)
  --seed N          seed of the deterministic parameter init and of the
                    dropout masks (default 1234)
  --load DIR        load parameters (and, when present, optimizer state and
                    step) from DIR/*.safetensors, or from one .safetensors file
                    or .onnx model (its float initializers, by name)
  --allow-unused-tensors
                    --load warns about checkpoint tensors the program does
                    not use instead of refusing the checkpoint
  --save DIR        after the last step write DIR/model.safetensors,
                    DIR/optimizer.safetensors, DIR/trainer_state.json and
                    last DIR/manifest.json (sizes and hashes of the others);
                    the files go to DIR.partial, which then replaces DIR
                    atomically: a save killed at any instant leaves DIR as it
                    was
  --save-every K    every K steps (and after the last) write a checkpoint to
                    DIR/step-<step>/ of --checkpoint-dir, from a copy of the
                    state on a background thread while training goes on
  --checkpoint-dir DIR
                    where --save-every writes (default: the --resume DIR)
  --keep N          keep the newest N complete checkpoints of --save-every
                    (default 3)
  --resume DIR      continue from the newest complete checkpoint in DIR
                    (DIR itself or DIR/step-*; each verified against its
                    manifest, an older one used when a newer one is damaged),
                    or start at step 0 when DIR has none. With --resume,
                    --steps is the run's total: rerunning the same command
                    after a failure finishes the same run
  --metrics FILE    write one JSON line per step (step, loss, lr,
                    step_time_s, tokens_per_s, peak_bytes)
  --trace FILE      write a Chrome trace-event JSON file (open it in
                    Perfetto or chrome://tracing): per rank, every
                    instruction, wait and collective (kind, bytes, group) of
                    every step, and each async collective's flight; rank 0
                    gathers all ranks into FILE. At most 2,000,000 spans per
                    rank are kept (about 110 MB); later ones are counted
  --save-grads DIR  after the last step write DIR/grads.safetensors with every
                    parameter's gradient from that step
  --grad-check K    no training: compare analytic gradients of the first batch
                    with central differences of the loss at K elements per
                    parameter (first, last and spread between); h = 1e-5
                    (f64) or 1e-2 (f32). Error per element:
                    |a-n| / max(|a|, |n|, floor), floor 1e-3 (f64) or 1e-2
                    (f32: its differences carry ~1e-4 of noise), so gradients
                    below the floor are compared absolutely. Without --data
                    the tokens are pseudo-random from --seed. Exits 1 if an error exceeds --grad-tol.
  --grad-tol X      grad-check tolerance (default 1e-5 for f64, 5e-2 for f32)
  --collective-timeout S
                    on a mesh, a collective that has not completed after S
                    seconds (default 600; 0: wait forever) ends the job,
                    naming the rank, the op, its group, the step and the
                    ranks that stopped responding (a heartbeat)
  --on-nonfinite stop|skip
                    a NaN or infinity in the loss or a gradient (checked
                    every step before the update) stops the run naming the
                    step and the first bad tensor (stop, the default), or
                    skips that step's update (skip)
  --check-replicas K
                    every K steps compare the parameters that data-parallel
                    replicas hold (a hash per parameter); a difference stops
                    the run naming the parameter and the rank that drifted
  --device cpu|cuda where the program runs (default cpu): cuda runs it on
                    the GPU of this rank's local rank (cuBLASLt and weft's
                    CUDA kernels); refused in a build without CUDA or
                    where no device is found. Under mpirun, local rank L
                    takes GPU L and ranks talk through NCCL; a node with
                    fewer GPUs than ranks is refused unless
  --share-gpu       ranks share the node's GPUs (L modulo their count) and
                    talk through MPI with host-staged buffers (for tests on
                    a one-GPU machine: NCCL refuses two ranks on one GPU)
  --threads N       worker threads (default: this rank's share of the node's
                    cores, cores / ranks on the node); GEMMs are split
                    across them, OpenBLAS itself always runs single-threaded
  --dump            print the program readably and exit

A forward-only program (weft-compile --forward-only) computes its output
instead of training:
  --input FILE      token ids, a .npy array of integers [batch, seq]
                    (numpy.save of int32 or int64 ids)
  --input NAME=FILE the program's input NAME (repeat per input): token ids
                    for 'tokens', else a tensor of exactly its shape,
                    float32 (float64 or float32 for an f64 program)
  --output FILE     writes the output there as .npy: the logits [batch,
                    seq, vocab], an encoder's hidden states [batch, seq,
                    N], or the program's one output (float32, or float64
                    for an f64 program), computed with the parameters of
                    --load (or the --seed init)
  --output NAME=FILE
                    output NAME there (repeat per output; the outputs not
                    named are not written)

A program with a mesh runs under mpirun, one process per rank (world size =
mesh product), e.g. mpirun -np 4 weft-run PROG --data FILE. Only rank 0
prints and writes metrics; --save writes per-rank shard files plus
layout.json; --load reads sharded or unsharded checkpoints on any mesh.
  --quiet           no per-step lines (the summary is still printed)
  --help            this text

environment: WEFT_PROFILE=1 prints the wall time per op kind at the end.
OpenBLAS kernels older than the CPU allows (a VM's masked CPU model, or an
OPENBLAS_CORETYPE such as Haswell on an AVX-512 CPU) make weft-run restart
itself once with OPENBLAS_CORETYPE=SkylakeX or Haswell, and say so;
WEFT_KEEP_OPENBLAS_CORETYPE=1 keeps the one set.
)";

int usageError(const std::string &Msg) {
  std::cerr << "weft-run: error: " << Msg << "\n"
            << "(run weft-run --help for usage)\n";
  return 2;
}

int FailRank = -1;               // set under a mesh: errors name the rank
Communicator *JobComm = nullptr; // set once MPI is up

/// Prints the error and, on a mesh, ends every rank of the job: the other
/// ranks may wait in a collective this rank will never join.
int fail(const std::string &Msg) {
  std::cerr << "weft-run: error: "
            << (FailRank > 0 ? "rank " + std::to_string(FailRank) + ": " : "")
            << Msg << std::endl;
  if (JobComm && JobComm->size() > 1)
    JobComm->abortJob(1);
  return 1;
}

bool parseInt(const std::string &S, long long Min, long long &Out) {
  if (S.empty())
    return false;
  char *End = nullptr;
  errno = 0;
  long long V = std::strtoll(S.c_str(), &End, 10);
  if (errno || *End || V < Min)
    return false;
  Out = V;
  return true;
}

bool parseDouble(const std::string &S, double &Out) {
  if (S.empty())
    return false;
  char *End = nullptr;
  errno = 0;
  double V = std::strtod(S.c_str(), &End);
  if (errno || *End || !(V > 0))
    return false;
  Out = V;
  return true;
}

struct Options {
  std::string Program, Data, Load, Save, Metrics, SaveGrads, Resume,
      CheckpointDir, Trace, Device = "cpu", TokensNpy, TargetsNpy, MaskNpy,
                            TypesNpy;
  /// A forward-only program's --input and --output values, in order: FILE,
  /// or NAME=FILE.
  std::vector<std::string> Inputs, Outputs;
  long long Steps = 10, Seed = 1234, GradCheck = 0, Threads = 0, SaveEvery = 0,
            Keep = 3, CheckReplicas = 0, DataSeed = -1;
  /// --sampling: how --data's windows are drawn (--data-seed, default
  /// --seed, keys random and shuffled ones).
  Sampling::Mode Draw = Sampling::Contiguous;
  double GradTol = 0, CollectiveTimeout = 600;
  bool Dump = false, Quiet = false, AllowUnused = false, SkipNonFinite = false,
       ShareGpu = false;
  /// The flags given, in order (without their values).
  std::vector<std::string> Given;
};

/// Returns -1 on success, else the exit code.
int parseArgs(int Argc, char **Argv, Options &O) {
  for (int I = 1; I < Argc; ++I) {
    std::string A = Argv[I];
    if (A == "--help" || A == "-h") {
      std::cout << Usage;
      return 0;
    }
    if (A == "--dump") {
      O.Dump = true;
      continue;
    }
    if (A == "--share-gpu") {
      O.ShareGpu = true;
      continue;
    }
    if (A == "--quiet") {
      O.Quiet = true;
      continue;
    }
    if (A == "--allow-unused-tensors") {
      O.AllowUnused = true;
      continue;
    }
    if (A.rfind("--", 0) != 0) {
      if (!O.Program.empty())
        return usageError("unexpected argument '" + A + "' (the program is '" +
                          O.Program + "')");
      O.Program = A;
      continue;
    }
    std::string Value;
    size_t Eq = A.find('=');
    bool HasValue = Eq != std::string::npos;
    if (HasValue) {
      Value = A.substr(Eq + 1);
      A = A.substr(0, Eq);
    }
    static const char *const WithValue[] = {
        "--steps",        "--data",           "--seed",
        "--load",         "--save",           "--metrics",
        "--save-grads",   "--grad-check",     "--grad-tol",
        "--threads",      "--resume",         "--save-every",
        "--keep",         "--checkpoint-dir", "--collective-timeout",
        "--on-nonfinite", "--check-replicas", "--trace",
        "--device",       "--input",          "--output",
        "--tokens",       "--targets",        "--sampling",
        "--data-seed",    "--attention-mask", "--token-type-ids"};
    bool Known = false;
    for (const char *F : WithValue)
      Known |= A == F;
    if (!Known)
      return usageError("unknown flag '" + A + "'");
    O.Given.push_back(A);
    if (!HasValue) {
      if (I + 1 >= Argc)
        return usageError(A + " needs a value");
      Value = Argv[++I];
    }
    auto IntFlag = [&](long long Min, long long &Out) {
      if (!parseInt(Value, Min, Out))
        return usageError("bad value '" + Value + "' for " + A +
                          " (expected an integer >= " + std::to_string(Min) +
                          ")");
      return -1;
    };
    int Code = -1;
    if (A == "--steps")
      Code = IntFlag(0, O.Steps);
    else if (A == "--seed")
      Code = IntFlag(0, O.Seed);
    else if (A == "--data-seed")
      Code = IntFlag(0, O.DataSeed);
    else if (A == "--sampling") {
      if (!Sampling::parse(Value, O.Draw))
        Code = usageError("bad value '" + Value +
                          "' for --sampling (expected contiguous, random or "
                          "shuffled)");
    } else if (A == "--grad-check")
      Code = IntFlag(1, O.GradCheck);
    else if (A == "--save-every")
      Code = IntFlag(1, O.SaveEvery);
    else if (A == "--keep")
      Code = IntFlag(1, O.Keep);
    else if (A == "--check-replicas")
      Code = IntFlag(1, O.CheckReplicas);
    else if (A == "--on-nonfinite") {
      if (Value != "stop" && Value != "skip")
        Code = usageError("bad value '" + Value +
                          "' for --on-nonfinite (expected stop or skip)");
      O.SkipNonFinite = Value == "skip";
    } else if (A == "--threads") {
      Code = IntFlag(1, O.Threads);
      // OpenMP allocates per-thread state: 100,000 threads crashed libgomp.
      if (Code < 0 && O.Threads > 1024)
        Code = usageError("--threads " + Value +
                          " exceeds weft's limit of "
                          "1024 threads per rank");
    } else if (A == "--collective-timeout") {
      // 0 waits forever; the bound keeps the nanosecond count in range.
      char *End = nullptr;
      double V = std::strtod(Value.c_str(), &End);
      if (Value.empty() || *End || !(V >= 0 && V <= 1e6))
        Code = usageError("bad value '" + Value +
                          "' for --collective-timeout (expected seconds, 0 "
                          "to 1e6; 0 waits forever)");
      O.CollectiveTimeout = V;
    } else if (A == "--grad-tol") {
      if (!parseDouble(Value, O.GradTol))
        Code = usageError("bad value '" + Value +
                          "' for --grad-tol (expected a positive number)");
    } else if (Value.empty())
      Code = usageError(A + " needs a non-empty value");
    else if (A == "--data")
      O.Data = Value;
    else if (A == "--tokens")
      O.TokensNpy = Value;
    else if (A == "--targets")
      O.TargetsNpy = Value;
    else if (A == "--attention-mask")
      O.MaskNpy = Value;
    else if (A == "--token-type-ids")
      O.TypesNpy = Value;
    else if (A == "--load")
      O.Load = Value;
    else if (A == "--save")
      O.Save = Value;
    else if (A == "--metrics")
      O.Metrics = Value;
    else if (A == "--save-grads")
      O.SaveGrads = Value;
    else if (A == "--resume")
      O.Resume = Value;
    else if (A == "--checkpoint-dir")
      O.CheckpointDir = Value;
    else if (A == "--trace")
      O.Trace = Value;
    else if (A == "--input")
      O.Inputs.push_back(Value);
    else if (A == "--output")
      O.Outputs.push_back(Value);
    else if (A == "--device") {
      if (Value != "cpu" && Value != "cuda")
        return usageError("--device " + Value + ": expected cpu or cuda");
      O.Device = Value;
    }
    if (Code >= 0)
      return Code;
  }
  if (O.Program.empty())
    return usageError("no PROGRAM given");
  if (!O.Resume.empty() && !O.Load.empty())
    return usageError("--resume and --load both name a checkpoint; give one");
  if (O.CheckpointDir.empty())
    O.CheckpointDir = O.Resume;
  // --save replaces its directory whole: the periodic ones would go too.
  auto SameDir = [](const std::string &A, const std::string &B) {
    auto Norm = [](const std::string &P) {
      std::error_code EC;
      std::filesystem::path N = std::filesystem::weakly_canonical(P, EC);
      return N.has_filename() ? N : N.parent_path(); // "d/" is "d"
    };
    return Norm(A) == Norm(B);
  };
  if (O.SaveEvery && !O.Save.empty() && SameDir(O.Save, O.CheckpointDir))
    return usageError("--save and --checkpoint-dir name the same directory "
                      "'" +
                      O.Save +
                      "'; --save replaces it, periodic "
                      "checkpoints included");
  if (O.SaveEvery && O.CheckpointDir.empty())
    return usageError("--save-every needs --checkpoint-dir (or --resume)");
  // Before any step runs: a save that would delete other checkpoints (or
  // any file not a checkpoint's) is refused, never done at the end.
  if (!O.Save.empty())
    if (Status S = checkSaveTarget(O.Save); !S.ok())
      return usageError(S.message());
  if (O.Steps > kMaxCheckpointStep)
    return usageError("--steps " + std::to_string(O.Steps) +
                      " exceeds weft's limit of " +
                      std::to_string(kMaxCheckpointStep) + " steps");
  return -1;
}

int runGradCheck(Executor &E, const BatchSource &Data, const Options &O,
                 int64_t StartStep) {
  GradCheckOptions G;
  G.PerParam = O.GradCheck;
  G.Tol = O.GradTol;
  G.Step = StartStep;
  Expected<GradCheckReport> R = gradCheck(E, Data, G);
  if (!R.ok())
    return fail(R.message());
  std::printf("grad-check: %zu parameters, h=%g, floor=%g, tolerance %g\n",
              R->Params.size(), R->H, R->Floor, R->Tol);
  for (const GradCheckEntry &P : R->Params)
    std::printf("  %-48s max err %.3e at [%lld] (analytic %.9g, numeric "
                "%.9g)%s\n",
                P.Name.c_str(), P.MaxErr, (long long)P.WorstIndex, P.Analytic,
                P.Numeric, P.MaxErr <= R->Tol ? "" : "  FAIL");
  if (!O.SaveGrads.empty()) {
    Status S = saveGradients(E, O.SaveGrads);
    if (!S.ok())
      return fail(S.message());
  }
  for (const GradCheckEntry &P : R->Params)
    if (!(P.MaxErr <= R->Tol)) {
      char Msg[512];
      std::snprintf(Msg, sizeof(Msg),
                    "grad-check failed: parameter '%s' element %lld: "
                    "analytic %.9g, numeric %.9g, error %.3e > tolerance %g",
                    P.Name.c_str(), (long long)P.WorstIndex, P.Analytic,
                    P.Numeric, P.MaxErr, R->Tol);
      return fail(Msg);
    }
  std::printf("grad-check: passed\n");
  return 0;
}

/// The flags of a training run that a forward-only program has no use for
/// (else those of a forward-only run, given to a training program); the
/// first one given, or "".
std::string misplacedFlag(const Options &O, bool ForwardOnly) {
  static const char *const TrainingOnly[] = {
      "--steps",        "--data",           "--tokens",         "--targets",
      "--save",         "--save-every",     "--resume",         "--metrics",
      "--save-grads",   "--grad-check",     "--checkpoint-dir", "--keep",
      "--on-nonfinite", "--check-replicas", "--trace",          "--sampling",
      "--data-seed"};
  static const char *const ForwardOnlyFlags[] = {"--input", "--output"};
  for (const std::string &A : O.Given) {
    if (ForwardOnly) {
      for (const char *F : TrainingOnly)
        if (A == F)
          return A;
    } else {
      for (const char *F : ForwardOnlyFlags)
        if (A == F)
          return A;
    }
  }
  return "";
}

/// The file given for each name in Names: NAME=FILE (the longest name
/// that prefixes a value with '='), or FILE alone where Names has one
/// entry and FILE names no other (a value with '=' before any '/' must
/// name one); no two outputs to one file. An error names what is wrong.
Expected<std::map<std::string, std::string>>
bindFiles(const std::vector<std::string> &Given,
          const std::vector<std::string> &Names, const char *Flag) {
  std::map<std::string, std::string> Files;
  std::map<std::string, std::string> Paths; // file -> name, for repeats
  std::string All;
  for (const std::string &N : Names)
    All += (All.empty() ? "'" : ", '") + N + "'";
  for (const std::string &G : Given) {
    std::string Name;
    for (const std::string &N : Names)
      if (G.size() > N.size() && G.compare(0, N.size(), N) == 0 &&
          G[N.size()] == '=' && N.size() >= Name.size())
        Name = N;
    std::string File = Name.empty() ? G : G.substr(Name.size() + 1);
    const size_t Eq = G.find('='), Slash = G.find('/');
    const bool LooksNamed = Eq != std::string::npos && Eq < Slash;
    if (Name.empty() && (Names.size() != 1 || LooksNamed))
      return Status::error(std::string(Flag) + " '" + G + "' names " +
                           (LooksNamed ? "no " + std::string(Flag + 2) + " '" +
                                             G.substr(0, Eq) + "'"
                                       : std::string("no NAME=")) +
                           "; the program's are " +
                           (All.empty() ? "none" : All) + " (give NAME=FILE)");
    if (Name.empty())
      Name = Names[0];
    if (File.empty())
      return Status::error(std::string(Flag) + " '" + G + "' names no file");
    if (!Files.emplace(Name, File).second)
      return Status::error(std::string(Flag) + " gives '" + Name + "' twice");
    // Two inputs may read one file; two outputs would overwrite it.
    if (auto [It, New] = Paths.emplace(File, Name);
        !New && std::string(Flag) == "--output")
      return Status::error(std::string(Flag) + " gives the file '" + File +
                           "' to both '" + It->second + "' and '" + Name + "'");
  }
  return Files;
}

/// The names a forward-only program's --input and --output bind.
std::vector<std::string> inputNames(const Program &P) {
  std::vector<std::string> Names;
  for (const BufferSpec &B : P.Buffers)
    if (B.Kind == BufferKind::Input && B.Name != "targets")
      Names.push_back(B.Name);
  return Names;
}
std::vector<std::string> outputNames(const Program &P) {
  std::vector<std::string> Names;
  for (const OutputSpec &Out : P.Outputs)
    Names.push_back(Out.Name);
  return Names;
}

/// A forward-only program's files, by input and output name.
struct ForwardFiles {
  std::map<std::string, std::string> In, Out;
};

/// Binds --input and --output to the program's names, every input given
/// (in main, before any state is allocated or loaded); -1 on success, else
/// the exit code.
int bindForwardFiles(const Program &P, const Options &O, ForwardFiles &F) {
  const std::vector<std::string> In = inputNames(P);
  auto InFiles = bindFiles(O.Inputs, In, "--input");
  if (!InFiles.ok())
    return usageError(InFiles.message());
  auto OutFiles = bindFiles(O.Outputs, outputNames(P), "--output");
  if (!OutFiles.ok())
    return usageError(OutFiles.message());
  for (const std::string &N : In)
    if (!InFiles->count(N))
      return usageError("the program reads input '" + N + "': give --input " +
                        (In.size() == 1 ? "FILE.npy" : N + "=FILE.npy"));
  F.In = std::move(*InFiles);
  F.Out = std::move(*OutFiles);
  return -1;
}

/// Writes output buffer B's host bytes to Path as .npy (bf16 widened to
/// float32).
Status writeOutput(const BufferSpec &B, const std::vector<char> &Bytes,
                   const std::string &Path) {
  std::vector<float> Widened;
  const void *Data = Bytes.data();
  size_t Size = Bytes.size();
  std::string Descr = B.Type == DType::F64 ? "<f8" : "<f4";
  if (B.Type == DType::BF16) {
    Widened.resize(Bytes.size() / 2);
    for (size_t I = 0; I < Widened.size(); ++I) {
      uint16_t H;
      std::memcpy(&H, Bytes.data() + 2 * I, 2);
      Widened[I] = bf16ToFloat(H);
    }
    Data = Widened.data();
    Size = Widened.size() * sizeof(float);
  }
  std::ofstream F(Path, std::ios::binary | std::ios::trunc);
  const std::string Image = encodeNpy(Descr, B.Dims, Data, Size);
  F.write(Image.data(), std::streamsize(Image.size()));
  F.close();
  if (!F)
    return Status::error("--output: cannot write '" + Path + "'");
  return Status::success();
}

/// The token ids of file Path into micro-batch 0's tokens (this rank's
/// block of them).
Status setTokens(Executor &E, const std::string &Path) {
  const Program &P = E.program();
  Expected<NpyArray> In = readNpy(Path);
  if (!In.ok())
    return Status::error("--input: " + In.message());
  Expected<std::vector<int32_t>> Ids = npyTokenIds(
      *In, Shape{P.Batch, P.Seq}, P.Vocab, "--input '" + Path + "'");
  if (!Ids.ok())
    return Ids.status();
  std::vector<int32_t> Block(size_t(E.localBatch() * E.localSeq()));
  for (int64_t R = 0; R < E.localBatch(); ++R)
    for (int64_t C = 0; C < E.localSeq(); ++C)
      Block[size_t(R * E.localSeq() + C)] =
          (*Ids)[size_t((E.batchOffset() + R) * P.Seq + E.seqOffset() + C)];
  return E.setInputs(0, Block.data(), nullptr);
}

/// A padded forward-only program's attention mask and token types, for the
/// samples of --input's tokens (Path).
Status setRowData(Executor &E, const Options &O, const std::string &Path) {
  const Program &P = E.program();
  if (O.MaskNpy.empty() && O.TypesNpy.empty())
    return Status::success();
  Expected<NpyArray> In = readNpy(Path);
  if (!In.ok())
    return In.status();
  Expected<std::vector<int32_t>> Ids = npyTokenIds(
      *In, Shape{P.Batch, P.Seq}, P.Vocab, "--input '" + Path + "'");
  if (!Ids.ok())
    return Ids.status();
  // No targets: each a -100, which the mask's checks ask of the padding.
  std::vector<int32_t> None(Ids->size(), -100);
  Expected<SampleData> S = SampleData::fromRows(
      std::move(*Ids), std::move(None), P.Seq, P.Vocab, 0, false);
  if (!S.ok())
    return S.status();
  if (!O.MaskNpy.empty())
    WEFT_RETURN_IF_ERROR(loadAttentionMask(O.MaskNpy, P, *S));
  if (!O.TypesNpy.empty())
    WEFT_RETURN_IF_ERROR(loadTokenTypes(O.TypesNpy, P, *S));
  return E.loadRowData(*S, 0);
}

/// A forward-only program: its outputs (the logits of --input's tokens,
/// or the tensors of its named inputs) to --output.
int runForwardOnly(Executor &E, const Options &O, const ForwardFiles &F) {
  const Program &P = E.program();
  for (size_t I = 0; I < P.Buffers.size(); ++I) {
    const BufferSpec &B = P.Buffers[I];
    if (B.Kind != BufferKind::Input || B.Name == "targets")
      continue;
    const std::string &Path = F.In.at(B.Name);
    if (B.Name == "tokens") {
      if (Status S = setTokens(E, Path); !S.ok())
        return fail(S.message());
      if (Status S = setRowData(E, O, Path); !S.ok())
        return fail(S.message());
      continue;
    }
    Expected<NpyArray> In = readNpy(Path);
    if (!In.ok())
      return fail("--input: " + In.message());
    Expected<std::vector<char>> Bytes =
        npyFloats(*In, B.Dims, P.Type == DType::F64,
                  "--input '" + Path + "' (input '" + B.Name + "')");
    if (!Bytes.ok())
      return fail(Bytes.message());
    if (Status S = E.setTensorInput(I, Bytes->data(), Bytes->size()); !S.ok())
      return fail(S.message());
  }
  StepContext Ctx;
  Ctx.Step = 1;
  Ctx.Optimizer = &P.Optimizer;
  if (Status S = E.runForward(Ctx); !S.ok())
    return fail(S.message());
  for (size_t I = 0; I < P.Outputs.size(); ++I) {
    auto File = F.Out.find(P.Outputs[I].Name);
    if (File == F.Out.end())
      continue;
    Expected<std::vector<char>> Out = E.outputBytes(I);
    if (!Out.ok())
      return fail(Out.message());
    if (E.rank() != 0)
      continue;
    const BufferSpec &B = P.Buffers[size_t(P.Outputs[I].Buffer)];
    if (Status S = writeOutput(B, *Out, File->second); !S.ok())
      return fail(S.message());
    if (!O.Quiet)
      std::cout << "forward: " << P.Outputs[I].Name << " "
                << shapeString(B.Dims) << " -> " << File->second << std::endl;
  }
  return 0;
}

} // namespace

int main(int Argc, char **Argv) {
  cpu::restartWithRightBlasKernels(Argv);
  if (std::string Note = cpu::blasRestartNote(); !Note.empty())
    std::cerr << "weft-run: note: " << Note << "\n";
  Options O;
  int Code = parseArgs(Argc, Argv, O);
  if (Code >= 0)
    return Code;

  Expected<Program> P = loadProgramFile(O.Program);
  if (!P.ok())
    return fail(P.message());
  if (O.Dump) {
    std::cout << dumpProgram(*P);
    return 0;
  }
  if (std::string F = misplacedFlag(O, P->forwardOnly()); !F.empty())
    return usageError(
        P->forwardOnly()
            ? F + " is about training; '" + O.Program +
                  "' is a forward-only program (give --input and --output)"
            : F +
                  " needs a forward-only program (weft-compile "
                  "--forward-only); '" +
                  O.Program + "' trains");
  if (P->forwardOnly() && O.Outputs.empty())
    return usageError("'" + O.Program +
                      "' is a forward-only program: give --input FILE.npy "
                      "(or NAME=FILE.npy per input) and --output FILE.npy (or "
                      "NAME=FILE.npy per output)");
  ForwardFiles Files;
  if (P->forwardOnly())
    if (int Code = bindForwardFiles(*P, O, Files); Code >= 0)
      return Code;
  const bool Samples = !O.TokensNpy.empty() || !O.TargetsNpy.empty();
  if (Samples && (O.TokensNpy.empty() || O.TargetsNpy.empty()))
    return fail("--tokens and --targets come together (whole samples: ids "
                "and their targets)");
  if (Samples && !O.Data.empty())
    return fail("--data and --tokens/--targets both give the batches; give "
                "one");
  if ((P->givenTargets() || P->floatTargets()) && !Samples && !O.GradCheck)
    return fail("'" + O.Program + "' trains on given targets (weft-compile " +
                (P->floatTargets() ? "--loss mse" : "--loss cross-entropy") +
                "): give --tokens and --targets, not a token file");
  // A token file's targets are its next tokens: not a classifier's labels.
  if (!O.Data.empty() &&
      (P->Classes || P->sampleTargets() || P->floatTargets()))
    return fail(
        "'" + O.Program + "' trains on targets that are not token ids (" +
        (P->floatTargets()    ? std::string("floats, a regression's")
         : P->sampleTargets() ? std::string("one per sample")
                              : std::to_string(P->Classes) + " classes") +
        "): give --tokens and --targets, not a token file");
  if (O.Data.empty() && !Samples && !O.GradCheck && !P->forwardOnly())
    return fail("no --data given (a uint16 token file, see weft-tokenize)");
  const bool Padded = P->DocumentsFromMask || P->ReadsKeyPadding;
  if (P->forwardOnly() && Padded && O.MaskNpy.empty())
    return fail("'" + O.Program +
                "' reads each row's attention mask (the model's "
                "attention_mask input): give --attention-mask");
  if (P->forwardOnly() && P->ReadsTokenTypes && O.TypesNpy.empty())
    return fail("'" + O.Program +
                "' reads each position's token type (the model's "
                "token_type_ids input): give --token-type-ids");
  if (!P->forwardOnly() && Padded && (!Samples || O.MaskNpy.empty()))
    return fail("'" + O.Program + "' " +
                (P->ReadsKeyPadding
                     ? "reads each row's attention mask (the model's "
                       "attention_mask input)"
                     : "trains padded rows (weft-compile --attention-mask)") +
                ": give --tokens, --targets and --attention-mask");
  if (!P->forwardOnly() && P->ReadsTokenTypes &&
      (!Samples || O.TypesNpy.empty()))
    return fail("'" + O.Program +
                "' reads each position's token type (the model's "
                "token_type_ids input): give --tokens, --targets and "
                "--token-type-ids");
  if (!O.TypesNpy.empty() && !P->ReadsTokenTypes)
    return fail("--token-type-ids is for a program from a graph with a "
                "token_type_ids input; '" +
                O.Program + "' reads none");
  if (!O.MaskNpy.empty() && !Padded)
    return fail("--attention-mask is for a program compiled with "
                "--attention-mask (padded rows) or from a graph with an "
                "attention_mask input; '" +
                O.Program + "' reads every position");
  if (O.Data.empty() && (O.Draw != Sampling::Contiguous || O.DataSeed >= 0))
    return fail(std::string(O.Draw != Sampling::Contiguous ? "--sampling"
                                                           : "--data-seed") +
                " draws windows of a --data token file; give one");

  Expected<std::unique_ptr<Communicator>> Comm = createCommunicator();
  if (!Comm.ok())
    return fail(Comm.message());
  const bool Root = (*Comm)->rank() == 0;
  FailRank = (*Comm)->rank();
  if (std::string Note = (*Comm)->pathNote(); Root && !O.Quiet && !Note.empty())
    std::cerr << "weft-run: note: " << Note << "\n";
  if (O.ShareGpu && O.Device != "cuda")
    return fail("--share-gpu needs --device cuda");
  if (O.Device == "cuda") {
    JobComm = Comm->get(); // an error below ends the job through it
    if (Status S = cudaRankCommunicator(*Comm, O.ShareGpu, O.CollectiveTimeout);
        !S.ok())
      return fail("--device cuda: " + S.message());
  }
  WatchedCommunicator *Watched = nullptr;
  if ((*Comm)->size() > 1 && O.CollectiveTimeout > 0) {
    std::unique_ptr<WatchedCommunicator> W =
        watchCommunicator(std::move(*Comm), O.CollectiveTimeout, mpiJobId());
    Watched = W.get();
    *Comm = std::unique_ptr<Communicator>(std::move(W));
  }
  JobComm = Comm->get();
  if (O.GradCheck && (*Comm)->size() > 1)
    return fail("--grad-check runs on one rank (world size is " +
                std::to_string((*Comm)->size()) + ")");
  // Without --threads each rank takes its share of the node's cores; a
  // choice that oversubscribes them is warned about (once per node).
  if (const int HardwareCores =
          int(std::max(1u, std::thread::hardware_concurrency()));
      O.Threads > 0 && cpu::localRanks() >= 1) {
    const char *LocalRank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    std::string W = cpu::oversubscriptionWarning(int(O.Threads), HardwareCores,
                                                 cpu::localRanks());
    if (!W.empty() && (!LocalRank || std::string(LocalRank) == "0"))
      std::cerr << "weft-run: warning: " << W << "\n";
  }
  cpu::setNumThreads(int(O.Threads));
  if (std::string W = cpu::blasKernelWarning(); !W.empty() && Root)
    std::cerr << "weft-run: warning: " << W << "\n";
  std::unique_ptr<Backend> Device;
  if (O.Device == "cuda") {
    Expected<std::unique_ptr<Backend>> B = createCudaBackend(P->Type);
    if (!B.ok())
      return fail("--device cuda: " + B.message());
    Device = std::move(*B);
  }
  const bool MaskedLoss = P->maskedLoss();
  Expected<std::unique_ptr<Executor>> E =
      Executor::create(P.take(), std::move(Device), Comm->get());
  if (!E.ok())
    return fail(E.message());
  Executor &Exec = **E;
  const Program &Prog = Exec.program();
  {
    Expected<std::string> Note = tpPlacementNote(Exec);
    if (!Note.ok())
      return fail(Note.message());
    if (Root && !O.Quiet && !Note->empty())
      std::cerr << "weft-run: note: " << *Note << "\n";
  }
  Exec.setDropoutSeed(uint64_t(O.Seed));
  if (Status S = Exec.initParams(uint64_t(O.Seed)); !S.ok())
    return fail(S.message());
  Exec.setProfiling(std::getenv("WEFT_PROFILE") != nullptr);
  if (!O.Trace.empty())
    Exec.setTracing(2'000'000);

  int64_t StartStep = 0;
  bool ResumedAny = false; // a --resume checkpoint loaded
  std::string Loaded;      // its directory
  std::vector<std::string> Warnings;
  LoadOptions Load;
  Load.AllowUnused = O.AllowUnused;
  Load.Warnings = &Warnings;
  if (!O.Load.empty()) {
    Expected<int64_t> Step = loadCheckpoint(Exec, O.Load, Load);
    if (!Step.ok())
      return fail(Step.message());
    StartStep = *Step;
  }
  if (!O.Resume.empty()) {
    // Newest first; a damaged one is reported and the next older tried.
    // Every rank reads the same files, so every rank makes the same choice.
    for (const auto &[Step, Dir] : listCheckpoints(O.Resume)) {
      Expected<int64_t> Got = loadCheckpoint(Exec, Dir, Load);
      if (Got.ok()) {
        StartStep = *Got;
        Loaded = Dir;
        ResumedAny = true;
        break;
      }
      Warnings.push_back("skipping checkpoint: " + Got.message());
    }
    if (Loaded.empty() && !Warnings.empty())
      return fail("--resume: no checkpoint in '" + O.Resume +
                  "' loads; the newest: " + Warnings.front());
    if (Root)
      std::cout << (Loaded.empty()
                        ? "resume: no checkpoint in '" + O.Resume +
                              "': starting at step 0"
                        : "resume: step " + std::to_string(StartStep) +
                              " from '" + Loaded + "'")
                << std::endl;
  }
  // A program imported with its weights (init "loaded") has no values of
  // its own: training it from zeros would be another model.
  if (O.Load.empty() && StartStep == 0 && !ResumedAny)
    for (const ParamSpec &Spec : Prog.Params)
      if (Spec.Init.K == InitSpec::Loaded)
        return fail("parameter '" + Spec.Name +
                    "' takes its values from the model the program was "
                    "compiled from (init \"loaded\"): give --load with that "
                    "model (e.g. --load model.onnx) or --resume");
  if (Root)
    for (const std::string &W : Warnings)
      std::cerr << "weft-run: warning: " << W << "\n";
  if (Prog.forwardOnly())
    return runForwardOnly(Exec, O, Files);
  // With --resume, --steps is the run's total.
  const int64_t Steps =
      O.Resume.empty() ? O.Steps : std::max<int64_t>(0, O.Steps - StartStep);
  if (StartStep > kMaxCheckpointStep - Steps)
    return fail("step " + std::to_string(StartStep) + " + --steps " +
                std::to_string(Steps) + " exceeds weft's limit of " +
                std::to_string(kMaxCheckpointStep) + " steps");

  std::unique_ptr<BatchSource> Data;
  const bool RandomSamples =
      !Samples && O.Data.empty() &&
      (Prog.Classes || Prog.sampleTargets() || Prog.floatTargets());
  if (Samples || RandomSamples) {
    Expected<SampleData> S =
        Samples ? loadSamples(O.TokensNpy, O.TargetsNpy, Prog, MaskedLoss)
                : randomSamples(Prog, uint64_t(O.Seed));
    if (!S.ok())
      return fail(S.message());
    if (!O.MaskNpy.empty())
      if (Status M = loadAttentionMask(O.MaskNpy, Prog, *S); !M.ok())
        return fail(M.message());
    if (!O.TypesNpy.empty())
      if (Status T = loadTokenTypes(O.TypesNpy, Prog, *S); !T.ok())
        return fail(T.message());
    Data = std::make_unique<SampleData>(std::move(*S));
  } else {
    Expected<TokenData> T =
        O.Data.empty()
            ? TokenData::fromTokens(randomTokens(Prog, uint64_t(O.Seed)),
                                    Prog.Vocab, Prog.Seq)
            : TokenData::open(O.Data, Prog.Vocab, Prog.Seq);
    if (!T.ok())
      return fail(T.message());
    T->setSampling({O.Draw, uint64_t(O.DataSeed >= 0 ? O.DataSeed : O.Seed)});
    // A resumed run reads step k's batch as the uninterrupted run did only
    // if it draws the same windows of the same file.
    if (!Loaded.empty() && !O.Data.empty()) {
      Expected<std::string> Saved = readBatchesDescription(Loaded);
      if (!Saved.ok())
        return fail(Saved.message());
      if (!Saved->empty() && *Saved != T->describe())
        return fail("--resume: the checkpoint in '" + Loaded +
                    "' was trained on batches drawn " + *Saved +
                    ", this run draws " + T->describe() +
                    ": it would not see the tokens the uninterrupted run "
                    "would (give the same --data, --sampling and "
                    "--data-seed)");
    }
    if (!O.Data.empty())
      Exec.setBatchesDescription(T->describe());
    Data = std::make_unique<TokenData>(std::move(*T));
  }

  if (Prog.DocumentEos >= 0)
    Data->setDocuments(Prog.DocumentEos);
  if (O.GradCheck)
    return runGradCheck(Exec, *Data, O, StartStep);

  std::ofstream Metrics;
  if (!O.Metrics.empty() && Root) {
    // A resumed run appends: the steps it repeats appear twice.
    Metrics.open(O.Metrics, O.Resume.empty() ? std::ios::trunc : std::ios::app);
    if (!Metrics)
      return fail("cannot open metrics file '" + O.Metrics + "'");
  }
  TrainOptions T;
  T.Steps = Steps;
  T.StartStep = StartStep;
  T.Log = O.Quiet || !Root ? nullptr : &std::cout;
  T.Metrics = O.Metrics.empty() || !Root ? nullptr : &Metrics;
  T.SkipNonFinite = O.SkipNonFinite;
  T.CheckReplicasEvery = O.CheckReplicas;
  if (Watched)
    T.BeforeStep = [&](int64_t Step) { Watched->setStep(Step); };
  PeriodicCheckpoints Periodic(O.CheckpointDir, O.Keep, /*WaitSeconds=*/600,
                               /*Verbose=*/!O.Quiet);
  if (O.SaveEvery)
    T.AfterStep = [&](const StepRecord &R) {
      return R.Step % O.SaveEvery == 0 ? Periodic.save(Exec, R.Step)
                                       : Status::success();
    };
  Expected<std::vector<StepRecord>> Records = train(Exec, *Data, T);
  if (!Records.ok())
    return fail(Records.message());
  if (O.SaveEvery) {
    Status S = Steps == 0 || Periodic.lastStep() == StartStep + Steps
                   ? Status::success()
                   : Periodic.save(Exec, StartStep + Steps);
    if (S.ok())
      S = Periodic.finish(Exec);
    if (!S.ok())
      return fail(S.message());
  }
  if (Root)
    printSummary(std::cout, *Records, Exec);
  if (std::getenv("WEFT_PROFILE") && Root)
    std::cout << Exec.profileReport();
  if (!O.Trace.empty()) {
    Status S = writeChromeTrace(Exec, O.Trace);
    if (!S.ok())
      return fail(S.message());
  }

  if (!O.SaveGrads.empty()) {
    Status S = saveGradients(Exec, O.SaveGrads);
    if (!S.ok())
      return fail(S.message());
  }
  if (!O.Save.empty()) {
    Status S = saveCheckpoint(Exec, O.Save, StartStep + Steps);
    if (!S.ok())
      return fail(S.message());
  }
  return 0;
}
