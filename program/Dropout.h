//===- Dropout.h - dropout masks keyed by global coordinates ----*- C++ -*-===//
//
// Whether an element survives dropout is a pure function of (seed, step,
// site, the element's index in the global tensor): Philox-4x32-10 (Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3", 2011; cuRAND's and
// JAX's counter-based generator) with key = seed and counter = (index / 4,
// site, step); lane index % 4 of its four words decides. Every layout (data,
// tensor, sequence parallel, micro-batches, pipeline stages, recomputation)
// computes exactly the mask one rank would, from the global coordinates of
// the elements it holds. The CPU and CUDA kernels share this header.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_DROPOUT_H
#define WEFT_PROGRAM_DROPOUT_H

#include "program/HostDevice.h"

#include <cstdint>

namespace weft {

struct Philox4x32 {
  uint32_t V[4];
};

/// Philox-4x32 with 10 rounds (Random123's philox4x32_10).
WEFT_HOST_DEVICE inline Philox4x32 philox4x32(const uint32_t Ctr[4],
                                              const uint32_t Key[2]) {
  uint32_t C0 = Ctr[0], C1 = Ctr[1], C2 = Ctr[2], C3 = Ctr[3];
  uint32_t K0 = Key[0], K1 = Key[1];
  for (int R = 0; R < 10; ++R) {
    uint64_t P0 = uint64_t(0xD2511F53u) * C0, P1 = uint64_t(0xCD9E8D57u) * C2;
    uint32_t Hi0 = uint32_t(P0 >> 32), Lo0 = uint32_t(P0);
    uint32_t Hi1 = uint32_t(P1 >> 32), Lo1 = uint32_t(P1);
    uint32_t N0 = Hi1 ^ C1 ^ K0, N2 = Hi0 ^ C3 ^ K1;
    C0 = N0;
    C1 = Lo1;
    C2 = N2;
    C3 = Lo0;
    K0 += 0x9E3779B9u;
    K1 += 0xBB67AE85u;
  }
  return {{C0, C1, C2, C3}};
}

/// Drop probability p as a threshold on a 32-bit draw: the element drops
/// when its draw is below it (probability Threshold / 2^32, p to 2^-32).
WEFT_HOST_DEVICE inline uint32_t dropoutThreshold(double P) {
  double T = P * 4294967296.0;
  return T >= 4294967295.0 ? 4294967295u : uint32_t(T);
}

/// The draws of global elements 4 Block .. 4 Block + 3 at (Seed, Step,
/// Site): one Philox call's four words.
WEFT_HOST_DEVICE inline Philox4x32 dropoutDraws(uint64_t Seed, int64_t Step,
                                                int64_t Site, uint64_t Block) {
  const uint32_t Ctr[4] = {uint32_t(Block), uint32_t(Block >> 32),
                           uint32_t(Site), uint32_t(Step)};
  const uint32_t Key[2] = {uint32_t(Seed), uint32_t(Seed >> 32)};
  return philox4x32(Ctr, Key);
}

/// The draw of global element Index at (Seed, Step, Site).
WEFT_HOST_DEVICE inline uint32_t dropoutDraw(uint64_t Seed, int64_t Step,
                                             int64_t Site, uint64_t Index) {
  return dropoutDraws(Seed, Step, Site, Index >> 2).V[Index & 3];
}

/// The factor element Index is multiplied by: 0, or 1 / (1 - p).
struct DropoutKey {
  uint64_t Seed = 0;
  int64_t Step = 0, Site = 0;
  uint32_t Threshold = 0;
  double Scale = 1.0; // 1 / (1 - p)

  WEFT_HOST_DEVICE double factor(uint64_t Index) const {
    return dropoutDraw(Seed, Step, Site, Index) < Threshold ? 0.0 : Scale;
  }

  /// Y[J] = X[J] * factor(Index + J) for J < N (Y may be X): one Philox
  /// call for each four elements of an aligned block, where factor()
  /// would call it once per element and keep one of its words.
  template <typename T>
  WEFT_HOST_DEVICE void scaleRun(const T *X, T *Y, int64_t N,
                                 uint64_t Index) const {
    const T Keep = T(Scale);
    int64_t J = 0;
    for (; J < N && ((Index + uint64_t(J)) & 3); ++J)
      Y[J] = X[J] * T(factor(Index + uint64_t(J)));
    for (; J + 4 <= N; J += 4) {
      const Philox4x32 W =
          dropoutDraws(Seed, Step, Site, (Index + uint64_t(J)) >> 2);
      for (int L = 0; L < 4; ++L)
        Y[J + L] = X[J + L] * (W.V[L] < Threshold ? T(0) : Keep);
    }
    for (; J < N; ++J)
      Y[J] = X[J] * T(factor(Index + uint64_t(J)));
  }
};

} // namespace weft

#endif // WEFT_PROGRAM_DROPOUT_H
