//===- FragmentKeys.h - A pipeline stage's fragments, numbered -*- C++ -*-===//
//
// The fragments of a stage in table order (program/Program.h, Stage), as
// weft-cut-stages marks ops and weft-emit-program writes them: prologue 0,
// the forward of chunk c 1+c, the backward of chunk c 2V-c (backwards run
// in reverse chunk order), weight 2V+1 when the backward splits (ZB-H1, one
// chunk), optimizer last.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_FRAGMENTKEYS_H
#define WEFT_PASSES_FRAGMENTKEYS_H

#include "program/PipelineSchedule.h"

#include <cstdint>
#include <string>

namespace weft {

enum FragmentPhase { kPrologue, kForward, kBackward, kWeight, kOptimizer };
inline constexpr const char *kFragmentPhaseNames[] = {
    "prologue", "forward", "backward", "weight", "optimizer"};

struct FragmentKeys {
  int64_t chunks = 1;
  bool split = false;

  /// A stage of schedule S's: its model chunks, and whether backwards split.
  static FragmentKeys of(const PipelineSchedule &S) {
    return {S.VirtualStages, S.SplitBackward};
  }
  int count() const { return int(2 * chunks + 2 + (split ? 1 : 0)); }
  int key(FragmentPhase p, int64_t chunk) const {
    return p == kPrologue   ? 0
           : p == kForward  ? int(1 + chunk)
           : p == kBackward ? int(2 * chunks - chunk)
           : p == kWeight   ? int(2 * chunks + 1)
                            : count() - 1;
  }
  FragmentPhase phase(int k) const {
    if (k == 0)
      return kPrologue;
    if (k <= chunks)
      return kForward;
    if (k <= 2 * chunks)
      return kBackward;
    return split && k == 2 * chunks + 1 ? kWeight : kOptimizer;
  }
  /// The chunk of a forward or backward; 0 for the others.
  int64_t chunk(int k) const {
    FragmentPhase p = phase(k);
    return p == kForward ? k - 1 : p == kBackward ? 2 * chunks - k : 0;
  }
  /// "forward", or with several chunks "forward.1" (the format's names).
  std::string name(int k) const {
    FragmentPhase p = phase(k);
    std::string n = kFragmentPhaseNames[p];
    if (chunks > 1 && (p == kForward || p == kBackward))
      n += "." + std::to_string(chunk(k));
    return n;
  }
};

} // namespace weft

#endif // WEFT_PASSES_FRAGMENTKEYS_H
