//===- Dropout.cpp - inverted dropout by global coordinates ---------------===//
//
// The mask of each element is a pure function of its global index
// (program/Dropout.h), so the rows are independent: parallel over rows of
// the last dim, each row's base index computed once.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

namespace weft::cpu {

namespace {
// A run's factors, four elements to a Philox call, in a SIMD clone.
template <typename T>
WEFT_CLONE_BODY void dropRun(const T *X, T *Y, int64_t N, uint64_t Index,
                             const DropoutKey &Key) {
  Key.scaleRun(X, Y, N, Index);
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
