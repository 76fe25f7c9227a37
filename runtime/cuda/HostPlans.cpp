//===- HostPlans.cpp - The CUDA backend's decisions, free of CUDA ---------===//
#include "runtime/cuda/HostPlans.h"

#include <algorithm>

namespace weft {

bool lossTypedOperand(OpKind Op, bool IsOut, size_t K) {
  switch (Op) {
  case OpKind::CrossEntropy:
  case OpKind::CrossEntropyStats:
    return IsOut && K == 0;
  case OpKind::CrossEntropyGrad:
    return !IsOut && K == 2;
  case OpKind::CrossEntropyFromStats:
    return true;
  case OpKind::CrossEntropyStatsGrad:
    return !IsOut && (K == 2 || K == 3);
  default:
    return false;
  }
}

namespace {

bool movesBytes(OpKind K) {
  return K == OpKind::Copy || K == OpKind::Pack || K == OpKind::Unpack ||
         K == OpKind::Split || K == OpKind::Concat ||
         K == OpKind::BlockTranspose || K == OpKind::Cast;
}

template <typename F> void forOperands(const BoundInstruction &I, F Fn) {
  for (size_t K = 0; K < I.In.size(); ++K)
    Fn(I.In[K].Spec->Type, false, K);
  for (size_t K = 0; K < I.Out.size(); ++K)
    Fn(I.Out[K].Spec->Type, true, K);
}

} // namespace

Expected<KernelChoice> chooseKernel(const BoundInstruction &I) {
  KernelChoice C;
  if (movesBytes(I.Op)) {
    C.How = KernelChoice::Bytes;
    return C;
  }
  // The dtype of the operands that are not ids, targets or loss-typed.
  bool Found = false, Uniform = true;
  DType Main = DType::F32;
  forOperands(I, [&](DType T, bool IsOut, size_t K) {
    if (T == DType::I32 || lossTypedOperand(I.Op, IsOut, K))
      return;
    if (Found && T != Main)
      Uniform = false;
    if (!Found)
      Main = T;
    Found = true;
  });
  if (!Found) // only loss-typed and integer operands (from_stats, i32 fill)
    forOperands(I, [&](DType T, bool, size_t) {
      if (T != DType::I32 && !Found) {
        Main = T;
        Found = true;
      }
    });
  // Loss-typed operands are f32 beside bf16, else the main dtype.
  const DType Loss = Main == DType::BF16 ? DType::F32 : Main;
  forOperands(I, [&](DType T, bool IsOut, size_t K) {
    if (lossTypedOperand(I.Op, IsOut, K) && T != Loss &&
        I.Op != OpKind::CrossEntropyFromStats)
      Uniform = false;
  });
  if (Uniform) {
    C.How = KernelChoice::Native;
    C.Type = Main;
    return C;
  }
  bool F32AndBf16 = true;
  forOperands(I, [&](DType T, bool, size_t) {
    F32AndBf16 &= T == DType::F32 || T == DType::BF16 || T == DType::I32;
  });
  if (!F32AndBf16)
    return Status::error(describeInstruction(I) +
                         " mixes dtypes no CUDA kernel takes");
  C.How = KernelChoice::Widen;
  C.Type = DType::F32;
  return C;
}

ColumnMajorGemm columnMajorGemm(int64_t M, int64_t N, int64_t K, bool TransA,
                                bool TransB) {
  ColumnMajorGemm G;
  G.M = N;
  G.N = M;
  G.K = K;
  // Row-major B [K,N] ([N,K] when TransB) is column-major [N,K] ([K,N]).
  G.TransFirst = TransB;
  G.FirstRows = TransB ? K : N;
  G.FirstCols = TransB ? N : K;
  G.LdFirst = G.FirstRows;
  // Row-major A [M,K] ([K,M] when TransA) is column-major [K,M] ([M,K]).
  G.TransSecond = TransA;
  G.SecondRows = TransA ? M : K;
  G.SecondCols = TransA ? K : M;
  G.LdSecond = G.SecondRows;
  G.LdC = N;
  return G;
}

std::vector<CopyPiece> memmovePieces(uintptr_t Dst, uintptr_t Src,
                                     size_t Bytes) {
  std::vector<CopyPiece> Pieces;
  if (!Bytes || Dst == Src)
    return Pieces;
  const size_t Gap = Dst > Src ? Dst - Src : Src - Dst;
  if (Gap >= Bytes)
    return {{0, Bytes}};
  // Forward when the destination is below the source (each piece is read
  // before a later one overwrites it), else from the end.
  for (size_t Done = 0; Done < Bytes;) {
    size_t N = std::min(Gap, Bytes - Done);
    Pieces.push_back({Dst < Src ? Done : Bytes - Done - N, N});
    Done += N;
  }
  return Pieces;
}

} // namespace weft
