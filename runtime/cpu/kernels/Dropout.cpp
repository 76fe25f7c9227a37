//===- Dropout.cpp - inverted dropout by global coordinates ---------------===//
//
// The mask of each element is a pure function of its global index
// (program/Dropout.h), so the rows are independent: parallel over rows of
// the last dim, each row's base index computed once.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <algorithm>

namespace weft::cpu {

namespace {
constexpr int64_t Lanes = 16; // Philox blocks computed side by side

// Elements [0, 4 Lanes) of a run whose first index starts block Block:
// Philox-4x32-10 (program/Dropout.h) on Lanes counters at once, written
// as lane loops so that its 32 x 32 -> 64-bit products vectorize. The same
// draws, word for word, as dropoutDraws.
template <typename T>
WEFT_CLONE_BODY void dropLanes(const T *X, T *Y, uint64_t Block,
                               const DropoutKey &Key) {
  uint32_t C0[Lanes], C1[Lanes], C2[Lanes], C3[Lanes];
  for (int64_t L = 0; L < Lanes; ++L) {
    const uint64_t B = Block + uint64_t(L);
    C0[L] = uint32_t(B);
    C1[L] = uint32_t(B >> 32);
    C2[L] = uint32_t(Key.Site);
    C3[L] = uint32_t(Key.Step);
  }
  uint32_t K0 = uint32_t(Key.Seed), K1 = uint32_t(Key.Seed >> 32);
  for (int R = 0; R < 10; ++R) {
    for (int64_t L = 0; L < Lanes; ++L) {
      const uint64_t P0 = uint64_t(0xD2511F53u) * C0[L];
      const uint64_t P1 = uint64_t(0xCD9E8D57u) * C2[L];
      const uint32_t N0 = uint32_t(P1 >> 32) ^ C1[L] ^ K0;
      const uint32_t N2 = uint32_t(P0 >> 32) ^ C3[L] ^ K1;
      C0[L] = N0;
      C1[L] = uint32_t(P1);
      C2[L] = N2;
      C3[L] = uint32_t(P0);
    }
    K0 += 0x9E3779B9u;
    K1 += 0xBB67AE85u;
  }
  const T Keep = T(Key.Scale);
  for (int64_t L = 0; L < Lanes; ++L) {
    const uint32_t W[4] = {C0[L], C1[L], C2[L], C3[L]};
    for (int V = 0; V < 4; ++V)
      Y[4 * L + V] = X[4 * L + V] * (W[V] < Key.Threshold ? T(0) : Keep);
  }
}

// A run's factors in a SIMD clone: Lanes blocks of four at a time, the
// ends (off a block, or fewer than 4 Lanes) one block at a time.
template <typename T>
WEFT_CLONE_BODY void dropRun(const T *X, T *Y, int64_t N, uint64_t Index,
                             const DropoutKey &Key) {
  int64_t J = std::min<int64_t>(N, int64_t((4 - (Index & 3)) & 3));
  Key.scaleRun(X, Y, J, Index);
  for (; J + 4 * Lanes <= N; J += 4 * Lanes)
    dropLanes(X + J, Y + J, (Index + uint64_t(J)) >> 2, Key);
  Key.scaleRun(X + J, Y + J, N - J, Index + uint64_t(J));
}

WEFT_SIMD_CLONES void dropRunF(const float *X, float *Y, int64_t N,
                               uint64_t Index, const DropoutKey &Key) {
  dropRun(X, Y, N, Index, Key);
}
} // namespace

template <typename T>
void dropoutRun(const T *X, T *Y, int64_t N, uint64_t Index,
                const DropoutKey &Key) {
  byType<T>(dropRunF, dropRun<T>, X, Y, N, Index, Key);
}

template <typename T>
void dropout(const T *X, T *Y, const std::vector<int64_t> &Local,
             const std::vector<int64_t> &First,
             const std::vector<int64_t> &Total, const DropoutKey &Key,
             const int32_t *SeqPos) {
  const size_t R = Local.size();
  const int64_t Last = Local[R - 1];
  int64_t Rows = 1;
  for (size_t D = 0; D + 1 < R; ++D)
    Rows *= Local[D];
  forChunks(Rows, 16, [&](int64_t Begin, int64_t End) {
    for (int64_t Row = Begin; Row < End; ++Row) {
      // The global index of the row's first element: its coordinates,
      // offset by the rank's block, read in the global shape.
      uint64_t Index = 0;
      int64_t Rest = Row;
      uint64_t Stride = uint64_t(Total[R - 1]);
      Index += uint64_t(First[R - 1]);
      for (size_t D = R - 1; D-- > 0;) {
        int64_t C = Rest % Local[D];
        Rest /= Local[D];
        const int64_t G = D == 1 && SeqPos ? SeqPos[C] : First[D] + C;
        Index += uint64_t(G) * Stride;
        Stride *= uint64_t(Total[D]);
      }
      dropoutRun(X + Row * Last, Y + Row * Last, Last, Index, Key);
    }
  });
}

template void dropoutRun<float>(const float *, float *, int64_t, uint64_t,
                                const DropoutKey &);
template void dropoutRun<double>(const double *, double *, int64_t, uint64_t,
                                 const DropoutKey &);
template void dropout<float>(const float *, float *,
                             const std::vector<int64_t> &,
                             const std::vector<int64_t> &,
                             const std::vector<int64_t> &, const DropoutKey &,
                             const int32_t *);
template void dropout<double>(const double *, double *,
                              const std::vector<int64_t> &,
                              const std::vector<int64_t> &,
                              const std::vector<int64_t> &, const DropoutKey &,
                              const int32_t *);

} // namespace weft::cpu
