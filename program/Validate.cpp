//===- Validate.cpp - Cross-references and per-op operand shapes ----------===//
//
// Everything a kernel relies on is checked here, once, at load: operand
// counts, dtypes and shapes. A program that validates cannot make a kernel
// read or write out of bounds (ids in embedding and cross_entropy targets are
// data and are checked by the kernels).
//
//===----------------------------------------------------------------------===//
#include "program/Broadcast.h"
#include "program/Program.h"
#include "program/UniqueNames.h"
#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace weft {

namespace {

class InstChecker {
public:
  InstChecker(const Program &P, const Instruction &I, size_t Index)
      : P(P), I(I), Ctx("instructions[" + std::to_string(Index) + "] (" +
                        instructionName(I) + ")") {}

  Status run();

private:
  const BufferSpec &in(size_t K) const { return P.Buffers[I.In[K]]; }
  const BufferSpec &out(size_t K) const { return P.Buffers[I.Out[K]]; }

  Status fail(const std::string &Msg) const {
    return Status::error(Ctx + ": " + Msg);
  }
  Status counts(size_t NIn, size_t NOut) const {
    if (I.In.size() != NIn)
      return fail("expected " + std::to_string(NIn) + " inputs, got " +
                  std::to_string(I.In.size()));
    if (I.Out.size() != NOut)
      return fail("expected " + std::to_string(NOut) + " outputs, got " +
                  std::to_string(I.Out.size()));
    return Status::success();
  }
  std::string name(bool IsIn, size_t K) const {
    int64_t Id = IsIn ? I.In[K] : I.Out[K];
    return std::string(IsIn ? "in" : "out") + "[" + std::to_string(K) +
           "] (buffer " + std::to_string(Id) + ")";
  }
  /// Float operands have the program dtype, or bf16 (arena buffers of an
  /// f32 program: checkBuffer); ids are i32.
  Status isFloat(bool IsIn, size_t K) const {
    const BufferSpec &B = IsIn ? in(K) : out(K);
    if (B.Type != P.Type && B.Type != DType::BF16)
      return fail(name(IsIn, K) + " has dtype " + dtypeName(B.Type) +
                  ", expected " + dtypeName(P.Type) +
                  (P.Type == DType::F32 ? " or bf16" : ""));
    return Status::success();
  }
  /// in[0] and out[0] hold one dtype (ops that move or add, not convert).
  Status sameDtype() const {
    if (in(0).Type != out(0).Type)
      return fail("in[0] has dtype " + std::string(dtypeName(in(0).Type)) +
                  ", out[0] has " + dtypeName(out(0).Type));
    return Status::success();
  }
  Status isInt(bool IsIn, size_t K) const {
    const BufferSpec &B = IsIn ? in(K) : out(K);
    if (B.Type != DType::I32)
      return fail(name(IsIn, K) + " has dtype " + dtypeName(B.Type) +
                  ", expected i32");
    return Status::success();
  }
  Status floats(std::initializer_list<size_t> Ins,
                std::initializer_list<size_t> Outs) const {
    for (size_t K : Ins)
      WEFT_RETURN_IF_ERROR(isFloat(true, K));
    for (size_t K : Outs)
      WEFT_RETURN_IF_ERROR(isFloat(false, K));
    return Status::success();
  }
  /// A one-element operand (a loss, dloss); What names it in the message.
  Status scalar(bool IsIn, size_t K, const char *What) const {
    const BufferSpec &B = IsIn ? in(K) : out(K);
    if (B.numel() != 1)
      return fail(name(IsIn, K) + " (" + What + ") has shape " +
                  shapeString(B.Dims) + ", expected a scalar []");
    return Status::success();
  }
  /// Logits in[0] [R..., V] and i32 targets in[1] with the R elements of
  /// its rows; Rows gets R.
  Status logitsAndTargets(Shape &Rows) const {
    WEFT_RETURN_IF_ERROR(isInt(true, 1));
    WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 1));
    const BufferSpec &L = in(0);
    Rows.assign(L.Dims.begin(), L.Dims.end() - 1);
    if (in(1).numel() != numElements(Rows))
      return fail(name(true, 1) + " (targets) has shape " +
                  shapeString(in(1).Dims) + ", expected " +
                  std::to_string(numElements(Rows)) + " elements like " +
                  shapeString(Rows));
    return Status::success();
  }
  Status rankAtLeast(bool IsIn, size_t K, size_t R) const {
    const BufferSpec &B = IsIn ? in(K) : out(K);
    if (B.Dims.size() < R)
      return fail(name(IsIn, K) + " has shape " + shapeString(B.Dims) +
                  ", expected rank >= " + std::to_string(R));
    return Status::success();
  }
  Status shapeIs(bool IsIn, size_t K, const Shape &Want) const {
    const BufferSpec &B = IsIn ? in(K) : out(K);
    if (B.Dims != Want)
      return fail(name(IsIn, K) + " has shape " + shapeString(B.Dims) +
                  ", expected " + shapeString(Want));
    return Status::success();
  }
  /// Same element count (elementwise ops do not care about the split of
  /// leading dims).
  Status sameNumel(bool IsIn, size_t K, const BufferSpec &Ref,
                   const std::string &RefName) const {
    const BufferSpec &B = IsIn ? in(K) : out(K);
    if (B.numel() != Ref.numel())
      return fail(name(IsIn, K) + " has shape " + shapeString(B.Dims) + " (" +
                  std::to_string(B.numel()) + " elements), expected " +
                  std::to_string(Ref.numel()) + " elements like " + RefName +
                  " " + shapeString(Ref.Dims));
    return Status::success();
  }
  Status lastDimIs(bool IsIn, size_t K, int64_t D) const {
    const BufferSpec &B = IsIn ? in(K) : out(K);
    if (B.Dims.empty() || B.Dims.back() != D)
      return fail(name(IsIn, K) + " has shape " + shapeString(B.Dims) +
                  ", expected last dimension " + std::to_string(D));
    return Status::success();
  }
  /// A rows x D activation with a [D] per-feature vector.
  Status rowVector(bool IsIn, size_t K, int64_t D) const {
    return shapeIs(IsIn, K, Shape{D});
  }
  static int64_t rows(const BufferSpec &B) {
    return B.Dims.empty() ? 1 : B.numel() / std::max<int64_t>(B.Dims.back(), 1);
  }
  static int64_t last(const BufferSpec &B) {
    return B.Dims.empty() ? 1 : B.Dims.back();
  }

  Status checkMatmul() const;
  Status checkGeneric() const;
  Status checkBatchMatmul() const;
  Status checkAxes(const AxesList &A, const char *What) const;
  /// dim_axes: none, or one known list of axes per dim of X.
  Status checkDimAxes(const BufferSpec &X) const;
  /// checkAxes, and a communicator group must be in mesh.groups.
  Status checkGroup(const AxesList &A, const char *What) const;
  Status checkCollective() const;
  Status checkShardedAdamW() const;
  Status checkBlockTranspose() const;
  /// all_to_all and ring_shift: one group, one dtype, never in place.
  Status checkExchange() const;
  Status checkAllToAll() const;
  Status checkRingShift() const;
  Status checkRingAttention() const;
  Status checkAttention(bool Grad) const;
  Status checkNorm(bool Grad, bool HasBeta) const;
  Status checkVocabParallel() const;

  const Program &P;
  const Instruction &I;
  std::string Ctx;
};

// cross_entropy_stats: logits [R..., Vs], targets (R elements) -> stats
// [1, R..., 3]; cross_entropy_from_stats: stats [K, R..., 3] -> loss [];
// cross_entropy_stats_grad: logits, targets, stats [K, R..., 3] with K the
// shard count of vocab_axes, dloss [] -> dlogits like logits.
Status InstChecker::checkVocabParallel() const {
  const bool Stats = I.Op == OpKind::CrossEntropyStats,
             Loss = I.Op == OpKind::CrossEntropyFromStats;
  WEFT_RETURN_IF_ERROR(Stats  ? counts(2, 1)
                       : Loss ? counts(1, 1)
                              : counts(4, 1));
  if (!Stats && I.Attrs.Denominator < 1)
    return fail("attrs.denominator=" + std::to_string(I.Attrs.Denominator) +
                " must be positive");
  if (!Loss)
    WEFT_RETURN_IF_ERROR(checkAxes(I.Attrs.VocabAxes, "vocab_axes"));
  WEFT_RETURN_IF_ERROR(isFloat(true, 0));
  WEFT_RETURN_IF_ERROR(isFloat(false, 0));
  if (Loss) {
    WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 2));
    if (in(0).Dims.back() != 3)
      return fail(name(true, 0) + " (stats) has shape " +
                  shapeString(in(0).Dims) + ", expected [K, rows..., 3]");
    return scalar(false, 0, "loss");
  }
  Shape Rows;
  WEFT_RETURN_IF_ERROR(logitsAndTargets(Rows));
  Shape StatsShape = {Stats ? 1 : P.Devices.count(I.Attrs.VocabAxes)};
  StatsShape.insert(StatsShape.end(), Rows.begin(), Rows.end());
  StatsShape.push_back(3);
  if (Stats)
    return shapeIs(false, 0, StatsShape);
  WEFT_RETURN_IF_ERROR(isFloat(true, 2));
  WEFT_RETURN_IF_ERROR(isFloat(true, 3));
  if (in(2).Dims != StatsShape)
    return fail(name(true, 2) + " (stats) has shape " +
                shapeString(in(2).Dims) + ", expected " +
                shapeString(StatsShape) + " (one row of stats per shard)");
  WEFT_RETURN_IF_ERROR(scalar(true, 3, "dloss"));
  return shapeIs(false, 0, in(0).Dims);
}

Status InstChecker::checkMatmul() const {
  // Version 16: a linear layer's bias, in[2] (weft-fuse-bias).
  const bool Bias = I.In.size() == 3;
  if (Bias && P.Version < 16)
    return fail("a matmul's bias (in[2]) needs format version 16, the file "
                "is version " +
                std::to_string(P.Version));
  WEFT_RETURN_IF_ERROR(counts(Bias ? 3 : 2, 1));
  WEFT_RETURN_IF_ERROR(Bias ? floats({0, 1, 2}, {0}) : floats({0, 1}, {0}));
  for (size_t K = 0; K < 2; ++K)
    WEFT_RETURN_IF_ERROR(rankAtLeast(true, K, 1));
  WEFT_RETURN_IF_ERROR(rankAtLeast(false, 0, 1));
  const BufferSpec &A = in(0), &B = in(1), &C = out(0);
  int64_t M = I.Attrs.TransposeA ? last(A) : rows(A);
  int64_t KA = I.Attrs.TransposeA ? rows(A) : last(A);
  int64_t KB = I.Attrs.TransposeB ? last(B) : rows(B);
  int64_t N = I.Attrs.TransposeB ? rows(B) : last(B);
  if (KA != KB)
    return fail("inner dimensions differ: a " + shapeString(A.Dims) +
                (I.Attrs.TransposeA ? " (transposed)" : "") + " gives K=" +
                std::to_string(KA) + ", b " + shapeString(B.Dims) +
                (I.Attrs.TransposeB ? " (transposed)" : "") +
                " gives K=" + std::to_string(KB));
  if (rows(C) != M || last(C) != N)
    return fail("out[0] has shape " + shapeString(C.Dims) + " (2-D view [" +
                std::to_string(rows(C)) + "," + std::to_string(last(C)) +
                "]), expected a 2-D view [" + std::to_string(M) + "," +
                std::to_string(N) + "]");
  if (Bias && I.Attrs.TransposeA)
    return fail("a bias needs transpose_a=false");
  // bf16 rounds the product before its bias is added (two ops); one fused
  // op would round once on the CPU and twice on CUDA.
  if (Bias && C.Type == DType::BF16)
    return fail("a bias needs an f32 or f64 out[0], got bf16 (weft-fuse-bias "
                "leaves bf16's bias_add unfused)");
  return Bias ? rowVector(true, 2, N) : Status::success();
}

// The generic path's ops (docs/design.md decision 20).
Status InstChecker::checkGeneric() const {
  // Version 10 added select and the mask, extremum and clamp fns: a
  // version-9 runtime would refuse them by name.
  const bool Pw = I.Op == OpKind::Pointwise || I.Op == OpKind::PointwiseGrad;
  const bool Bin = I.Op == OpKind::Binary || I.Op == OpKind::BinaryGrad;
  const bool New = I.Op == OpKind::Select || I.Op == OpKind::SelectGrad ||
                   (Bin && I.Attrs.Binary >= BinaryFn::Eq) ||
                   (Pw && (isMaskFn(I.Attrs.Pointwise) ||
                           I.Attrs.Pointwise == PointwiseFn::ClampMin ||
                           I.Attrs.Pointwise == PointwiseFn::ClampMax));
  if (New && P.Version < 10) {
    std::string What = opName(I.Op);
    if (Bin)
      What = std::string("fn ") + binaryFnName(I.Attrs.Binary);
    size_t N;
    const PointwiseName *T = pointwiseNames(N);
    for (size_t K = 0; Pw && K < N; ++K)
      if (T[K].Fn == I.Attrs.Pointwise)
        What = std::string("fn ") + T[K].Name;
    return fail(What + " needs format version 10, the file is version " +
                std::to_string(P.Version));
  }
  switch (I.Op) {
  case OpKind::Pointwise:
  case OpKind::Softmax:
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    if (I.Op == OpKind::Softmax)
      WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 1));
    return shapeIs(false, 0, in(0).Dims);
  case OpKind::PointwiseGrad:
  case OpKind::SoftmaxGrad:
    WEFT_RETURN_IF_ERROR(counts(2, 1));
    WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
    if (I.Op == OpKind::SoftmaxGrad)
      WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 1));
    WEFT_RETURN_IF_ERROR(shapeIs(true, 1, in(0).Dims));
    return shapeIs(false, 0, in(0).Dims);
  case OpKind::Binary:
  case OpKind::BinaryGrad: {
    bool Grad = I.Op == OpKind::BinaryGrad;
    WEFT_RETURN_IF_ERROR(counts(Grad ? 3 : 2, 1));
    WEFT_RETURN_IF_ERROR(Grad ? floats({0, 1, 2}, {0}) : floats({0, 1}, {0}));
    Shape Full;
    if (!broadcastShapes(in(0).Dims, in(1).Dims, Full))
      return fail("in[0] " + shapeString(in(0).Dims) + " and in[1] " +
                  shapeString(in(1).Dims) + " do not broadcast");
    if (!Grad)
      return shapeIs(false, 0, Full);
    WEFT_RETURN_IF_ERROR(shapeIs(true, 2, Full));
    return shapeIs(false, 0, in(size_t(I.Attrs.Operand)).Dims);
  }
  case OpKind::Select: {
    WEFT_RETURN_IF_ERROR(counts(3, 1));
    WEFT_RETURN_IF_ERROR(floats({0, 1, 2}, {0}));
    Shape Ab, Full;
    if (!broadcastShapes(in(1).Dims, in(2).Dims, Ab) ||
        !broadcastShapes(in(0).Dims, Ab, Full))
      return fail("in[0] " + shapeString(in(0).Dims) + ", in[1] " +
                  shapeString(in(1).Dims) + " and in[2] " +
                  shapeString(in(2).Dims) + " do not broadcast");
    return shapeIs(false, 0, Full);
  }
  case OpKind::SelectGrad:
    WEFT_RETURN_IF_ERROR(counts(2, 1));
    WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
    for (auto [Small, What] :
         {std::pair<const Shape *, const char *>{&in(0).Dims, "in[0] (cond) "},
          {&out(0).Dims, "out[0] "}})
      if (!broadcastsTo(*Small, in(1).Dims))
        return fail(std::string(What) + shapeString(*Small) +
                    " does not broadcast to in[1] (dy) " +
                    shapeString(in(1).Dims));
    return Status::success();
  case OpKind::Broadcast:
  case OpKind::Reduce: {
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    WEFT_RETURN_IF_ERROR(sameDtype());
    bool Up = I.Op == OpKind::Broadcast;
    const Shape &Small = Up ? in(0).Dims : out(0).Dims;
    const Shape &Big = Up ? out(0).Dims : in(0).Dims;
    if (!broadcastsTo(Small, Big))
      return fail(std::string(Up ? "in[0] " : "out[0] ") + shapeString(Small) +
                  " does not broadcast to " + (Up ? "out[0] " : "in[0] ") +
                  shapeString(Big));
    return Status::success();
  }
  case OpKind::Reshape:
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    WEFT_RETURN_IF_ERROR(sameDtype());
    return sameNumel(false, 0, in(0), "in[0]");
  case OpKind::Transpose: {
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    WEFT_RETURN_IF_ERROR(sameDtype());
    const Shape &X = in(0).Dims;
    const std::vector<int64_t> &Perm = I.Attrs.Perm;
    if (Perm.size() != X.size())
      return fail("perm has " + std::to_string(Perm.size()) +
                  " entries, in[0] " + shapeString(X) + " has rank " +
                  std::to_string(X.size()));
    std::vector<bool> Seen(X.size(), false);
    Shape Want;
    for (size_t K = 0; K < Perm.size(); ++K) {
      if (Perm[K] < 0 || Perm[K] >= int64_t(X.size()) || Seen[Perm[K]])
        return fail("perm[" + std::to_string(K) + "]=" +
                    std::to_string(Perm[K]) + " is out of range or repeated");
      Seen[Perm[K]] = true;
      Want.push_back(X[Perm[K]]);
    }
    return shapeIs(false, 0, Want);
  }
  case OpKind::BatchMatmul:
    return checkBatchMatmul();
  default:
    return fail("not a generic op");
  }
}

Status InstChecker::checkBatchMatmul() const {
  WEFT_RETURN_IF_ERROR(counts(2, 1));
  WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
  WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 2));
  const Shape &A = in(0).Dims, &B = in(1).Dims;
  size_t R = A.size();
  if (B.size() != R || !std::equal(A.begin(), A.end() - 2, B.begin()))
    return fail("in[0] " + shapeString(A) + " and in[1] " + shapeString(B) +
                " must have the same batch dims");
  bool TA = I.Attrs.TransposeA, TB = I.Attrs.TransposeB;
  int64_t M = A[TA ? R - 1 : R - 2], KA = A[TA ? R - 2 : R - 1];
  int64_t KB = B[TB ? R - 1 : R - 2], N = B[TB ? R - 2 : R - 1];
  if (KA != KB)
    return fail("inner dimensions differ: a " + shapeString(A) +
                " gives K=" + std::to_string(KA) + ", b " + shapeString(B) +
                " gives K=" + std::to_string(KB));
  Shape Want(A.begin(), A.end() - 2);
  Want.push_back(M);
  Want.push_back(N);
  return shapeIs(false, 0, Want);
}

Status InstChecker::checkDimAxes(const BufferSpec &X) const {
  const std::vector<AxesList> &D = I.Attrs.DimAxes;
  if (D.empty())
    return Status::success();
  if (D.size() != X.Dims.size())
    return fail("attrs.dim_axes has " + std::to_string(D.size()) +
                " entries, expected " + std::to_string(X.Dims.size()) +
                " (one per dim of " + shapeString(X.Dims) + ")");
  for (const AxesList &A : D)
    WEFT_RETURN_IF_ERROR(checkAxes(A, "dim_axes"));
  return Status::success();
}

Status InstChecker::checkAxes(const AxesList &A, const char *What) const {
  for (size_t K = 0; K < A.size(); ++K) {
    if (P.Devices.axisIndex(A[K]) < 0)
      return fail(std::string("attrs.") + What + " names axis '" + A[K] +
                  "', not an axis of the mesh " + P.Devices.describe());
    for (size_t J = 0; J < K; ++J)
      if (A[J] == A[K])
        return fail(std::string("attrs.") + What + " repeats axis '" + A[K] +
                    "'");
  }
  return Status::success();
}

Status InstChecker::checkGroup(const AxesList &A, const char *What) const {
  WEFT_RETURN_IF_ERROR(checkAxes(A, What));
  if (A.empty() || P.Devices.Axes.empty())
    return Status::success();
  for (const AxesList &G : P.Devices.Groups)
    if (G == A)
      return Status::success();
  return fail(std::string("attrs.") + What + " " + axesString(A) +
              " is not one of mesh.groups (every communicator group is "
              "declared there)");
}

Status InstChecker::checkCollective() const {
  WEFT_RETURN_IF_ERROR(counts(1, 1));
  WEFT_RETURN_IF_ERROR(checkGroup(I.Attrs.Axes, "axes"));
  const BufferSpec &X = in(0), &Y = out(0);
  WEFT_RETURN_IF_ERROR(sameDtype());
  int64_t C = P.Devices.count(I.Attrs.Axes);
  if (I.In[0] == I.Out[0]) {
    // The one in-place collective: each rank's block of dim 0 gathered into
    // the same buffer (a ZeRO update's parameter, after adamw).
    if (I.Op != OpKind::AllGather || I.Attrs.Dim != 0 || I.Attrs.Async)
      return fail("in[0] and out[0] are the same buffer " +
                  std::to_string(I.In[0]) +
                  "; only a blocking all_gather along dim 0 works in place");
    if (X.Dims.empty() || X.Dims[0] % C != 0)
      return fail("an in-place all_gather over " + std::to_string(C) +
                  " shards needs dim 0 of " + shapeString(X.Dims) +
                  " divisible by them");
    return Status::success();
  }
  if (I.Op == OpKind::AllReduce)
    return shapeIs(false, 0, X.Dims);
  int64_t D = I.Attrs.Dim;
  if (D < 0 || D >= int64_t(X.Dims.size()))
    return fail("attrs.dim=" + std::to_string(D) + " is outside [0, " +
                std::to_string(X.Dims.size()) + ") for in[0] " +
                shapeString(X.Dims));
  bool Gather = I.Op == OpKind::AllGather;
  // Communication moves contiguous blocks: along an inner dim, the program
  // block_transposes first (no hidden packing in the runtime).
  if (I.Op != OpKind::Slice && D > 0 &&
      numElements(Shape(X.Dims.begin(), X.Dims.begin() + D)) > 1)
    return fail("attrs.dim=" + std::to_string(D) + " of " +
                shapeString(X.Dims) +
                " has dims before it larger than 1: its blocks are not "
                "contiguous (block_transpose them to dim 0 first)");
  Shape Want = Gather ? X.Dims : Y.Dims;
  const BufferSpec &Small = Gather ? X : Y;
  const BufferSpec &Big = Gather ? Y : X;
  if (Big.Dims.size() != Small.Dims.size())
    return fail("out[0] " + shapeString(Y.Dims) + " and in[0] " +
                shapeString(X.Dims) + " differ in rank");
  Want = Small.Dims;
  Want[size_t(D)] *= C;
  if (Big.Dims != Want)
    return fail(std::string(Gather ? "out[0]" : "in[0]") + " has shape " +
                shapeString(Big.Dims) + ", expected " + shapeString(Want) +
                " (dim " + std::to_string(D) + " = " + std::to_string(C) +
                " shards x " + std::to_string(Small.Dims[size_t(D)]) + ")");
  return Status::success();
}

Status InstChecker::checkExchange() const {
  WEFT_RETURN_IF_ERROR(counts(1, 1));
  WEFT_RETURN_IF_ERROR(checkGroup(I.Attrs.Axes, "axes"));
  WEFT_RETURN_IF_ERROR(sameDtype());
  if (I.In[0] == I.Out[0])
    return fail("in[0] and out[0] are the same buffer " +
                std::to_string(I.In[0]) + "; " + opName(I.Op) +
                " does not work in place");
  return Status::success();
}

// x and y [c*b, ...]: block k of dim 0 goes to shard k, y's block k comes
// from shard k (contiguous blocks: the program block_transposes first).
Status InstChecker::checkAllToAll() const {
  WEFT_RETURN_IF_ERROR(checkExchange());
  if (I.Attrs.Dim != 0)
    return fail("attrs.dim=" + std::to_string(I.Attrs.Dim) +
                ": all_to_all exchanges blocks of dim 0 (block_transpose "
                "them there first)");
  const int64_t C = P.Devices.count(I.Attrs.Axes);
  const BufferSpec &X = in(0);
  if (X.Dims.empty() || X.Dims[0] % C != 0)
    return fail("dim 0 of in[0] " + shapeString(X.Dims) +
                " is not divisible into " + std::to_string(C) + " blocks");
  return shapeIs(false, 0, X.Dims);
}

// x [d0, ..., dD, ...] -> y [c*d0, ..., dD/c, ...] with c = count(axes): y's
// block k (of dim 0) is x's block k of dim D; `inverse` the other way.
Status InstChecker::checkBlockTranspose() const {
  WEFT_RETURN_IF_ERROR(counts(1, 1));
  // It moves bytes: token ids gathered along the sequence too.
  WEFT_RETURN_IF_ERROR(sameDtype());
  WEFT_RETURN_IF_ERROR(checkAxes(I.Attrs.Axes, "axes"));
  const BufferSpec &Full = I.Attrs.Inverse ? out(0) : in(0);
  const int64_t C = P.Devices.count(I.Attrs.Axes), D = I.Attrs.Dim;
  if (D < 1 || D >= int64_t(Full.Dims.size()))
    return fail("attrs.dim=" + std::to_string(D) + " is outside [1, " +
                std::to_string(Full.Dims.size()) + ") for " +
                shapeString(Full.Dims));
  if (Full.Dims[size_t(D)] % C != 0)
    return fail("dim " + std::to_string(D) + " of " + shapeString(Full.Dims) +
                " is not divisible into " + std::to_string(C) + " blocks");
  Shape Moved = Full.Dims;
  Moved[0] *= C;
  Moved[size_t(D)] /= C;
  return I.Attrs.Inverse ? shapeIs(true, 0, Moved) : shapeIs(false, 0, Moved);
}

Status InstChecker::checkShardedAdamW() const {
  WEFT_RETURN_IF_ERROR(checkGroup(I.Attrs.ShardAxes, "shard_axes"));
  const BufferSpec &Par = in(0);
  int64_t C = P.Devices.count(I.Attrs.ShardAxes);
  if (Par.Dims.empty() || Par.Dims[0] % C != 0)
    return fail("shard_axes has " + std::to_string(C) +
                " shards, which must divide dim 0 of the param " +
                shapeString(Par.Dims));
  int64_t Block = Par.numel() / C;
  for (size_t K = 2; K < 4; ++K)
    if (in(K).numel() != Block)
      return fail(name(true, K) + " has " + std::to_string(in(K).numel()) +
                  " elements, expected the param's block of " +
                  std::to_string(Block) + " (" + std::to_string(Par.numel()) +
                  " / " + std::to_string(C) + " shards)");
  if (in(1).numel() != Par.numel() && in(1).numel() != Block)
    return fail(name(true, 1) + " (grad) has " + std::to_string(in(1).numel()) +
                " elements, expected " + std::to_string(Par.numel()) +
                " (the param) or " + std::to_string(Block) + " (its block)");
  return Status::success();
}

// ring_shift: x and y of one shape and dtype, y the previous shard's x.
Status InstChecker::checkRingShift() const {
  WEFT_RETURN_IF_ERROR(checkExchange());
  return shapeIs(false, 0, in(0).Dims);
}

// attention_block: q [B,Sq,H*hd], k, v [B,Sk,Hkv*hd] -> o like q, lse
// [B,H,Sq]; softmax_merge: o1, lse1, o2, lse2 -> o, lse; attention_block_grad:
// dy, q, k, v, o, lse -> dq, dk, dv.
Status InstChecker::checkRingAttention() const {
  const bool Merge = I.Op == OpKind::SoftmaxMerge,
             Grad = I.Op == OpKind::AttentionBlockGrad;
  WEFT_RETURN_IF_ERROR(Merge  ? counts(4, 2)
                       : Grad ? counts(6, 3)
                              : counts(3, 2));
  for (size_t K = 0; K < I.In.size(); ++K)
    WEFT_RETURN_IF_ERROR(isFloat(true, K));
  for (size_t K = 0; K < I.Out.size(); ++K)
    WEFT_RETURN_IF_ERROR(isFloat(false, K));
  const int64_t H = I.Attrs.NumHeads;
  const size_t QI = Merge ? 0 : Grad ? 1 : 0;
  WEFT_RETURN_IF_ERROR(rankAtLeast(true, QI, 3));
  const Shape &Q = in(QI).Dims;
  if (Q.size() != 3 || H <= 0 || Q[2] % H != 0)
    return fail(
        name(true, QI) + " has shape " + shapeString(Q) +
        ", expected [B,S,H*hd] with H = num_heads=" + std::to_string(H));
  const Shape Lse{Q[0], H, Q[1]};
  if (Merge) {
    WEFT_RETURN_IF_ERROR(shapeIs(true, 2, Q));
    WEFT_RETURN_IF_ERROR(shapeIs(false, 0, Q));
    for (size_t K : {1, 3})
      WEFT_RETURN_IF_ERROR(shapeIs(true, K, Lse));
    return shapeIs(false, 1, Lse);
  }
  const int64_t Hkv = I.Attrs.NumKvHeads;
  if (Hkv <= 0 || H % Hkv != 0)
    return fail("num_kv_heads=" + std::to_string(Hkv) +
                " must be positive and divide num_heads=" + std::to_string(H));
  WEFT_RETURN_IF_ERROR(checkAxes(I.Attrs.SeqAxes, "seq_axes"));
  const int64_t C = P.Devices.count(I.Attrs.SeqAxes);
  if (I.Attrs.SeqAxes.empty() || I.Attrs.RingStep < 0 || I.Attrs.RingStep >= C)
    return fail("ring_step=" + std::to_string(I.Attrs.RingStep) +
                " must be a step of the ring over seq_axes " +
                axesString(I.Attrs.SeqAxes) + " (0 to " +
                std::to_string(C - 1) + ")");
  WEFT_RETURN_IF_ERROR(rankAtLeast(true, QI + 1, 3));
  const Shape &Kv = in(QI + 1).Dims;
  const Shape KvWant{Q[0], Kv[1], Hkv * (Q[2] / H)};
  WEFT_RETURN_IF_ERROR(shapeIs(true, QI + 1, KvWant));
  WEFT_RETURN_IF_ERROR(shapeIs(true, QI + 2, KvWant));
  if (!Grad) {
    WEFT_RETURN_IF_ERROR(shapeIs(false, 0, Q));
    return shapeIs(false, 1, Lse);
  }
  WEFT_RETURN_IF_ERROR(shapeIs(true, 0, Q));
  WEFT_RETURN_IF_ERROR(shapeIs(true, 4, Q));
  WEFT_RETURN_IF_ERROR(shapeIs(true, 5, Lse));
  WEFT_RETURN_IF_ERROR(shapeIs(false, 0, Q));
  WEFT_RETURN_IF_ERROR(shapeIs(false, 1, KvWant));
  return shapeIs(false, 2, KvWant);
}

Status InstChecker::checkAttention(bool Grad) const {
  WEFT_RETURN_IF_ERROR(Grad ? counts(4, 3) : counts(3, 1));
  if (Grad)
    WEFT_RETURN_IF_ERROR(floats({0, 1, 2, 3}, {0, 1, 2}));
  else
    WEFT_RETURN_IF_ERROR(floats({0, 1, 2}, {0}));
  size_t QI = Grad ? 1 : 0;
  int64_t H = I.Attrs.NumHeads, Hkv = I.Attrs.NumKvHeads;
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0)
    return fail("num_kv_heads=" + std::to_string(Hkv) +
                " must be positive and divide num_heads=" + std::to_string(H));
  WEFT_RETURN_IF_ERROR(rankAtLeast(true, QI, 3));
  const BufferSpec &Q = in(QI);
  if (Q.Dims.size() != 3)
    return fail(name(true, QI) + " has shape " + shapeString(Q.Dims) +
                ", expected [B,S,H*hd]");
  if (Q.Dims[2] % H != 0)
    return fail("num_heads=" + std::to_string(H) +
                " does not divide q's last dimension " +
                std::to_string(Q.Dims[2]));
  int64_t Hd = Q.Dims[2] / H;
  // Context parallelism (version 14): the queries are the rank's block of
  // seq_axes, the keys and values the whole sequence.
  WEFT_RETURN_IF_ERROR(checkAxes(I.Attrs.SeqAxes, "seq_axes"));
  if (!I.Attrs.SeqAxes.empty() && P.Version < 14)
    return fail("attention seq_axes needs format version 14, the file is "
                "version " +
                std::to_string(P.Version));
  Shape KvShape{Q.Dims[0], Q.Dims[1] * P.Devices.count(I.Attrs.SeqAxes),
                Hkv * Hd};
  WEFT_RETURN_IF_ERROR(shapeIs(true, QI + 1, KvShape));
  WEFT_RETURN_IF_ERROR(shapeIs(true, QI + 2, KvShape));
  if (Grad) {
    WEFT_RETURN_IF_ERROR(shapeIs(true, 0, Q.Dims));
    WEFT_RETURN_IF_ERROR(shapeIs(false, 0, Q.Dims));
    WEFT_RETURN_IF_ERROR(shapeIs(false, 1, KvShape));
    WEFT_RETURN_IF_ERROR(shapeIs(false, 2, KvShape));
  } else {
    WEFT_RETURN_IF_ERROR(shapeIs(false, 0, Q.Dims));
  }
  return Status::success();
}

Status InstChecker::checkNorm(bool Grad, bool HasBeta) const {
  size_t NIn = Grad ? 3 : (HasBeta ? 3 : 2);
  size_t NOut = Grad ? (HasBeta ? 3 : 2) : 1;
  WEFT_RETURN_IF_ERROR(counts(NIn, NOut));
  for (size_t K = 0; K < NIn; ++K)
    WEFT_RETURN_IF_ERROR(isFloat(true, K));
  for (size_t K = 0; K < NOut; ++K)
    WEFT_RETURN_IF_ERROR(isFloat(false, K));
  size_t XI = Grad ? 1 : 0;
  WEFT_RETURN_IF_ERROR(rankAtLeast(true, XI, 1));
  const BufferSpec &X = in(XI);
  int64_t D = last(X);
  WEFT_RETURN_IF_ERROR(rowVector(true, XI + 1, D)); // gamma
  if (!Grad) {
    if (HasBeta)
      WEFT_RETURN_IF_ERROR(rowVector(true, 2, D));
    return shapeIs(false, 0, X.Dims);
  }
  WEFT_RETURN_IF_ERROR(shapeIs(true, 0, X.Dims)); // dy
  WEFT_RETURN_IF_ERROR(shapeIs(false, 0, X.Dims));
  WEFT_RETURN_IF_ERROR(rowVector(false, 1, D));
  if (HasBeta)
    WEFT_RETURN_IF_ERROR(rowVector(false, 2, D));
  return Status::success();
}

Status InstChecker::run() {
  for (size_t K = 0; K < I.In.size(); ++K)
    if (I.In[K] < 0 || I.In[K] >= int64_t(P.Buffers.size()))
      return fail("in[" + std::to_string(K) + "] buffer id " +
                  std::to_string(I.In[K]) + " out of range [0, " +
                  std::to_string(P.Buffers.size()) + ")");
  for (size_t K = 0; K < I.Out.size(); ++K)
    if (I.Out[K] < 0 || I.Out[K] >= int64_t(P.Buffers.size()))
      return fail("out[" + std::to_string(K) + "] buffer id " +
                  std::to_string(I.Out[K]) + " out of range [0, " +
                  std::to_string(P.Buffers.size()) + ")");
  if (I.Attrs.Async && I.Op != OpKind::AllReduce && I.Op != OpKind::AllGather &&
      I.Op != OpKind::ReduceScatter && I.Op != OpKind::RingShift)
    return fail("attrs.async is only allowed on all_reduce, all_gather, "
                "reduce_scatter and ring_shift");
  // A gradient stored unreduced (ZeRO-1) is read only by the reduction over
  // the axes it is partial over: anything else would use a partial sum. A
  // wait uses no value: it completes the async collective that stores it
  // (a reduce-scatter over tp into a gradient still partial over dp).
  for (size_t K = 0; K < I.In.size(); ++K) {
    const BufferSpec &B = P.Buffers[size_t(I.In[K])];
    if (B.Partial.empty() || I.Op == OpKind::Wait)
      continue;
    const bool Reduces =
        I.Op == OpKind::ReduceScatter || I.Op == OpKind::AllReduce;
    if (!Reduces)
      return fail(name(true, K) + " (grad) is partial over " +
                  axesString(B.Partial) +
                  "; only a reduce_scatter or all_reduce over them may read "
                  "it");
    if (I.Attrs.Axes != B.Partial)
      return fail(name(true, K) + " (grad) is partial over " +
                  axesString(B.Partial) + ", but this " + opName(I.Op) +
                  " reduces over " + axesString(I.Attrs.Axes));
  }

  switch (I.Op) {
  case OpKind::Embedding:
  case OpKind::EmbeddingGrad: {
    bool Grad = I.Op == OpKind::EmbeddingGrad;
    // Version 17: the gradient it is added to, in[2] (weft-fuse-table-grad).
    const bool Base = Grad && I.In.size() == 3;
    if (Base && P.Version < 17)
      return fail("an embedding_grad's base (in[2]) needs format version 17, "
                  "the file is version " +
                  std::to_string(P.Version));
    WEFT_RETURN_IF_ERROR(counts(Base ? 3 : 2, 1));
    WEFT_RETURN_IF_ERROR(isInt(true, 1));
    WEFT_RETURN_IF_ERROR(Base ? floats({0, 2}, {0}) : floats({0}, {0}));
    if (Base && (in(2).Dims != out(0).Dims || in(2).Type != out(0).Type ||
                 out(0).Type == DType::BF16))
      return fail(name(true, 2) + " (the base) is " + dtypeName(in(2).Type) +
                  shapeString(in(2).Dims) + ", expected out[0]'s " +
                  dtypeName(out(0).Type) + shapeString(out(0).Dims) +
                  ", f32 or f64");
    const BufferSpec &Table = Grad ? out(0) : in(0);
    const BufferSpec &Act = Grad ? in(0) : out(0);
    if (Table.Dims.size() != 2)
      return fail(name(!Grad, 0) + " (the table) has shape " +
                  shapeString(Table.Dims) + ", expected [V,D]");
    WEFT_RETURN_IF_ERROR(checkAxes(I.Attrs.VocabAxes, "vocab_axes"));
    Shape Want = in(1).Dims;
    Want.push_back(Table.Dims[1]);
    if (Act.Dims != Want)
      return fail(name(Grad, 0) + " has shape " + shapeString(Act.Dims) +
                  ", expected " + shapeString(Want) + " (ids shape + [D])");
    return Status::success();
  }
  case OpKind::PositionEmbedding:
  case OpKind::PositionEmbeddingGrad: {
    bool Grad = I.Op == OpKind::PositionEmbeddingGrad;
    WEFT_RETURN_IF_ERROR(Grad ? counts(1, 1) : counts(2, 1));
    if (Grad)
      WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    else
      WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
    const BufferSpec &X = in(0);
    const BufferSpec &Table = Grad ? out(0) : in(1);
    if (X.Dims.size() != 3)
      return fail(name(true, 0) + " has shape " + shapeString(X.Dims) +
                  ", expected [B,S,D]");
    WEFT_RETURN_IF_ERROR(checkAxes(I.Attrs.SeqAxes, "seq_axes"));
    WEFT_RETURN_IF_ERROR(checkDimAxes(X));
    if (I.Attrs.TokenTypes && P.Version < 13)
      return fail("token_types needs format version 13, the file is "
                  "version " +
                  std::to_string(P.Version));
    // Positions read rows [0, S); token types any row of the table.
    int64_t SGlobal =
        I.Attrs.TokenTypes ? 1 : X.Dims[1] * P.Devices.count(I.Attrs.SeqAxes);
    if (Table.Dims.size() != 2 || Table.Dims[1] != X.Dims[2] ||
        Table.Dims[0] < SGlobal)
      return fail("the table has shape " + shapeString(Table.Dims) +
                  ", expected [P," + std::to_string(X.Dims[2]) +
                  "] with P >= " + std::to_string(SGlobal));
    return Grad ? Status::success() : shapeIs(false, 0, X.Dims);
  }
  case OpKind::Matmul:
    return checkMatmul();
  case OpKind::Pointwise:
  case OpKind::PointwiseGrad:
  case OpKind::Binary:
  case OpKind::BinaryGrad:
  case OpKind::Broadcast:
  case OpKind::Reduce:
  case OpKind::Reshape:
  case OpKind::Transpose:
  case OpKind::Softmax:
  case OpKind::SoftmaxGrad:
  case OpKind::BatchMatmul:
  case OpKind::Select:
  case OpKind::SelectGrad:
    return checkGeneric();
  case OpKind::BiasAdd:
    WEFT_RETURN_IF_ERROR(counts(2, 1));
    WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
    WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 1));
    WEFT_RETURN_IF_ERROR(rowVector(true, 1, last(in(0))));
    return shapeIs(false, 0, in(0).Dims);
  case OpKind::AddRow: {
    WEFT_RETURN_IF_ERROR(counts(2, 1));
    WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
    WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 1));
    const Shape &T = in(1).Dims;
    if (T.size() != 2 || T[1] != last(in(0)) || I.Attrs.Row < 0 ||
        I.Attrs.Row >= T[0])
      return fail(name(true, 1) + " (table) is " + shapeString(T) +
                  ", expected [rows, " + std::to_string(last(in(0))) +
                  "] with row " + std::to_string(I.Attrs.Row) + " inside");
    return shapeIs(false, 0, in(0).Dims);
  }
  case OpKind::RowGrad:
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    if (in(0).Dims.size() != 1 || I.Attrs.Row < 0 ||
        I.Attrs.Row >= I.Attrs.Rows)
      return fail(name(true, 0) + " is " + shapeString(in(0).Dims) +
                  ", expected a vector placed at row " +
                  std::to_string(I.Attrs.Row) + " of " +
                  std::to_string(I.Attrs.Rows));
    return shapeIs(false, 0, Shape{I.Attrs.Rows, in(0).Dims[0]});
  case OpKind::ReduceRows:
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    WEFT_RETURN_IF_ERROR(rankAtLeast(true, 0, 1));
    return rowVector(false, 0, last(in(0)));
  case OpKind::Add:
  case OpKind::Mul:
    WEFT_RETURN_IF_ERROR(counts(2, 1));
    WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
    WEFT_RETURN_IF_ERROR(sameNumel(true, 1, in(0), "in[0]"));
    return sameNumel(false, 0, in(0), "in[0]");
  case OpKind::Split:
  case OpKind::Concat: {
    bool IsSplit = I.Op == OpKind::Split;
    const std::vector<int64_t> &Parts = IsSplit ? I.Out : I.In;
    if ((IsSplit ? I.In.size() : I.Out.size()) != 1 || Parts.empty())
      return fail(IsSplit ? "expected 1 input and at least 1 output"
                          : "expected at least 1 input and 1 output");
    const BufferSpec &Whole = IsSplit ? in(0) : out(0);
    WEFT_RETURN_IF_ERROR(isFloat(IsSplit, 0));
    WEFT_RETURN_IF_ERROR(rankAtLeast(IsSplit, 0, 1));
    if (IsSplit && I.Attrs.Sizes.size() != Parts.size())
      return fail("attrs.sizes has " + std::to_string(I.Attrs.Sizes.size()) +
                  " entries, expected one per output (" +
                  std::to_string(Parts.size()) + ")");
    int64_t Sum = 0;
    for (size_t K = 0; K < Parts.size(); ++K) {
      WEFT_RETURN_IF_ERROR(isFloat(!IsSplit, K));
      const BufferSpec &Part = P.Buffers[Parts[K]];
      Shape Want = Whole.Dims;
      Want.back() = IsSplit ? I.Attrs.Sizes[K] : last(Part);
      WEFT_RETURN_IF_ERROR(shapeIs(!IsSplit, K, Want));
      Sum += Want.back();
    }
    if (Sum != last(Whole))
      return fail("parts sum to " + std::to_string(Sum) +
                  " along the last dimension, expected " +
                  std::to_string(last(Whole)));
    return Status::success();
  }
  case OpKind::LayerNorm:
    return checkNorm(false, true);
  case OpKind::LayerNormGrad:
    return checkNorm(true, true);
  case OpKind::RmsNorm:
    return checkNorm(false, false);
  case OpKind::RmsNormGrad:
    return checkNorm(true, false);
  case OpKind::Gelu:
  case OpKind::Silu:
  case OpKind::Act:
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    return sameNumel(false, 0, in(0), "in[0]");
  case OpKind::GeluGrad:
  case OpKind::SiluGrad:
  case OpKind::ActGrad:
  case OpKind::Swiglu:
    WEFT_RETURN_IF_ERROR(counts(2, 1));
    WEFT_RETURN_IF_ERROR(floats({0, 1}, {0}));
    WEFT_RETURN_IF_ERROR(sameNumel(true, 1, in(0), "in[0]"));
    return sameNumel(false, 0, in(0), "in[0]");
  case OpKind::SwigluGrad:
    WEFT_RETURN_IF_ERROR(counts(3, 2));
    WEFT_RETURN_IF_ERROR(floats({0, 1, 2}, {0, 1}));
    WEFT_RETURN_IF_ERROR(sameNumel(true, 1, in(0), "in[0]"));
    WEFT_RETURN_IF_ERROR(sameNumel(true, 2, in(0), "in[0]"));
    WEFT_RETURN_IF_ERROR(sameNumel(false, 0, in(0), "in[0]"));
    return sameNumel(false, 1, in(0), "in[0]");
  case OpKind::Rope: {
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    const BufferSpec &X = in(0);
    if (X.Dims.size() != 3)
      return fail(name(true, 0) + " has shape " + shapeString(X.Dims) +
                  ", expected [B,S,H*hd]");
    WEFT_RETURN_IF_ERROR(checkDimAxes(X));
    int64_t H = I.Attrs.NumHeads;
    if (H <= 0 || X.Dims[2] % H != 0 || (X.Dims[2] / H) % 2 != 0)
      return fail("num_heads=" + std::to_string(H) +
                  " must divide the last dimension " +
                  std::to_string(X.Dims[2]) + " into even head sizes");
    WEFT_RETURN_IF_ERROR(checkAxes(I.Attrs.SeqAxes, "seq_axes"));
    if (!I.Attrs.SeqAxes.empty() && P.Version < 14)
      return fail("rope seq_axes needs format version 14, the file is "
                  "version " +
                  std::to_string(P.Version));
    const std::vector<double> &F = I.Attrs.InvFreq;
    if (!F.empty() && int64_t(F.size()) != X.Dims[2] / H / 2)
      return fail(
          "attrs.inv_freq has " + std::to_string(F.size()) +
          " entries, expected head_dim/2=" + std::to_string(X.Dims[2] / H / 2));
    for (size_t K = 0; K < F.size(); ++K)
      if (!std::isfinite(F[K]) || !(F[K] > 0))
        return fail("attrs.inv_freq[" + std::to_string(K) +
                    "] must be finite and positive");
    if (!std::isfinite(I.Attrs.Scale) || !(I.Attrs.Scale > 0) ||
        (F.empty() && (!std::isfinite(I.Attrs.Theta) || !(I.Attrs.Theta > 0))))
      return fail("attrs.theta and attrs.scale must be finite and positive");
    return shapeIs(false, 0, X.Dims);
  }
  case OpKind::Attention:
  case OpKind::AttentionGrad:
    WEFT_RETURN_IF_ERROR(checkAttention(I.Op == OpKind::AttentionGrad));
    if ((I.Attrs.DropP > 0 || I.Attrs.Window > 0) && P.Version < 12)
      return fail("attention dropout or a window needs format version 12, "
                  "the file is version " +
                  std::to_string(P.Version));
    if (I.Attrs.KeyPadding && P.Version < 13)
      return fail("attention key_padding needs format version 13, the file "
                  "is version " +
                  std::to_string(P.Version));
    return checkDimAxes(in(I.Op == OpKind::Attention ? 0 : 1));
  case OpKind::Dropout:
    if (P.Version < 12)
      return fail("dropout needs format version 12, the file is version " +
                  std::to_string(P.Version));
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    WEFT_RETURN_IF_ERROR(shapeIs(false, 0, in(0).Dims));
    return checkDimAxes(in(0));
  case OpKind::CrossEntropy:
  case OpKind::CrossEntropyGrad: {
    bool Grad = I.Op == OpKind::CrossEntropyGrad;
    WEFT_RETURN_IF_ERROR(Grad ? counts(3, 1) : counts(2, 1));
    if (I.Attrs.Denominator < 0)
      return fail("attrs.denominator=" + std::to_string(I.Attrs.Denominator) +
                  " must be positive");
    WEFT_RETURN_IF_ERROR(isFloat(true, 0));
    WEFT_RETURN_IF_ERROR(isFloat(false, 0));
    Shape Rows;
    WEFT_RETURN_IF_ERROR(logitsAndTargets(Rows));
    if (Grad) {
      WEFT_RETURN_IF_ERROR(isFloat(true, 2));
      WEFT_RETURN_IF_ERROR(scalar(true, 2, "dloss"));
      return shapeIs(false, 0, in(0).Dims);
    }
    return scalar(false, 0, "loss");
  }
  case OpKind::CrossEntropyStats:
  case OpKind::CrossEntropyFromStats:
  case OpKind::CrossEntropyStatsGrad:
    return checkVocabParallel();
  case OpKind::MseLoss:
  case OpKind::MseLossGrad: {
    // (pred, target[, dloss]) of the program's float dtype, one shape.
    bool Grad = I.Op == OpKind::MseLossGrad;
    if (P.Version < 11)
      return fail(std::string(opName(I.Op)) +
                  " needs format version 11, the file is version " +
                  std::to_string(P.Version));
    WEFT_RETURN_IF_ERROR(Grad ? counts(3, 1) : counts(2, 1));
    if (I.Attrs.Denominator < 0)
      return fail("attrs.denominator=" + std::to_string(I.Attrs.Denominator) +
                  " must be non-negative (0: the local elements)");
    for (size_t K = 0; K < I.In.size(); ++K)
      if (in(K).Type != P.Type)
        return fail(name(true, K) + " is " + dtypeName(in(K).Type) +
                    ", expected the program's " + dtypeName(P.Type));
    if (out(0).Type != P.Type)
      return fail(name(false, 0) + " is " + dtypeName(out(0).Type) +
                  ", expected the program's " + dtypeName(P.Type));
    WEFT_RETURN_IF_ERROR(shapeIs(true, 1, in(0).Dims));
    if (Grad) {
      WEFT_RETURN_IF_ERROR(scalar(true, 2, "dloss"));
      return shapeIs(false, 0, in(0).Dims);
    }
    return scalar(false, 0, "loss");
  }
  case OpKind::Fill:
    return counts(0, 1);
  case OpKind::Accumulate:
    // y += x: the one op that reads what it writes besides adamw, so it
    // may only write a gradient (persistent, zeroed by prologue) or a step
    // sum in the arena (checkDataflow: written before, one instance).
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    if (out(0).Kind != BufferKind::Grad && out(0).Kind != BufferKind::Arena)
      return fail("out[0] is a " + std::string(bufferKindName(out(0).Kind)) +
                  " buffer, expected a grad or arena buffer");
    WEFT_RETURN_IF_ERROR(sameDtype());
    return shapeIs(false, 0, in(0).Dims);
  case OpKind::Copy:
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(sameDtype());
    return sameNumel(false, 0, in(0), "in[0]");
  case OpKind::Pack:
  case OpKind::Unpack: {
    // pack: tensors -> one flat buffer (a gradient bucket); unpack: inverse.
    bool IsPack = I.Op == OpKind::Pack;
    const std::vector<int64_t> &Pieces = IsPack ? I.In : I.Out;
    if ((IsPack ? I.Out.size() : I.In.size()) != 1 || Pieces.empty())
      return fail(IsPack ? "expected at least 1 input and 1 output"
                         : "expected 1 input and at least 1 output");
    const BufferSpec &Flat = IsPack ? out(0) : in(0);
    const int64_t Blocks = I.Attrs.Blocks;
    if (Blocks < 1)
      return fail("attrs.blocks is " + std::to_string(Blocks) +
                  ", expected at least 1");
    int64_t Total = 0;
    for (size_t K = 0; K < Pieces.size(); ++K) {
      const BufferSpec &Piece = IsPack ? in(K) : out(K);
      if (Piece.Type != Flat.Type)
        return fail(name(IsPack, K) + " has dtype " + dtypeName(Piece.Type) +
                    ", the packed buffer " + dtypeName(Flat.Type));
      if (Piece.numel() % Blocks != 0)
        return fail(name(IsPack, K) + " has " + std::to_string(Piece.numel()) +
                    " elements, not a multiple of attrs.blocks=" +
                    std::to_string(Blocks));
      Total += Piece.numel();
    }
    if (Total != Flat.numel())
      return fail("the packed buffer has " + std::to_string(Flat.numel()) +
                  " elements, the pieces " + std::to_string(Total));
    return Status::success();
  }
  case OpKind::AdamW:
    WEFT_RETURN_IF_ERROR(counts(4, 3));
    WEFT_RETURN_IF_ERROR(floats({0, 1, 2, 3}, {0, 1, 2}));
    if (I.Out[0] != I.In[0] || I.Out[1] != I.In[2] || I.Out[2] != I.In[3])
      return fail("updates in place: out must be [in[0], in[2], in[3]] = [" +
                  std::to_string(I.In[0]) + "," + std::to_string(I.In[2]) +
                  "," + std::to_string(I.In[3]) + "]");
    if (!I.Attrs.ShardAxes.empty())
      return checkShardedAdamW();
    for (size_t K = 1; K < 4; ++K)
      WEFT_RETURN_IF_ERROR(shapeIs(true, K, in(0).Dims));
    return Status::success();
  case OpKind::AllReduce:
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
  case OpKind::Slice:
    return checkCollective();
  case OpKind::AllToAll:
    return checkAllToAll();
  case OpKind::RingShift:
    return checkRingShift();
  case OpKind::SoftmaxMerge:
    return checkRingAttention();
  case OpKind::AttentionBlock:
  case OpKind::AttentionBlockGrad:
    WEFT_RETURN_IF_ERROR(checkRingAttention());
    return checkDimAxes(in(I.Op == OpKind::AttentionBlock ? 0 : 1));
  case OpKind::Wait:
    // Which start it completes: checkDataflow pairs them.
    return counts(1, 0);
  case OpKind::BlockTranspose:
    return checkBlockTranspose();
  case OpKind::Cast:
    WEFT_RETURN_IF_ERROR(counts(1, 1));
    WEFT_RETURN_IF_ERROR(floats({0}, {0}));
    if (in(0).Type == out(0).Type)
      return fail("casts " + std::string(dtypeName(in(0).Type)) + " to itself");
    return shapeIs(false, 0, in(0).Dims);
  }
  return fail("unhandled op");
}

/// Whether the program reads tokens [batch, seq]: the samples that labels
/// or float targets belong to.
bool readsTokenRows(const Program &P) {
  return std::any_of(P.Buffers.begin(), P.Buffers.end(),
                     [](const BufferSpec &T) {
                       return T.Kind == BufferKind::Input &&
                              T.Name == "tokens" && T.Dims.size() == 2;
                     });
}

Status checkBuffer(const Program &P, size_t Index) {
  const BufferSpec &B = P.Buffers[Index];
  std::string Ctx =
      "buffers[" + std::to_string(Index) + "] (" + bufferKindName(B.Kind) + ")";
  // bf16 is a compute type: activations in the arena of an f32 program
  // (parameters, gradients and optimizer state stay f32).
  const bool Bf16Ok = P.Type == DType::F32 && B.Kind == BufferKind::Arena;
  if (B.Type != DType::I32 && B.Type != P.Type &&
      !(B.Type == DType::BF16 && Bf16Ok))
    return Status::error(
        Ctx + " has dtype " + dtypeName(B.Type) +
        ", the program's float dtype is " + dtypeName(P.Type) +
        (B.Type == DType::BF16
             ? std::string(" (bf16 is for arena buffers of an f32 program)")
             : std::string()));
  switch (B.Kind) {
  case BufferKind::Input:
    // Version 8: a forward-only program may read named float tensors.
    if (B.tensorInput()) {
      if (P.Version < 8 || !P.forwardOnly())
        return Status::error(
            Ctx + " has name '" + B.Name + "', expected tokens or targets" +
            (P.forwardOnly() ? " (tensor inputs need format version 8)"
                             : " (a training program reads token ids "
                               "only)"));
      if (B.Name.empty())
        return Status::error(Ctx + " has an empty name");
      if (B.Type != P.Type)
        return Status::error(Ctx + " '" + B.Name + "' is " + dtypeName(B.Type) +
                             ", expected the program's " + dtypeName(P.Type));
      // Repeated names: checkInputNames, once for all inputs.
      return Status::success();
    }
    // Version 11: one target per sample, on given targets (a token file
    // has no labels of samples).
    if (B.Type == DType::I32 && B.Dims.size() == 1 && B.Name == "targets") {
      if (P.Version < 11)
        return Status::error(Ctx + " 'targets' is " + shapeString(B.Dims) +
                             ": one target per sample needs format version "
                             "11, the file is version " +
                             std::to_string(P.Version));
      if (!P.givenTargets())
        return Status::error(Ctx + " 'targets' is " + shapeString(B.Dims) +
                             " (one per sample), but the program's "
                             "cross-entropy is not on given targets (masked, "
                             "without masked_lm)");
      // The samples' rows and their split are the tokens'.
      if (!readsTokenRows(P))
        return Status::error(Ctx + " 'targets' is " + shapeString(B.Dims) +
                             " (one per sample), but the program reads no "
                             "tokens [batch, seq] whose samples they label");
      return Status::success();
    }
    // Version 11: float targets, a regression's (mse_loss reads them).
    if (B.Type != DType::I32 && B.Name == "targets") {
      if (P.Version < 11 || B.Type != P.Type) // rank >= 1: checkTargetsKind
        return Status::error(
            Ctx + " 'targets' is " + dtypeName(B.Type) + " " +
            shapeString(B.Dims) +
            (P.Version < 11
                 ? ": float targets need format version 11, the file is "
                   "version " +
                       std::to_string(P.Version)
                 : ", expected i32 ids or labels, or float targets [batch, "
                   "...] of the program's " +
                       std::string(dtypeName(P.Type))));
      if (!readsTokenRows(P))
        return Status::error(Ctx + " 'targets' is " + dtypeName(B.Type) + " " +
                             shapeString(B.Dims) +
                             ", but the program reads no tokens [batch, seq] "
                             "whose samples they belong to");
      return Status::success();
    }
    if (B.Type != DType::I32 || B.Dims.size() != 2)
      return Status::error(Ctx + " '" + B.Name + "' is " + dtypeName(B.Type) +
                           " " + shapeString(B.Dims) + ", expected i32 " +
                           shapeString(Shape{P.microbatchRows(), P.Seq}) +
                           (B.Name == "targets" ? " (or one per sample)" : ""));
    // The block of [batch/microbatches, seq]: checkLayouts.
    return Status::success();
  case BufferKind::Arena: {
    // A pipeline stage may size its own arena.
    const int64_t Arena = B.StageIndex >= 0 &&
                                  B.StageIndex < int64_t(P.Stages.size()) &&
                                  P.Stages[size_t(B.StageIndex)].ArenaBytes >= 0
                              ? P.Stages[size_t(B.StageIndex)].ArenaBytes
                              : P.ArenaBytes;
    if (B.Offset < 0 || B.Offset % 64 != 0)
      return Status::error(Ctx + " offset " + std::to_string(B.Offset) +
                           " is not a non-negative multiple of 64");
    if (B.Offset > Arena || B.bytes() > Arena - B.Offset)
      return Status::error(
          Ctx + " " + shapeString(B.Dims) + " at offset " +
          std::to_string(B.Offset) + " needs bytes up to " +
          std::to_string(B.Offset + B.bytes()) +
          ", past arena_bytes=" + std::to_string(Arena) +
          (Arena != P.ArenaBytes
               ? " (stage " + std::to_string(B.StageIndex) + "'s)"
               : ""));
    // Either in the per-slot part or in the shared one, not across both.
    const int64_t Slot =
        B.StageIndex >= 0 && B.StageIndex < int64_t(P.Stages.size())
            ? P.Stages[size_t(B.StageIndex)].SlotBytes
            : -1;
    if (Slot >= 0 && B.Offset < Slot && B.Offset + B.bytes() > Slot)
      return Status::error(Ctx + " " + shapeString(B.Dims) + " at offset " +
                           std::to_string(B.Offset) + " needs bytes up to " +
                           std::to_string(B.Offset + B.bytes()) +
                           ", across stage " + std::to_string(B.StageIndex) +
                           "'s slot_bytes=" + std::to_string(Slot) +
                           " (the end of its per-slot part)");
    return Status::success();
  }
  case BufferKind::Constant:
    // Its bytes and its dtype's float kind: parseConstantData.
    if (B.Type != P.Type)
      return Status::error(Ctx + " is " + dtypeName(B.Type) +
                           ", expected the program's " + dtypeName(P.Type));
    return Status::success();
  default:
    if (B.Param < 0 || B.Param >= int64_t(P.Params.size()))
      return Status::error(Ctx + " param index " + std::to_string(B.Param) +
                           " out of range [0, " +
                           std::to_string(P.Params.size()) + ")");
    if (B.Type == P.Type && B.Kind != BufferKind::Param && B.HasLayout)
      return Status::success(); // its own layout, checked by checkLayouts
    if (B.Dims != P.Params[B.Param].Dims || B.Type != P.Type)
      return Status::error(
          Ctx + " of param '" + P.Params[B.Param].Name + "' is " +
          dtypeName(B.Type) + " " + shapeString(B.Dims) + ", expected " +
          dtypeName(P.Type) + " " + shapeString(P.Params[B.Param].Dims));
    return Status::success();
  }
}

/// Tensor inputs (version 8) have names of their own: each once.
Status checkInputNames(const Program &P) {
  return checkUniqueNames(P.Buffers.size(), "buffers", " (input)",
                          [&](size_t I) {
                            const BufferSpec &B = P.Buffers[I];
                            return B.tensorInput() ? &B.Name : nullptr;
                          });
}

/// Version 7: a forward-only program computes whole logits from tokens,
/// on one pipeline stage and one micro-batch, and holds nothing to train.
Status checkForwardOnly(const Program &P) {
  if (P.Loss != -1)
    return Status::error("a forward-only program (outputs) has loss " +
                         std::to_string(P.Loss) + ", expected -1");
  if (P.Microbatches != 1 || P.Stages.size() != 1 ||
      !P.Devices.Pipeline.empty())
    return Status::error(
        "a forward-only program has " + std::to_string(P.Microbatches) +
        " micro-batches and " + std::to_string(P.Stages.size()) + " stages" +
        (P.Devices.Pipeline.empty()
             ? ""
             : " on pipeline axis '" + P.Devices.Pipeline + "'") +
        ", expected 1 and 1 and no pipeline axis");
  // The runtime runs the forward alone: every instruction is in it.
  for (const Fragment &F : P.Stages.front().Fragments)
    if (F.Name != FragmentForward && F.End > F.Begin)
      return Status::error("fragment '" + F.Name +
                           "' of a forward-only "
                           "program holds " +
                           std::to_string(F.End - F.Begin) +
                           " instructions; only 'forward' may");
  for (size_t I = 0; I < P.Buffers.size(); ++I) {
    const BufferSpec &B = P.Buffers[I];
    // weft-run fills the tokens from a [batch, seq] array: every rank's
    // block lies in it.
    if (B.tokenInput() && B.Place.Global != Shape{P.Batch, P.Seq})
      return Status::error(
          "buffers[" + std::to_string(I) + "] (tokens) has global shape " +
          shapeString(B.Place.Global) + ", expected [" +
          std::to_string(P.Batch) + "," + std::to_string(P.Seq) + "]");
    bool Target = B.Kind == BufferKind::Input && B.Name == "targets";
    if (Target ||
        (B.Kind != BufferKind::Input && B.Kind != BufferKind::Arena &&
         B.Kind != BufferKind::Param && B.Kind != BufferKind::Constant))
      return Status::error(
          "buffers[" + std::to_string(I) + "] is " +
          (Target ? std::string("the targets input")
                  : "a " + std::string(bufferKindName(B.Kind)) + " buffer") +
          ", which a forward-only program does not have");
  }
  const bool Tokens = P.readsTokens(); // once: outputs may be many
  for (size_t I = 0; I < P.Outputs.size(); ++I) {
    const int64_t Id = P.Outputs[I].Buffer;
    const std::string Ctx = "outputs[" + std::to_string(I) + "]";
    if (Id < 0 || Id >= int64_t(P.Buffers.size()))
      return Status::error(Ctx + " buffer id " + std::to_string(Id) +
                           " out of range [0, " +
                           std::to_string(P.Buffers.size()) + ")");
    const BufferSpec &B = P.Buffers[size_t(Id)];
    // logits: scores over the vocabulary; hidden: an encoder's states;
    // another name, or any in a program of tensor inputs alone (version
    // 8): any tensor the forward computes.
    // samples: one row per sample (a classifier's scores).
    const bool Logits = Tokens && P.Outputs[I].Name == "logits";
    const bool Hidden = Tokens && P.Outputs[I].Name == "hidden";
    const bool Samples = Tokens && P.Outputs[I].Name == "samples";
    const bool Fits =
        (!Logits && !Hidden && !Samples) ||
        (Samples && B.Dims.size() == 2 && B.Dims[0] == P.Batch &&
         B.Dims[1] >= 1) ||
        (B.Dims.size() == 3 && B.Dims[0] == P.Batch && B.Dims[1] == P.Seq &&
         (Logits ? B.Dims[2] == P.Vocab : B.Dims[2] >= 1));
    if (B.Kind != BufferKind::Arena || !Fits ||
        (B.Type != P.Type && B.Type != DType::BF16))
      return Status::error(
          Ctx + " (" + P.Outputs[I].Name + ") is buffer " + std::to_string(Id) +
          ", " + bufferKindName(B.Kind) + " " + dtypeName(B.Type) + " " +
          shapeString(B.Dims) + ", expected an arena buffer" +
          (Samples ? " [" + std::to_string(P.Batch) + ",N] [batch, N]"
           : Logits || Hidden
               ? " [" + std::to_string(P.Batch) + "," + std::to_string(P.Seq) +
                     "," +
                     (Logits ? std::to_string(P.Vocab) + "] [batch, seq, vocab]"
                             : std::string("N] [batch, seq, N]"))
               : std::string(" of the program's float dtype")) +
          ", whole on this rank");
  }
  return Status::success();
}

/// The targets' kind against the loss that reads them, before their
/// layouts (whose messages would otherwise speak of another kind): float
/// targets (a regression's) are read by mse ops alone, of rank >= 1, in a
/// program with no cross-entropy; mse ops read float targets.
Status checkTargetsKind(const Program &P) {
  const BufferSpec *T = P.targets();
  if (!T)
    return Status::success();
  const int64_t Id = T - P.Buffers.data();
  const std::string Ctx = "buffers[" + std::to_string(Id) +
                          "] (input) 'targets' " + dtypeName(T->Type) + " " +
                          shapeString(T->Dims);
  const bool Floats = T->Type != DType::I32;
  if (Floats && T->Dims.empty())
    return Status::error(Ctx +
                         ": float targets are [batch, ...], not a scalar");
  for (size_t I = 0; I < P.Instructions.size(); ++I) {
    const Instruction &Inst = P.Instructions[I];
    if (isMseLoss(Inst.Op) && !Floats &&
        std::count(Inst.In.begin(), Inst.In.end(), Id))
      return Status::error(Ctx + ": " + opName(Inst.Op) + " (instruction " +
                           std::to_string(I) +
                           ") reads it, but a regression's targets are floats "
                           "of the program's dtype");
    if (Floats && isCrossEntropy(Inst.Op))
      return Status::error(Ctx +
                           ": float targets are a regression's, but "
                           "instruction " +
                           std::to_string(I) + " is a " + opName(Inst.Op));
  }
  return Status::success();
}

// A padded vocabulary (version 15): its parameters agree on the model's
// rows, which are the token ids' bound, and every cross-entropy keeps the
// padding columns out of its softmax; `classes` without padded parameters
// would leave columns of the model out.
Status checkPaddedVocabulary(const Program &P) {
  int64_t Rows = 0;
  for (const ParamSpec &Par : P.Params) {
    if (Par.LogicalRows <= 0)
      continue;
    if (Rows != 0 && Par.LogicalRows != Rows)
      return Status::error("params '" + Par.Name + "' has logical_rows=" +
                           std::to_string(Par.LogicalRows) +
                           ", another padded parameter " +
                           std::to_string(Rows) + ": one vocabulary");
    Rows = Par.LogicalRows;
  }
  if (Rows != 0 && P.Vocab != Rows)
    return Status::error("vocab=" + std::to_string(P.Vocab) +
                         ", but the padded parameters have logical_rows=" +
                         std::to_string(Rows));
  for (size_t I = 0; I < P.Instructions.size(); ++I) {
    const Instruction &Inst = P.Instructions[I];
    if (!isCrossEntropy(Inst.Op) || Inst.Op == OpKind::CrossEntropyFromStats ||
        Inst.Attrs.Classes == Rows)
      continue;
    return Status::error("instructions[" + std::to_string(I) + "] (" +
                         opName(Inst.Op) +
                         ") has classes=" + std::to_string(Inst.Attrs.Classes) +
                         ", expected " + std::to_string(Rows) +
                         (Rows ? " (the padded vocabulary's logical_rows)"
                               : " (none: no parameter is padded)"));
  }
  return Status::success();
}

} // namespace

Status validateProgram(const Program &P) {
  // Token ids travel as int32 (the tokens and targets buffers). A
  // forward-only program of tensor inputs alone reads none: all three 0.
  const bool NoTokens = P.forwardOnly() && !P.readsTokens();
  if (NoTokens && (P.Batch != 0 || P.Seq != 0 || P.Vocab != 0))
    return Status::error("batch=" + std::to_string(P.Batch) +
                         ", seq=" + std::to_string(P.Seq) +
                         ", vocab=" + std::to_string(P.Vocab) +
                         " in a program that reads no token ids, expected 0");
  if (!NoTokens &&
      (P.Batch <= 0 || P.Seq <= 0 || P.Vocab <= 0 || P.Vocab > INT32_MAX))
    return Status::error("batch=" + std::to_string(P.Batch) +
                         ", seq=" + std::to_string(P.Seq) +
                         ", vocab=" + std::to_string(P.Vocab) +
                         " must be positive (vocab at most 2^31-1: ids are "
                         "int32)");
  // Targets bounded other than by the vocabulary come from the caller: a
  // token file's targets are token ids.
  if (P.Classes && (P.forwardOnly() || !P.givenTargets()))
    return Status::error(
        "classes=" + std::to_string(P.Classes) +
        (P.forwardOnly() ? " in a forward-only program, which has no targets"
                         : " bounds targets that are not token ids, but the "
                           "program's cross-entropy is not on given targets "
                           "(masked, without masked_lm)"));
  if (P.ArenaBytes < 0)
    return Status::error("arena_bytes=" + std::to_string(P.ArenaBytes) +
                         " is negative");
  // The program's arena is the largest: a stage's own fits in it.
  for (size_t S = 0; S < P.Stages.size(); ++S)
    if (P.Stages[S].ArenaBytes > P.ArenaBytes)
      return Status::error(
          "stages[" + std::to_string(S) +
          "]: arena_bytes=" + std::to_string(P.Stages[S].ArenaBytes) +
          " exceeds the program's arena_bytes=" + std::to_string(P.ArenaBytes));
  for (size_t S = 0; S < P.Stages.size(); ++S) {
    const Stage &St = P.Stages[S];
    const int64_t Arena = St.ArenaBytes >= 0 ? St.ArenaBytes : P.ArenaBytes;
    if (St.SlotBytes > Arena)
      return Status::error("stages[" + std::to_string(S) +
                           "]: slot_bytes=" + std::to_string(St.SlotBytes) +
                           " exceeds its arena_bytes=" + std::to_string(Arena));
    // The per-slot part once per slot, the rest once: at most 2^60.
    const int64_t Slot = St.SlotBytes >= 0 ? St.SlotBytes : Arena;
    if (St.Slots > 1 && Slot > ((int64_t(1) << 60) - Arena) / (St.Slots - 1))
      return Status::error(
          "stages[" + std::to_string(S) + "]: " + std::to_string(St.Slots) +
          " slots of " + std::to_string(Slot) + " bytes and " +
          std::to_string(Arena - Slot) + " shared arena bytes exceed 2^60");
  }
  WEFT_RETURN_IF_ERROR(
      checkUniqueNames(P.Params.size(), "params", "",
                       [&](size_t I) { return &P.Params[I].Name; }));
  WEFT_RETURN_IF_ERROR(checkTargetsKind(P));
  WEFT_RETURN_IF_ERROR(checkLayouts(P));
  for (size_t I = 0; I < P.Buffers.size(); ++I)
    WEFT_RETURN_IF_ERROR(checkBuffer(P, I));
  WEFT_RETURN_IF_ERROR(checkInputNames(P));
  for (size_t I = 0; I < P.Instructions.size(); ++I)
    WEFT_RETURN_IF_ERROR(InstChecker(P, P.Instructions[I], I).run());
  if (P.forwardOnly())
    WEFT_RETURN_IF_ERROR(checkForwardOnly(P));
  else if (P.Loss < 0 || P.Loss >= int64_t(P.Buffers.size()))
    return Status::error("loss buffer id " + std::to_string(P.Loss) +
                         " out of range [0, " +
                         std::to_string(P.Buffers.size()) + ")");
  // A recipe hides tokens for a masked loss the program computes (beside
  // none, it would hide them from a model trained on something else).
  if (!P.forwardOnly() && P.Loss >= 0 && P.MaskedLm.enabled()) {
    bool Computed = false;
    for (const Instruction &I : P.Instructions)
      Computed |= I.Attrs.Masked && (I.Op == OpKind::CrossEntropy ||
                                     I.Op == OpKind::CrossEntropyFromStats);
    if (!Computed)
      return Status::error("the program has a masked_lm recipe but no "
                           "masked cross_entropy computes its loss");
  }
  WEFT_RETURN_IF_ERROR(checkPaddedVocabulary(P));
  if (!P.forwardOnly()) {
    const BufferSpec &L = P.Buffers[P.Loss];
    if (L.numel() != 1 || L.Type != P.Type)
      return Status::error("loss buffer " + std::to_string(P.Loss) + " is " +
                           dtypeName(L.Type) + " " + shapeString(L.Dims) +
                           ", expected a " + dtypeName(P.Type) + " scalar []");
  }
  if (P.Stages.size() > 1 || !P.Devices.Pipeline.empty())
    return checkPipeline(P);
  for (size_t I = 0; I < P.Buffers.size(); ++I)
    if (P.Buffers[I].StageIndex != 0)
      return Status::error("buffers[" + std::to_string(I) + "] is on stage " +
                           std::to_string(P.Buffers[I].StageIndex) +
                           " of a program of one stage");
  WEFT_RETURN_IF_ERROR(checkSchedule(P));
  return checkDataflow(P);
}

} // namespace weft
