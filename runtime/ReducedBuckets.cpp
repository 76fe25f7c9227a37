//===- ReducedBuckets.cpp - All-reduces into grad buffers ----------------===//
#include "runtime/ReducedBuckets.h"

#include <set>

namespace weft {

namespace {

bool mentions(const Instruction &I, int64_t Id) {
  for (const std::vector<int64_t> *Ids : {&I.In, &I.Out})
    for (int64_t X : *Ids)
      if (X == Id)
        return true;
  return false;
}

/// Whether I reads or writes the grad buffer of a parameter in Params.
bool touchesGrads(const Program &P, const Instruction &I,
                  const std::set<int64_t> &Params) {
  for (const std::vector<int64_t> *Ids : {&I.In, &I.Out})
    for (int64_t X : *Ids) {
      const BufferSpec &B = P.Buffers[size_t(X)];
      if (B.Kind == BufferKind::Grad && Params.count(B.Param))
        return true;
    }
  return false;
}

/// The fragment holding instruction K, or -1.
int64_t fragmentOf(const Stage &S, size_t K) {
  for (size_t F = 0; F < S.Fragments.size(); ++F)
    if (int64_t(K) >= S.Fragments[F].Begin && int64_t(K) < S.Fragments[F].End)
      return int64_t(F);
  return -1;
}

} // namespace

std::vector<ReducedBucket> findReducedBuckets(const Program &P) {
  std::vector<ReducedBucket> Found;
  if (P.NumStages != 1 || P.Stages.size() != 1)
    return Found;
  const std::vector<Instruction> &Is = P.Instructions;
  std::set<int64_t> Taken; // params already in a bucket
  for (size_t U = 0; U < Is.size(); ++U) {
    const Instruction &Unpack = Is[U];
    if (Unpack.Op != OpKind::Unpack || Unpack.Attrs.Blocks != 1 ||
        Unpack.In.size() != 1 || Unpack.Out.empty())
      continue;
    const int64_t Flat = Unpack.In[0];
    ReducedBucket B;
    B.Unpack = U;
    std::set<int64_t> Params;
    bool Ok = true;
    for (int64_t Id : Unpack.Out) {
      const BufferSpec &G = P.Buffers[size_t(Id)];
      Ok &= G.Kind == BufferKind::Grad && !Taken.count(G.Param) &&
            Params.insert(G.Param).second;
      B.Params.push_back(G.Param);
    }
    // The all-reduce making Flat: the last instruction before the unpack
    // that names it; the ones between may only wait for it.
    bool Made = false;
    size_t R = U;
    while (Ok && !Made && R > 0) {
      const Instruction &I = Is[--R];
      if (I.Op == OpKind::Wait && I.In.size() == 1 && I.In[0] == Flat)
        continue;
      if (mentions(I, Flat)) {
        Ok = I.Op == OpKind::AllReduce && I.Out.size() == 1 && I.Out[0] == Flat;
        Made = true;
      } else {
        Ok = !touchesGrads(P, I, Params);
      }
    }
    if (!Ok || !Made || fragmentOf(P.Stages[0], R) < 0 ||
        fragmentOf(P.Stages[0], R) != fragmentOf(P.Stages[0], U))
      continue;
    // Nothing after the unpack may read the all-reduce's result.
    for (size_t K = U + 1; Ok && K < Is.size(); ++K)
      Ok = !mentions(Is[K], Flat);
    if (!Ok)
      continue;
    B.Reduce = R;
    Taken.insert(Params.begin(), Params.end());
    Found.push_back(std::move(B));
  }
  return Found;
}

} // namespace weft
