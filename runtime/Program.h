//===- Program.h - The weft program file (docs/program-format.md) ---------===//
//
// In-memory form of a program file, its loader (container, JSON payload and
// full validation: a program that loads never hands a kernel a bad shape) and
// a readable dump.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_PROGRAM_H
#define WEFT_RUNTIME_PROGRAM_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

constexpr uint32_t ProgramFormatVersion = 1;
constexpr size_t ProgramHeaderBytes = 28;

enum class DType { F32, F64, I32 };
const char *dtypeName(DType T);
size_t dtypeBytes(DType T);

enum class BufferKind { Input, Param, Grad, AdamM, AdamV, Arena };
const char *bufferKindName(BufferKind K);

/// Every instruction op; the order is the dispatch-table index.
enum class OpKind {
  Embedding,
  EmbeddingGrad,
  PositionEmbedding,
  PositionEmbeddingGrad,
  Matmul,
  BiasAdd,
  ReduceRows,
  Add,
  Mul,
  Split,
  Concat,
  LayerNorm,
  LayerNormGrad,
  RmsNorm,
  RmsNormGrad,
  Gelu,
  GeluGrad,
  Silu,
  SiluGrad,
  Swiglu,
  SwigluGrad,
  Rope,
  Attention,
  AttentionGrad,
  CrossEntropy,
  CrossEntropyGrad,
  Fill,
  Copy,
  AdamW,
};
constexpr int NumOpKinds = static_cast<int>(OpKind::AdamW) + 1;
const char *opName(OpKind K);
/// Returns false when Name is not an op.
bool parseOpName(const std::string &Name, OpKind &K);

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape &S);
std::string shapeString(const Shape &S);

struct InitSpec {
  enum Kind { Normal, Zeros, Ones } K = Zeros;
  double Std = 0.0;
};

struct ParamSpec {
  std::string Name;
  Shape Dims;
  InitSpec Init;
  bool WeightDecay = false;
};

struct OptimizerSpec {
  std::string Kind = "adamw";
  double Lr = 1e-3, Beta1 = 0.9, Beta2 = 0.999, Eps = 1e-8, WeightDecay = 0.0;
  std::string Schedule = "constant";
  int64_t WarmupSteps = 0, TotalSteps = 0;
  double MinLr = 0.0;
};

struct BufferSpec {
  BufferKind Kind = BufferKind::Arena;
  std::string Name;   // inputs: "tokens" or "targets"
  int64_t Param = -1; // param/grad/adam_m/adam_v: index into params
  int64_t Offset = 0; // arena: byte offset
  Shape Dims;
  DType Type = DType::F32;
  int64_t numel() const { return numElements(Dims); }
  int64_t bytes() const { return numel() * int64_t(dtypeBytes(Type)); }
};

/// Attributes of all ops in one struct; each op reads the ones it documents.
/// Boolean attributes default to false when absent.
struct OpAttrs {
  bool TransposeA = false, TransposeB = false, Inverse = false,
       WeightDecay = false;
  double Eps = 0.0, Theta = 10000.0, Value = 0.0;
  int64_t NumHeads = 0, NumKvHeads = 0;
  std::vector<int64_t> Sizes;
};

struct Instruction {
  OpKind Op = OpKind::Copy;
  std::vector<int64_t> In, Out;
  OpAttrs Attrs;
};

struct Program {
  std::string Model;
  DType Type = DType::F32;
  int64_t Batch = 0, Seq = 0, Vocab = 0;
  OptimizerSpec Optimizer;
  std::vector<ParamSpec> Params;
  int64_t ArenaBytes = 0;
  std::vector<BufferSpec> Buffers;
  std::vector<Instruction> Instructions;
  int64_t Loss = -1;
  int64_t ForwardEnd = 0, OptimizerBegin = 0;
};

/// Parses and validates a whole program file image (container + payload).
Expected<Program> parseProgram(const std::string &FileBytes);
/// Reads PATH and parses it.
Expected<Program> loadProgramFile(const std::string &Path);
/// Parses and validates the JSON payload alone.
Expected<Program> parseProgramJson(const std::string &Json);
/// Checks every cross-reference and every instruction's operand shapes.
Status validateProgram(const Program &P);
/// Wraps a JSON payload in the container (what weft-compile writes).
std::string encodeProgramContainer(const std::string &Json,
                                   uint32_t Version = ProgramFormatVersion);
/// The readable listing printed by `weft-run --dump`.
std::string dumpProgram(const Program &P);

} // namespace weft

#endif // WEFT_RUNTIME_PROGRAM_H
