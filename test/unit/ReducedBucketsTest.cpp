//===- ReducedBucketsTest.cpp - which all-reduces write grads in place ----===//
//
// A bucket (pack -> all-reduce -> wait -> unpack into grad buffers) is
// found; any other reader of the reduced buffer or of those gradients in
// between, an unpack into an arena buffer or of what no all-reduce made,
// or a fragment boundary between the all-reduce and its unpack keeps the
// copy.
//
//===----------------------------------------------------------------------===//
#include "runtime/ReducedBuckets.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

BufferSpec buffer(BufferKind Kind, int64_t Numel, int64_t Param = -1) {
  BufferSpec B;
  B.Kind = Kind;
  B.Param = Param;
  B.Dims = {Numel};
  return B;
}

Instruction inst(OpKind Op, std::vector<int64_t> In, std::vector<int64_t> Out) {
  Instruction I;
  I.Op = Op;
  I.In = std::move(In);
  I.Out = std::move(Out);
  return I;
}

// Buffers: 0, 1 the gradients as computed, 2 the bucket, 3 its sum, 4 and
// 5 the grads of params 0 and 1, 6 an activation. One backward fragment.
Program bucketProgram() {
  Program P;
  P.Buffers = {buffer(BufferKind::Arena, 4),   buffer(BufferKind::Arena, 4),
               buffer(BufferKind::Arena, 8),   buffer(BufferKind::Arena, 8),
               buffer(BufferKind::Grad, 4, 0), buffer(BufferKind::Grad, 4, 1),
               buffer(BufferKind::Arena, 4)};
  P.Instructions = {inst(OpKind::Pack, {0, 1}, {2}),
                    inst(OpKind::AllReduce, {2}, {3}),
                    inst(OpKind::Gelu, {6}, {6}), inst(OpKind::Wait, {3}, {}),
                    inst(OpKind::Unpack, {3}, {4, 5})};
  P.Instructions[1].Attrs.Async = true;
  Stage S;
  Fragment F;
  F.Name = "backward";
  F.End = int64_t(P.Instructions.size());
  S.Fragments = {F};
  P.Stages = {S};
  return P;
}

TEST(ReducedBuckets, AnAllReduceUnpackedIntoGradsIsFound) {
  std::vector<ReducedBucket> Found = findReducedBuckets(bucketProgram());
  ASSERT_EQ(Found.size(), 1u);
  EXPECT_EQ(Found[0].Reduce, 1u);
  EXPECT_EQ(Found[0].Unpack, 4u);
  EXPECT_EQ(Found[0].Params, (std::vector<int64_t>{0, 1}));
}

TEST(ReducedBuckets, AGradientReadInBetweenKeepsTheCopy) {
  Program P = bucketProgram();
  P.Instructions[2] = inst(OpKind::Gelu, {5}, {6});
  EXPECT_TRUE(findReducedBuckets(P).empty());
}

TEST(ReducedBuckets, AnUnpackIntoTheArenaKeepsTheCopy) {
  Program P = bucketProgram();
  P.Instructions[4].Out = {4, 6};
  EXPECT_TRUE(findReducedBuckets(P).empty());
}

TEST(ReducedBuckets, AnotherReaderOfTheSumKeepsTheCopy) {
  Program P = bucketProgram();
  P.Instructions.push_back(inst(OpKind::Gelu, {3}, {6}));
  P.Stages[0].Fragments[0].End = int64_t(P.Instructions.size());
  EXPECT_TRUE(findReducedBuckets(P).empty());
}

TEST(ReducedBuckets, AFragmentBetweenKeepsTheCopy) {
  Program P = bucketProgram();
  Fragment Optimizer;
  Optimizer.Name = "optimizer";
  Optimizer.Begin = 3;
  Optimizer.End = P.Stages[0].Fragments[0].End;
  P.Stages[0].Fragments[0].End = 3;
  P.Stages[0].Fragments.push_back(Optimizer);
  EXPECT_TRUE(findReducedBuckets(P).empty());
}

TEST(ReducedBuckets, AnUnpackOfWhatNoAllReduceMadeKeepsTheCopy) {
  Program P = bucketProgram();
  P.Instructions[1] = inst(OpKind::Pack, {0, 1}, {3}); // the position table's
  EXPECT_TRUE(findReducedBuckets(P).empty());
  P.Instructions.erase(P.Instructions.begin(), P.Instructions.begin() + 2);
  P.Stages[0].Fragments[0].End = int64_t(P.Instructions.size());
  EXPECT_TRUE(findReducedBuckets(P).empty()); // nothing makes it
}

TEST(ReducedBuckets, PipelineStagesAreLeftAlone) {
  Program P = bucketProgram();
  P.NumStages = 2;
  EXPECT_TRUE(findReducedBuckets(P).empty());
}

} // namespace
} // namespace weft
