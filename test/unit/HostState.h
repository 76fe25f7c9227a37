//===- HostState.h - Host copies of an executor's tensors for tests -*- C++
//-*-===//
//
// The executor's tensors are device memory (docs/design.md, "The device
// boundary"): tests read and write them through copies, as the runtime does.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_TEST_UNIT_HOSTSTATE_H
#define WEFT_TEST_UNIT_HOSTSTATE_H

#include "runtime/Executor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace weft {

/// A host copy of param P's state K, as elements of T.
template <typename T = float>
std::vector<T> hostState(const Executor &E, size_t P,
                         BufferKind K = BufferKind::Param) {
  Expected<std::vector<char>> B = E.stateBytes(P, K);
  EXPECT_TRUE(B.ok()) << B.message();
  std::vector<T> Out(B.ok() ? B->size() / sizeof(T) : 0);
  if (!Out.empty())
    std::memcpy(Out.data(), B->data(), Out.size() * sizeof(T));
  return Out;
}

/// Writes V into param P's state K.
template <typename T>
void setHostState(Executor &E, size_t P, BufferKind K,
                  const std::vector<T> &V) {
  ASSERT_EQ(V.size() * sizeof(T), size_t(E.stateSpec(P, K).bytes()));
  Status S = E.writeState(P, K, V.data());
  ASSERT_TRUE(S.ok()) << S.message();
}

template <typename T>
void setStateElement(Executor &E, size_t P, BufferKind K, size_t I, T V) {
  std::vector<T> G = hostState<T>(E, P, K);
  ASSERT_LT(I, G.size());
  G[I] = V;
  setHostState(E, P, K, G);
}

/// Sets element I of param P's gradient (of the program's dtype).
inline void setGradElement(Executor &E, size_t P, size_t I, double V) {
  if (E.program().Type == DType::F64)
    setStateElement<double>(E, P, BufferKind::Grad, I, V);
  else
    setStateElement<float>(E, P, BufferKind::Grad, I, float(V));
}

} // namespace weft

#endif // WEFT_TEST_UNIT_HOSTSTATE_H
