//===- Executor.h - Memory for a program and running its instructions -*- C++
//-*-===//
//
// Allocates, once, the arena (arena_bytes, 64-byte aligned) and the
// persistent state: per parameter its value, gradient and Adam m/v, plus the
// token/target inputs. All of it is pre-faulted. Every instruction is bound
// to memory at creation, so running a range is a loop over a table.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_EXECUTOR_H
#define WEFT_RUNTIME_EXECUTOR_H

#include "runtime/Backend.h"
#include "runtime/Program.h"

#include <memory>

namespace weft {

class Executor {
public:
  /// Takes a validated program. With no backend, uses the CPU backend.
  static Expected<std::unique_ptr<Executor>>
  create(Program P, std::unique_ptr<Backend> B = nullptr);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  const Program &program() const { return Prog; }

  /// Deterministic init of every parameter; zeroes grads and Adam state.
  void initParams(uint64_t Seed);
  /// Runs instructions [Begin, End).
  Status run(int64_t Begin, int64_t End, const StepContext &Ctx);

  // Persistent state, numel(params[P]) elements of the program dtype each.
  void *param(size_t P) const { return State[P].Param; }
  void *grad(size_t P) const { return State[P].Grad; }
  void *adamM(size_t P) const { return State[P].M; }
  void *adamV(size_t P) const { return State[P].V; }
  /// Input buffers ([batch, seq] i32); always allocated.
  int32_t *tokens() const { return Tokens; }
  int32_t *targets() const { return Targets; }
  /// The loss buffer's value after a run of [0, forward_end) or more.
  double loss() const;
  double paramElement(size_t P, int64_t I) const;
  void setParamElement(size_t P, int64_t I, double V);
  double gradElement(size_t P, int64_t I) const;

  size_t arenaBytes() const { return size_t(Prog.ArenaBytes); }
  /// Parameters, grads, Adam m/v, inputs and kernel scratch.
  size_t persistentBytes() const { return PersistentBytes + ScratchBytes; }
  size_t peakBytes() const { return arenaBytes() + persistentBytes(); }
  /// 2*M*N*K summed over the matmul instructions of one step.
  double matmulFlopsPerStep() const { return MatmulFlops; }

  /// Per-op wall time, accumulated by run() while profiling is on.
  void setProfiling(bool On) { Profiling = On; }
  std::string profileReport() const;

private:
  Executor(Program P, std::unique_ptr<Backend> B);
  Status bind();

  struct ParamState {
    void *Param, *Grad, *M, *V;
  };
  Program Prog;
  std::unique_ptr<Backend> Impl;
  void *Arena = nullptr;
  void *Persistent = nullptr;
  size_t PersistentBytes = 0, ScratchBytes = 0;
  std::vector<ParamState> State;
  int32_t *Tokens = nullptr, *Targets = nullptr;
  const void *LossData = nullptr;
  std::vector<BoundInstruction> Bound;
  double MatmulFlops = 0;
  bool Profiling = false;
  double OpSeconds[NumOpKinds] = {};
  int64_t OpCalls[NumOpKinds] = {};
};

} // namespace weft

#endif // WEFT_RUNTIME_EXECUTOR_H
