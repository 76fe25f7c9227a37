//===- MeshTest.cpp - Meshes, shard indices, sharded init/data (no MPI) ---===//
//
// One rank of a mesh is placed with the local communicator (rank r of a
// world of n, no peers): enough for index maps, init, data and the loader.
// Collectives across ranks are tested under mpirun (CommTest.cpp).
//
//===----------------------------------------------------------------------===//
#include "HostState.h"
#include "program/Shard.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/data/Data.h"
#include "test/unit/MeshPrograms.h"
#include "test/unit/TestPrograms.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

using namespace weft;
using namespace weft::test;

namespace {

Mesh mesh2x2() { return Mesh{{"dp", "tp"}, {2, 2}}; }

TEST(Mesh, RowMajorCoordinatesAndShardIndices) {
  Mesh M = mesh2x2();
  EXPECT_EQ(M.describe(), "dp=2 x tp=2");
  EXPECT_EQ(M.coords(2), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(M.shardIndex(2, {"dp"}), 1);
  EXPECT_EQ(M.shardIndex(2, {"tp"}), 0);
  EXPECT_EQ(M.shardIndex(1, {"dp", "tp"}), 1);
  EXPECT_EQ(M.shardIndex(1, {"tp", "dp"}), 2);
  EXPECT_EQ(M.count({"dp", "tp"}), 4);
}

TEST(Mesh, GroupsOf2x2) {
  Mesh M = mesh2x2();
  // tp groups: neighbours {0,1}, {2,3}; dp groups: {0,2}, {1,3}.
  EXPECT_EQ(M.group(0, {"tp"}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(M.group(3, {"tp"}), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(M.group(1, {"dp"}), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(M.group(2, {"dp"}), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(M.group(2, {"dp", "tp"}), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(M.group(2, {"tp", "dp"}), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(M.group(2, {}), (std::vector<int64_t>{2}));
  auto C = createLocalCommunicator(3, 4);
  auto G = C->group(M, {"dp"});
  ASSERT_TRUE(G.ok());
  EXPECT_EQ((*G)->Members, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ((*G)->Rank, 1);
  EXPECT_EQ((*G)->Size, 2);
}

TEST(Shard, LocalToGlobalWithBlocks) {
  // G=12 as 3 blocks (q,k,v) of 4, over 2 shards: shard 1 holds 2,3 of
  // every block.
  std::vector<int64_t> Got;
  for (int64_t L = 0; L < 6; ++L)
    Got.push_back(localToGlobal(L, 12, 2, 3, 1));
  EXPECT_EQ(Got, (std::vector<int64_t>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(localToGlobal(0, 12, 2, 3, 0), 0);
  EXPECT_EQ(localToGlobal(5, 12, 2, 3, 0), 9);
}

TEST(Shard, TwoAxesOnOneDim) {
  // dim 0 of 8 over [dp, tp] on 2x2: shard index dp*2+tp, pieces of 2.
  Mesh M = mesh2x2();
  Layout L{{8, 3}, {{"dp", "tp"}, {}}, {1, 1}};
  for (int64_t R = 0; R < 4; ++R) {
    ShardMap S = shardMap(L, M, R);
    EXPECT_EQ(S.Local, (Shape{2, 3}));
    std::vector<int64_t> Firsts;
    forEachRun(S, [&](int64_t Lo, int64_t G, int64_t N) {
      EXPECT_EQ(N, 3);
      Firsts.push_back(G);
    });
    int64_t Shard = M.shardIndex(R, {"dp", "tp"});
    EXPECT_EQ(Firsts,
              (std::vector<int64_t>{2 * Shard * 3, (2 * Shard + 1) * 3}))
        << "rank " << R;
  }
}

TEST(Shard, RunsMatchElementwiseMapWithBlocks) {
  Mesh M{{"a", "b", "c"}, {2, 3, 2}};
  Layout L{{4, 6, 12}, {{"c"}, {"b"}, {"a"}}, {2, 1, 3}};
  for (int64_t R = 0; R < M.size(); ++R) {
    ShardMap S = shardMap(L, M, R);
    std::vector<int64_t> Want(size_t(S.localNumel()));
    int64_t I = 0;
    for (int64_t A = 0; A < S.Local[0]; ++A)
      for (int64_t B = 0; B < S.Local[1]; ++B)
        for (int64_t C = 0; C < S.Local[2]; ++C) {
          int64_t Ga = localToGlobal(A, 4, S.Count[0], 2, S.Index[0]);
          int64_t Gb = localToGlobal(B, 6, S.Count[1], 1, S.Index[1]);
          int64_t Gc = localToGlobal(C, 12, S.Count[2], 3, S.Index[2]);
          Want[size_t(I++)] = (Ga * 6 + Gb) * 12 + Gc;
        }
    std::vector<int64_t> Got(Want.size(), -1);
    forEachRun(S, [&](int64_t Lo, int64_t G, int64_t N) {
      for (int64_t K = 0; K < N; ++K)
        Got[size_t(Lo + K)] = G + K;
    });
    EXPECT_EQ(Got, Want) << "rank " << R;
  }
}

std::unique_ptr<Executor> makeExec(const nlohmann::json &J, Communicator *C) {
  Expected<Program> P = parseProgramJson(programJson(J));
  EXPECT_TRUE(P.ok()) << P.message();
  auto E = Executor::create(P.take(), nullptr, C);
  EXPECT_TRUE(E.ok()) << E.message();
  return E.ok() ? E.take() : nullptr;
}

TEST(ShardedInit, EveryRankHoldsItsSliceOfTheOneRankWeights) {
  MeshTinyConfig Cfg;
  Cfg.Dp = 2;
  Cfg.Tp = 2;
  Cfg.HeadBlocks = 2;
  Cfg.Zero1 = Cfg.Zero2 = true;
  auto One = Executor::create(
      parseProgramJson(tinyProgram("f32", 4, 4, 16, 8).payload()).take());
  ASSERT_TRUE(One.ok()) << One.message();
  EXPECT_TRUE((*One)->initParams(99).ok());
  for (int R = 0; R < 4; ++R) {
    auto C = createLocalCommunicator(R, 4);
    auto E = makeExec(meshTinyProgram(Cfg), C.get());
    ASSERT_TRUE(E);
    EXPECT_TRUE(E->initParams(99).ok());
    for (size_t P = 0; P < 2; ++P) {
      const BufferSpec &S = E->stateSpec(P, BufferKind::Param);
      ShardMap M = shardMap(S.Place, E->mesh(), R);
      std::vector<float> Want(size_t(M.localNumel()));
      extractShard(M, hostState(**One, P).data(), Want.data(), 4);
      std::vector<float> Got = hostState(*E, P);
      for (size_t I = 0; I < Want.size(); ++I)
        ASSERT_EQ(Got[I], Want[I])
            << "param " << P << " rank " << R << " " << I;
    }
    // ZeRO-2 head grad/m/v: [D/dp, V/tp].
    EXPECT_EQ(E->stateSpec(1, BufferKind::AdamM).Dims, (Shape{4, 8}));
    EXPECT_EQ(E->stateSpec(0, BufferKind::AdamV).Dims, (Shape{8, 8}));
  }
}

TEST(ShardedData, EachRankFillsItsBlockOfTheGlobalBatch) {
  std::vector<uint16_t> Toks(1000);
  for (size_t I = 0; I < Toks.size(); ++I)
    Toks[I] = uint16_t((I * 7 + 3) % 50);
  TokenData D = TokenData::fromTokens(Toks, 50, 8).take();
  const int64_t B = 4, S = 8;
  std::vector<int32_t> GT(B * S), GY(B * S);
  D.fillBatch(3, B, S, GT.data(), GY.data());
  // dp=2 on the batch, 2 shards of the sequence.
  for (int64_t Sb = 0; Sb < 2; ++Sb)
    for (int64_t Ss = 0; Ss < 2; ++Ss) {
      std::vector<int32_t> T(2 * 4), Y(2 * 4);
      D.fillBlock(3, B, S, Sb * 2, 2, Ss * 4, 4, T.data(), Y.data());
      for (int64_t I = 0; I < 2; ++I)
        for (int64_t J = 0; J < 4; ++J) {
          EXPECT_EQ(T[I * 4 + J], GT[(Sb * 2 + I) * S + Ss * 4 + J]);
          EXPECT_EQ(Y[I * 4 + J], GY[(Sb * 2 + I) * S + Ss * 4 + J]);
        }
    }
  // The executor places rank 2 (dp=1, tp=0) at rows [2,4).
  MeshTinyConfig Cfg;
  Cfg.Dp = 2;
  Cfg.Tp = 2;
  auto C = createLocalCommunicator(2, 4);
  auto E = makeExec(meshTinyProgram(Cfg), C.get());
  ASSERT_TRUE(E);
  EXPECT_EQ(E->batchOffset(), 2);
  EXPECT_EQ(E->localBatch(), 2);
  EXPECT_EQ(E->seqOffset(), 0);
}

TEST(MeshLoader, RefusesAWorldThatIsNotTheMeshProduct) {
  MeshTinyConfig Cfg;
  Cfg.Dp = 2;
  Cfg.Tp = 2;
  Expected<Program> P = parseProgramJson(programJson(meshTinyProgram(Cfg)));
  ASSERT_TRUE(P.ok()) << P.message();
  auto C = createLocalCommunicator(0, 3);
  auto E = Executor::create(P.take(), nullptr, C.get());
  ASSERT_FALSE(E.ok());
  EXPECT_EQ(E.message(),
            "world size 3 is not the mesh product dp=2 x tp=2 = 4");
}

std::string loadError(nlohmann::json J) {
  Expected<Program> P = parseProgramJson(programJson(J));
  return P.ok() ? "" : P.message();
}

TEST(MeshLoader, RefusesInconsistentShardsAndCollectives) {
  MeshTinyConfig Cfg;
  Cfg.Dp = 2;
  Cfg.Tp = 2;
  nlohmann::json J = meshTinyProgram(Cfg);
  EXPECT_EQ(loadError(J), "");
  // all_gather over tp=2 of [2,4,8] along dim 0 must give [4,4,8].
  nlohmann::json Bad = J;
  Bad["instructions"][2]["out"] = Bad["instructions"][3]["out"];
  EXPECT_NE(loadError(Bad).find("has shape [2,4,16], expected [4,4,8] (dim 0 "
                                "= 2 shards x 2)"),
            std::string::npos)
      << loadError(Bad);
  Bad = J;
  ASSERT_EQ(Bad["instructions"][5]["op"], "all_reduce");
  Bad["instructions"][5]["attrs"]["axes"] = {"pp"};
  EXPECT_NE(loadError(Bad).find("names axis 'pp', not an axis of the mesh "
                                "dp=2 x tp=2"),
            std::string::npos)
      << loadError(Bad);
  Bad = J;
  Bad["params"][1]["shape"] = {8, 16};
  EXPECT_NE(loadError(Bad).find("has dim 1 = 16, expected 8 (global 16 / 2 "
                                "shards over [tp])"),
            std::string::npos)
      << loadError(Bad);
  Bad = J;
  Bad["params"][1]["sharding"] = {nlohmann::json::array(), {"tp", "tp"}};
  EXPECT_NE(loadError(Bad).find("mesh axis 'tp' shards more than one dim"),
            std::string::npos)
      << loadError(Bad);
}

// The file declares every communicator group (format version 4): each rank
// creates them at load in that order. A collective or a sharded AdamW over
// an undeclared group, and a malformed table, are refused.
TEST(MeshLoader, RefusesUndeclaredAndMalformedGroups) {
  MeshTinyConfig Cfg;
  Cfg.Dp = Cfg.Tp = 2;
  nlohmann::json J = meshTinyProgram(Cfg);
  J["mesh"]["groups"] = {{"tp"}, {"dp"}};
  EXPECT_EQ(loadError(J), "");
  Expected<Program> P = parseProgramJson(programJson(J));
  ASSERT_TRUE(P.ok()) << P.message();
  EXPECT_EQ(P->Devices.Groups, (std::vector<AxesList>{{"tp"}, {"dp"}}));
  EXPECT_NE(dumpProgram(*P).find("mesh: dp=2 x tp=2 | groups: [tp] [dp]"),
            std::string::npos)
      << dumpProgram(*P);
  auto Expect = [&](const nlohmann::json &Bad, const std::string &Want) {
    EXPECT_NE(loadError(Bad).find(Want), std::string::npos) << loadError(Bad);
  };
  nlohmann::json Bad = J;
  Bad["mesh"]["groups"] = {{"tp"}};
  Expect(Bad, "attrs.axes [dp] is not one of mesh.groups");
  Bad["mesh"].erase("groups");
  Bad["mesh"]["groups"] = nullptr;
  Expect(Bad, "field 'groups' in mesh must be an array of axis lists");
  Bad = J;
  Bad["mesh"]["groups"] = {{"tp"}, {"dp"}, {"tp"}};
  Expect(Bad, "mesh.groups[2] repeats mesh.groups[0]");
  Bad["mesh"]["groups"] = {{"tp"}, {"dp"}, {"dp", "dp"}};
  Expect(Bad, "mesh.groups[2] repeats axis 'dp'");
  Bad["mesh"]["groups"] = {{"tp"}, {"dp"}, {"pp"}};
  Expect(Bad, "mesh.groups[2] names axis 'pp', not an axis of the mesh");
  Bad["mesh"]["groups"] = {{"tp"}, {"dp"}, nlohmann::json::array()};
  Expect(Bad, "mesh.groups[2] is empty");
}

TEST(MeshLoader, RefusesBadVocabParallelCrossEntropy) {
  MeshTinyConfig Cfg;
  Cfg.Dp = Cfg.Tp = 2;
  Cfg.VocabParallel = true;
  nlohmann::json J = meshTinyProgram(Cfg);
  EXPECT_EQ(loadError(J), "");
  // Instructions: 2 cross_entropy_stats, 3 its all_gather, 4
  // cross_entropy_from_stats, 7 cross_entropy_stats_grad.
  auto Expect = [&](const nlohmann::json &Bad, const std::string &Want) {
    EXPECT_NE(loadError(Bad).find(Want), std::string::npos) << loadError(Bad);
  };
  nlohmann::json Bad = J;
  Bad["instructions"][2]["attrs"].erase("vocab_axes");
  Expect(Bad, "vocab_axes");
  Bad = J;
  Bad["instructions"][4]["attrs"]["denominator"] = 0;
  Expect(Bad, "instructions[4] (cross_entropy_from_stats): "
              "attrs.denominator=0 must be positive");
  Bad = J;
  Bad["instructions"][7]["in"][2] = J["instructions"][2]["out"][0];
  Expect(Bad, "(stats) has shape [1,2,4,3], expected [2,2,4,3] (one row of "
              "stats per shard)");
  Bad = J;
  Bad["instructions"][2]["attrs"]["vocab_axes"] = {"pp"};
  Expect(Bad, "names axis 'pp', not an axis of the mesh");
}

TEST(MeshLoader, DumpShowsMeshAttributes) {
  MeshTinyConfig Cfg;
  Cfg.Dp = Cfg.Tp = 2;
  Cfg.VocabParallel = true;
  Expected<Program> P = parseProgramJson(programJson(meshTinyProgram(Cfg)));
  ASSERT_TRUE(P.ok()) << P.message();
  std::string D = dumpProgram(*P);
  for (const char *Want :
       {"cross_entropy_stats  in=[11,1] out=[15]  vocab_axes=[tp]",
        "all_gather  in=[15] out=[16]  axes=[tp]  dim=0",
        "cross_entropy_from_stats  in=[16] out=[13]  denominator=16",
        "all_reduce  in=[13] out=[14]  axes=[dp]"})
    EXPECT_NE(D.find(Want), std::string::npos) << Want << "\n" << D;
}

TEST(MeshLoader, RefusesMisplacedPartialGradients) {
  MeshTinyConfig Cfg;
  Cfg.Dp = Cfg.Tp = 2;
  Cfg.Zero1Partial = true;
  nlohmann::json J = meshTinyProgram(Cfg);
  EXPECT_EQ(loadError(J), "");
  // Buffers: 2 wte, 3 its grad (partial over dp), 7 the head's grad.
  auto Expect = [&](const nlohmann::json &Bad, const std::string &Want) {
    EXPECT_NE(loadError(Bad).find(Want), std::string::npos) << loadError(Bad);
  };
  nlohmann::json Bad = J;
  Bad["buffers"][2]["partial"] = {"dp"};
  Expect(Bad, "field 'partial' in buffers[2] (param) is only allowed on grad "
              "buffers");
  Bad = J;
  Bad["buffers"][3]["partial"] = {"pp"};
  Expect(Bad, "partial names axis 'pp', not an axis of the mesh dp=2 x tp=2");
  Bad = J;
  Bad["buffers"][3]["partial"] = nlohmann::json::array();
  Expect(Bad, "names no axes");
  Bad = J;
  Bad["buffers"][3]["partial"] = {"tp"};
  Expect(Bad, "(grad) is partial over [tp], but this reduce_scatter reduces "
              "over [dp]");
  Bad = J;
  Bad["buffers"][7]["partial"] = {"tp"};
  Expect(Bad, "partial over axis 'tp', which also shards it");
  // Plain data parallelism: an unsharded adamw cannot reduce it.
  Cfg.Zero1Partial = false;
  Bad = meshTinyProgram(Cfg);
  Bad["buffers"][3]["partial"] = {"dp"};
  Expect(Bad, "(buffer 3) (grad) is partial over [dp]; only a reduce_scatter "
              "or all_reduce over them may read it");
}

TEST(MeshLoader, PartialGradientsOnOneRankTrainLikeTheV1Program) {
  auto One = Executor::create(
      parseProgramJson(tinyProgram("f32", 4, 4, 16, 8).payload()).take());
  ASSERT_TRUE(One.ok());
  MeshTinyConfig Cfg;
  Cfg.Zero1Partial = true;
  auto Mesh = makeExec(meshTinyProgram(Cfg), nullptr);
  ASSERT_TRUE(Mesh);
  std::vector<uint16_t> Toks(500);
  for (size_t I = 0; I < Toks.size(); ++I)
    Toks[I] = uint16_t((I * 5 + 1) % 16);
  TokenData D = TokenData::fromTokens(Toks, 16, 4).take();
  TrainOptions O;
  O.Steps = 5;
  EXPECT_TRUE((*One)->initParams(5).ok());
  EXPECT_TRUE(Mesh->initParams(5).ok());
  auto A = train(**One, D, O), B = train(*Mesh, D, O);
  ASSERT_TRUE(A.ok() && B.ok()) << A.message() << B.message();
  for (size_t I = 0; I < 5; ++I)
    EXPECT_NEAR((*A)[I].Loss, (*B)[I].Loss, 1e-5) << I;
  for (size_t P = 0; P < 2; ++P)
    for (int64_t I = 0; I < (*One)->stateSpec(P, BufferKind::Param).numel();
         ++I)
      ASSERT_NEAR(Mesh->paramElement(P, I), (*One)->paramElement(P, I), 1e-6)
          << "param " << P << " element " << I;
  for (auto &[K, V] : Mesh->commBytes())
    EXPECT_EQ(V, 0) << K; // groups of one send nothing
}

class OneByOneMesh : public ::testing::TestWithParam<bool> {};

// With or without the vocab-parallel cross-entropy ops (a single shard).
TEST_P(OneByOneMesh, TrainsLikeTheV1Program) {
  auto One = Executor::create(
      parseProgramJson(tinyProgram("f32", 4, 4, 16, 8).payload()).take());
  ASSERT_TRUE(One.ok());
  MeshTinyConfig Cfg;
  Cfg.VocabParallel = GetParam();
  auto Mesh = makeExec(meshTinyProgram(Cfg), nullptr);
  ASSERT_TRUE(Mesh);
  std::vector<uint16_t> Toks(500);
  for (size_t I = 0; I < Toks.size(); ++I)
    Toks[I] = uint16_t((I * 5 + 1) % 16);
  TokenData D = TokenData::fromTokens(Toks, 16, 4).take();
  TrainOptions O;
  O.Steps = 5;
  EXPECT_TRUE((*One)->initParams(5).ok());
  EXPECT_TRUE(Mesh->initParams(5).ok());
  auto A = train(**One, D, O), B = train(*Mesh, D, O);
  ASSERT_TRUE(A.ok() && B.ok()) << A.message() << B.message();
  for (size_t I = 0; I < 5; ++I)
    EXPECT_NEAR((*A)[I].Loss, (*B)[I].Loss, 1e-5) << I;
  auto Comm = Mesh->commBytes();
  ASSERT_FALSE(Comm.empty());
  EXPECT_EQ(Comm[0].first, "all_gather/tp");
  EXPECT_EQ(Comm[0].second, 0); // groups of one send nothing
}
INSTANTIATE_TEST_SUITE_P(MeshLoader, OneByOneMesh, ::testing::Bool());

/// One rank whose nonblocking all-reduce and all-gather complete only in
/// wait(): test() never reports done, and the copy (the sum or gather over a
/// group of one) happens then, so the executor's waits decide what the
/// collective reads.
class DeferredCommunicator final : public Communicator {
public:
  const char *name() const override { return "deferred"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Expected<const CommGroup *> group(const Mesh &M,
                                    const AxesList &Axes) override {
    return Inner->group(M, Axes);
  }
  Status allReduce(const CommGroup &G, const void *S, void *R, size_t N,
                   DType T, Queue &Q) override {
    return Inner->allReduce(G, S, R, N, T, Q);
  }
  Status iallReduce(const CommGroup &, const void *S, void *R, size_t N,
                    DType T, Queue &, CommRequest &Req) override {
    EXPECT_FALSE(Req.Active);
    auto St = std::make_unique<Started>();
    St->Send = S;
    St->Recv = R;
    St->Bytes = N * dtypeBytes(T);
    Req.Native = std::move(St);
    Req.Active = true;
    ++Starts;
    return Status::success();
  }
  Status iallGather(const CommGroup &G, const void *S, void *R, size_t N,
                    DType T, Queue &Q, CommRequest &Req) override {
    EXPECT_EQ(G.Size, 1);
    // In place (S == nullptr): nothing to copy at completion.
    ++Gathers;
    return iallReduce(G, S ? S : R, R, N, T, Q, Req);
  }
  Status test(CommRequest &R, bool &Done) override {
    ++Tests;
    Done = !R.Active;
    return Status::success();
  }
  Status wait(CommRequest &R, Queue &Q) override {
    if (!R.Active)
      return Status::success();
    auto &St = static_cast<Started &>(*R.Native);
    R.Active = false;
    ++Waits;
    return Q.copyOnDevice(St.Recv, St.Send, St.Bytes);
  }
  Status reserveRequest(CommRequest &, size_t, DType) override {
    ++Reserved;
    return Status::success();
  }
  Status allGather(const CommGroup &G, const void *S, void *R, size_t N,
                   DType T, Queue &Q) override {
    return Inner->allGather(G, S, R, N, T, Q);
  }
  Status reduceScatter(const CommGroup &G, const void *S, void *R, size_t N,
                       DType T, Queue &Q) override {
    return Inner->reduceScatter(G, S, R, N, T, Q);
  }
  Status broadcast(const CommGroup &G, void *B, size_t N, DType T, int Root,
                   Queue &Q) override {
    return Inner->broadcast(G, B, N, T, Root, Q);
  }
  Status reduce(const CommGroup &G, const void *S, void *R, size_t N, DType T,
                int Root, Queue &Q) override {
    return Inner->reduce(G, S, R, N, T, Root, Q);
  }
  Status startTransfers(const CommGroup &G, const std::vector<Transfer> &Ops,
                        Queue &Q, CommRequest &R) override {
    return Inner->startTransfers(G, Ops, Q, R);
  }
  Status barrier(const CommGroup &G) override { return Inner->barrier(G); }

  int Starts = 0, Tests = 0, Waits = 0, Reserved = 0;
  int Gathers = 0; // of Starts

private:
  struct Started : CommRequest::State {
    const void *Send = nullptr;
    void *Recv = nullptr;
    size_t Bytes = 0;
  };
  std::unique_ptr<Communicator> Inner = createLocalCommunicator();
};

TokenData asyncTokens() {
  std::vector<uint16_t> Toks(500);
  for (size_t I = 0; I < Toks.size(); ++I)
    Toks[I] = uint16_t((I * 5 + 1) % 16);
  return TokenData::fromTokens(Toks, 16, 4).take();
}

/// Trains meshTinyProgram (one rank) for 3 steps; the losses and params.
struct Trained {
  std::vector<double> Losses;
  std::vector<float> Params;
};
Trained trainTiny(const MeshTinyConfig &Cfg, Communicator *C) {
  auto E = makeExec(meshTinyProgram(Cfg), C);
  Trained R;
  if (!E)
    return R;
  EXPECT_TRUE(E->initParams(7).ok());
  TrainOptions O;
  O.Steps = 3;
  auto Steps = train(*E, asyncTokens(), O);
  EXPECT_TRUE(Steps.ok()) << Steps.message();
  if (!Steps.ok())
    return R;
  for (const auto &S : *Steps)
    R.Losses.push_back(S.Loss);
  for (size_t P = 0; P < 2; ++P) {
    std::vector<float> V = hostState(*E, P);
    R.Params.insert(R.Params.end(), V.begin(), V.end());
  }
  return R;
}
Trained trainTiny(bool Async, Communicator *C) {
  MeshTinyConfig Cfg;
  Cfg.AsyncGrads = Async;
  return trainTiny(Cfg, C);
}

TEST(AsyncAllReduce, SingleRankTrainsBitForBitLikeBlocking) {
  Trained Blocking = trainTiny(false, nullptr),
          Async = trainTiny(true, nullptr);
  ASSERT_EQ(Blocking.Losses.size(), 3u);
  EXPECT_EQ(Async.Losses, Blocking.Losses);
  EXPECT_EQ(Async.Params, Blocking.Params);
}

TEST(AsyncAllReduce, DeferredCompletionTrainsBitForBitLikeBlocking) {
  DeferredCommunicator C;
  Trained Blocking = trainTiny(false, nullptr), Async = trainTiny(true, &C);
  EXPECT_EQ(C.Reserved, 2);
  EXPECT_EQ(C.Starts, 2 * 3); // two gradient all_reduces per step
  EXPECT_EQ(C.Waits, C.Starts);
  EXPECT_GT(C.Tests, 0);
  EXPECT_EQ(Async.Losses, Blocking.Losses);
  EXPECT_EQ(Async.Params, Blocking.Params);
}

TEST(AsyncAllReduce, WaitsBeforeAnInstructionOverwritesItsInputBytes) {
  DeferredCommunicator C;
  auto E = makeExec(asyncOverwriteProgram(1, 1000), &C);
  ASSERT_TRUE(E);
  StepContext Ctx;
  ASSERT_TRUE(E->run(0, 5, Ctx).ok());
  EXPECT_EQ(C.Starts, 1);
  EXPECT_EQ(C.Waits, 1);
  // Without the wait the reduction would read Z's 100 from A's bytes.
  for (int64_t I = 0; I < 1000; ++I)
    ASSERT_EQ(E->gradElement(0, I), 1.0) << I;
}

TEST(AsyncAllReduce, CompleteWhenTheRunReturns) {
  DeferredCommunicator C;
  auto E = makeExec(asyncOverwriteProgram(1, 16), &C);
  ASSERT_TRUE(E);
  StepContext Ctx;
  // The range ends right after the start: run() waits before returning.
  ASSERT_TRUE(E->run(0, 3, Ctx).ok());
  EXPECT_EQ(C.Waits, 1);
  EXPECT_EQ(E->gradElement(0, 15), 1.0);
}

TEST(AsyncAllReduce, NoAsyncEnvironmentRunsItBlocking) {
  DeferredCommunicator C;
  ::setenv("WEFT_NO_ASYNC", "1", 1);
  auto E = makeExec(asyncOverwriteProgram(1, 16), &C);
  ::unsetenv("WEFT_NO_ASYNC");
  ASSERT_TRUE(E);
  StepContext Ctx;
  ASSERT_TRUE(E->run(0, 5, Ctx).ok());
  EXPECT_EQ(C.Reserved, 0);
  EXPECT_EQ(C.Starts, 0);
  EXPECT_EQ(E->gradElement(0, 0), 1.0);
}

TEST(AsyncAllReduce, LoaderRefusesAsyncElsewhereOrAsAnAttribute) {
  nlohmann::json J = asyncOverwriteProgram(1, 16);
  EXPECT_EQ(loadError(J), "");
  nlohmann::json Bad = J;
  Bad["instructions"][3]["attrs"]["async"] = true; // fill_start
  EXPECT_NE(
      loadError(Bad).find("unknown op 'fill_start' in instructions[4] "
                          "(only all_reduce, all_gather, reduce_scatter and "
                          "ring_shift start asynchronously)"),
      std::string::npos)
      << loadError(Bad);
  Bad = J;
  Bad["instructions"][2]["attrs"]["async"] = 1;
  EXPECT_NE(loadError(Bad).find("instructions[2].attrs: 'async' is not an "
                                "attribute since format version 3"),
            std::string::npos)
      << loadError(Bad);
  Bad = J;
  Bad["instructions"][2]["attrs"]["async"] = false; // the blocking form
  EXPECT_EQ(loadError(Bad), "");
}

// The program as written: [0] fill, [1] fill A, [2] all_reduce_start A -> G,
// [3] wait G, [4] fill Z (on A's bytes), [5] add.
nlohmann::json asyncOverwriteStages() {
  return nlohmann::json::parse(programJson(asyncOverwriteProgram(1, 16)));
}

TEST(AsyncAllReduce, LoaderPairsEveryStartWithItsWait) {
  nlohmann::json J = asyncOverwriteStages();
  nlohmann::json &Backward = J["stages"][0]["fragments"][1]["instructions"];
  ASSERT_EQ(Backward[2]["op"], "wait");
  EXPECT_EQ(loadError(J), "");
  // Without its wait, fill Z overwrites the bytes the reduction reads.
  nlohmann::json Bad = J;
  Bad["stages"][0]["fragments"][1]["instructions"].erase(2);
  EXPECT_NE(loadError(Bad).find("instructions[3] (fill) touches buffers[3] "),
            std::string::npos)
      << loadError(Bad);
  EXPECT_NE(loadError(Bad).find("while instructions[2] (all_reduce_start) is "
                                "in flight (wait for it first)"),
            std::string::npos)
      << loadError(Bad);
  // A wait for what no collective in flight writes.
  Bad = J;
  Bad["stages"][0]["fragments"][1]["instructions"][2]["in"] = {5};
  EXPECT_NE(loadError(Bad).find("instructions[3] (wait) waits for buffers[5]"),
            std::string::npos)
      << loadError(Bad);
  // A start left in flight past its fragment.
  Bad = J;
  nlohmann::json &B = Bad["stages"][0]["fragments"][1]["instructions"];
  nlohmann::json &F = Bad["stages"][0]["fragments"][0]["instructions"];
  F.push_back(B[0]); // fill A
  F.push_back(B[1]); // the start
  B.erase(0);
  B.erase(0);
  B.erase(0); // its wait
  EXPECT_NE(loadError(Bad).find("instructions[2] (all_reduce_start) is not "
                                "waited for before fragment 'backward' "
                                "begins"),
            std::string::npos)
      << loadError(Bad);
}

TEST(AsyncAllGather, SingleRankTrainsBitForBitLikeBlocking) {
  MeshTinyConfig Cfg;
  Cfg.Zero3 = true;
  Trained Blocking = trainTiny(Cfg, nullptr);
  Cfg.AsyncGather = true;
  Trained Async = trainTiny(Cfg, nullptr);
  ASSERT_EQ(Blocking.Losses.size(), 3u);
  EXPECT_EQ(Async.Losses, Blocking.Losses);
  EXPECT_EQ(Async.Params, Blocking.Params);
  // ZeRO-3 on one rank is the plain program.
  EXPECT_EQ(Blocking.Losses, trainTiny(false, nullptr).Losses);
}

TEST(AsyncAllGather, DeferredCompletionTrainsBitForBitLikeBlocking) {
  DeferredCommunicator C;
  MeshTinyConfig Cfg;
  Cfg.Zero3 = true;
  Trained Blocking = trainTiny(Cfg, nullptr);
  Cfg.AsyncGather = Cfg.AsyncGrads = true;
  Trained Async = trainTiny(Cfg, &C);
  // Per step: the head gathered twice (forward, backward), wte's gradient
  // all_reduce (the head's is a reduce_scatter).
  EXPECT_EQ(C.Reserved, 3);
  EXPECT_EQ(C.Gathers, 2 * 3);
  EXPECT_EQ(C.Starts, 3 * 3);
  EXPECT_EQ(C.Waits, C.Starts);
  EXPECT_GT(C.Tests, 0);
  EXPECT_EQ(Async.Losses, Blocking.Losses);
  EXPECT_EQ(Async.Params, Blocking.Params);
}

TEST(AsyncAllGather, WaitsBeforeAnInstructionOverwritesItsInputBytes) {
  DeferredCommunicator C;
  auto E = makeExec(asyncOverwriteProgram(1, 1000, /*Gather=*/true), &C);
  ASSERT_TRUE(E);
  StepContext Ctx;
  ASSERT_TRUE(E->run(0, 5, Ctx).ok());
  EXPECT_EQ(C.Gathers, 1);
  EXPECT_EQ(C.Waits, 1);
  // Without the wait the gather would read Z's 100 from A's bytes.
  for (int64_t I = 0; I < 1000; ++I)
    ASSERT_EQ(E->gradElement(0, I), 1.0) << I;
  // And the range's end completes one left in flight.
  ASSERT_TRUE(E->run(0, 3, Ctx).ok());
  EXPECT_EQ(C.Waits, 2);
}

TEST(MeshLoader, RefusesACollectiveAlongAnInnerDim) {
  // The tp logits gather: [Bl, S, V/tp] gathered along dim 2 has
  // non-contiguous blocks; the program block_transposes them instead.
  MeshTinyConfig Cfg;
  Cfg.Tp = 2;
  nlohmann::json J = meshTinyProgram(Cfg);
  EXPECT_EQ(loadError(J), "");
  ASSERT_EQ(J["instructions"][2]["op"], "all_gather");
  ASSERT_EQ(J["instructions"][3]["op"], "block_transpose");
  nlohmann::json Bad = J;
  int64_t Logits = Bad["instructions"][3]["out"][0];
  Bad["instructions"][2]["out"] = {Logits};
  Bad["instructions"][2]["attrs"]["dim"] = 2;
  Bad["instructions"].erase(3);
  Bad["forward_end"] = Bad["forward_end"].get<int64_t>() - 1;
  Bad["optimizer_begin"] = Bad["optimizer_begin"].get<int64_t>() - 1;
  EXPECT_NE(loadError(Bad).find("attrs.dim=2 of [4,4,8] has dims before it "
                                "larger than 1: its blocks are not "
                                "contiguous (block_transpose them to dim 0 "
                                "first)"),
            std::string::npos)
      << loadError(Bad);
}

TEST(AsyncAllGather, LoaderAcceptsAllGatherStart) {
  nlohmann::json J = asyncOverwriteProgram(1, 16, /*Gather=*/true);
  EXPECT_EQ(loadError(J), "");
  J["instructions"][2]["attrs"]["async"] = "yes";
  EXPECT_NE(loadError(J).find("'async' is not an attribute"), std::string::npos)
      << loadError(J);
}

} // namespace
