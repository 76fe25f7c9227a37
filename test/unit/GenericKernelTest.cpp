//===- GenericKernelTest.cpp - the generic path's kernels against loops ---===//
//
// binary, binary_grad, broadcast and reduce take fast paths where an operand
// is the whole shape, its trailing dims (a bias) or its leading dims (a row
// statistic), and an index odometer otherwise. Each shape pair below is read
// both ways and compared, bit for bit in f64, with a naive loop over
// multi-indices that sums in row-major order.
//
//===----------------------------------------------------------------------===//
#include "program/Broadcast.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace weft;
using namespace weft::cpu;

namespace {

int64_t count(const Dims &S) {
  int64_t N = 1;
  for (int64_t D : S)
    N *= D;
  return N;
}

std::vector<double> random(const Dims &S, unsigned Seed) {
  std::mt19937 G(Seed);
  std::uniform_real_distribution<double> D(0.5, 2.0);
  std::vector<double> V(size_t(count(S)));
  for (double &X : V)
    X = D(G);
  return V;
}

// The flat index into a tensor of shape S (broadcast to Y) at Y's
// multi-index Idx.
int64_t flatAt(const Dims &S, const Dims &Y, const Dims &Idx) {
  int64_t At = 0;
  for (size_t K = 0; K < S.size(); ++K) {
    int64_t I = Idx[Y.size() - S.size() + K];
    At = At * S[K] + (S[K] == 1 ? 0 : I);
  }
  return At;
}

template <typename F> void forEach(const Dims &Y, F Body) {
  Dims Idx(Y.size(), 0);
  for (int64_t I = 0; I < count(Y); ++I) {
    Body(I, Idx);
    for (size_t D = Y.size(); D-- > 0;)
      if (++Idx[D] < Y[D])
        break;
      else
        Idx[D] = 0;
  }
}

// (A, B) pairs covering the access classes: whole, trailing (bias), leading
// (row statistic), scalar-like, and a middle stretch (the odometer).
const std::vector<std::pair<Dims, Dims>> kShapes = {
    {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}},
    {{2, 3, 4}, {2, 3, 1}}, {{2, 3, 4}, {1, 1, 1}},
    {{2, 3, 4}, {2, 1, 4}}, {{3, 1, 4}, {2, 1, 1, 1}},
    {{1, 3, 1}, {2, 1, 4}}, {{5}, {1}}};

TEST(GenericKernels, BinaryAndItsGradientMatchLoops) {
  for (auto [SA, SB] : kShapes)
    for (int Swap = 0; Swap < 2; ++Swap) {
      if (Swap)
        std::swap(SA, SB);
      Dims Y;
      ASSERT_TRUE(broadcastShapes(SA, SB, Y));
      auto Signed = random(SA, 1), B = random(SB, 2), Dy = random(Y, 3);
      // pow's base positive: a negative one to a fractional power is NaN.
      auto Positive = Signed;
      for (double &V : Positive)
        V = std::abs(V) + 0.5;
      for (int F = 0; F <= int(BinaryFn::Min); ++F) {
        const BinaryFn Fn = BinaryFn(F);
        const auto &A = Fn == BinaryFn::Pow ? Positive : Signed;
        std::vector<double> Got(size_t(count(Y))), Want(Got.size());
        binary(Fn, A.data(), SA, B.data(), SB, Got.data(), Y);
        forEach(Y, [&](int64_t I, const Dims &Idx) {
          Want[I] = weft::binary<double>(Fn, A[flatAt(SA, Y, Idx)],
                                         B[flatAt(SB, Y, Idx)]);
        });
        EXPECT_EQ(Got, Want) << "binary, shapes " << SA.size() << "/"
                             << SB.size() << " swap " << Swap;
        for (int Operand : {0, 1}) {
          const Dims &SO = Operand ? SB : SA;
          std::vector<double> G(size_t(count(SO))), W(G.size(), 0.0);
          binaryGrad(Fn, Operand, A.data(), SA, B.data(), SB, Dy.data(), Y,
                     G.data());
          forEach(Y, [&](int64_t I, const Dims &Idx) {
            W[flatAt(SO, Y, Idx)] +=
                weft::binaryGrad<double>(Fn, Operand, A[flatAt(SA, Y, Idx)],
                                         B[flatAt(SB, Y, Idx)], Dy[I]);
          });
          EXPECT_EQ(G, W) << "binary_grad operand " << Operand << " swap "
                          << Swap;
        }
      }
    }
}

TEST(GenericKernels, BroadcastAndReduceMatchLoops) {
  for (auto [SY, SX] : kShapes) {
    Dims Y;
    ASSERT_TRUE(broadcastShapes(SX, SY, Y));
    if (!broadcastsTo(SX, Y))
      continue;
    auto X = random(SX, 4), Big = random(Y, 5);
    std::vector<double> Up(size_t(count(Y))), WantUp(Up.size());
    broadcast(X.data(), SX, Up.data(), Y);
    std::vector<double> Down(size_t(count(SX))), WantDown(Down.size(), 0.0);
    reduce(Big.data(), Y, Down.data(), SX);
    forEach(Y, [&](int64_t I, const Dims &Idx) {
      WantUp[I] = X[flatAt(SX, Y, Idx)];
      WantDown[flatAt(SX, Y, Idx)] += Big[I];
    });
    EXPECT_EQ(Up, WantUp);
    EXPECT_EQ(Down, WantDown);
  }
}

// select reads its condition, a and b through the same access classes:
// each (C, A) pair of kShapes with B each of them too, compared bit for bit
// with the loop; the gradient of each operand likewise. The unpicked
// operand holds infinities: they must never reach y or a gradient.
TEST(GenericKernels, SelectAndItsGradientMatchLoops) {
  for (auto [SC, SA] : kShapes)
    for (const Dims &SB : {SA, Dims{1}, SC}) {
      Dims AB, Y;
      ASSERT_TRUE(broadcastShapes(SA, SB, AB));
      ASSERT_TRUE(broadcastShapes(SC, AB, Y));
      std::vector<double> C = random(SC, 6), A = random(SA, 7),
                          B = random(SB, 8), Dy = random(Y, 9);
      for (size_t I = 0; I < C.size(); ++I)
        C[I] = I % 3 == 1 ? 0.0 : C[I]; // zeros pick b
      std::vector<double> Got(size_t(count(Y))), Want(Got.size());
      select(C.data(), SC, A.data(), SA, B.data(), SB, Got.data(), Y);
      forEach(Y, [&](int64_t I, const Dims &Idx) {
        Want[I] = C[flatAt(SC, Y, Idx)] != 0 ? A[flatAt(SA, Y, Idx)]
                                             : B[flatAt(SB, Y, Idx)];
      });
      EXPECT_EQ(Got, Want) << "select, ranks " << SC.size() << "/" << SA.size()
                           << "/" << SB.size();
      for (int Operand : {0, 1}) {
        const Dims &SO = Operand ? SB : SA;
        if (!broadcastsTo(SO, Y))
          continue;
        std::vector<double> G(size_t(count(SO))), W(G.size(), 0.0);
        selectGrad(Operand, C.data(), SC, Dy.data(), Y, G.data(), SO);
        forEach(Y, [&](int64_t I, const Dims &Idx) {
          if ((C[flatAt(SC, Y, Idx)] != 0) == (Operand == 0))
            W[flatAt(SO, Y, Idx)] += Dy[I];
        });
        EXPECT_EQ(G, W) << "select_grad operand " << Operand;
      }
    }
}

// ONNX's comparisons and boolean logic as masks: 1 where true, 0 where
// false, NaN compared false (as IEEE and ONNX), any nonzero read as true.
TEST(GenericKernels, MaskFnsComputeOnesAndZeros) {
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> A = {1, 2, 3, NaN, 0, -2}, B = {2, 2, 2, 1, 0, 5};
  const Dims S{6};
  auto run = [&](BinaryFn Fn) {
    std::vector<double> Y(6);
    binary(Fn, A.data(), S, B.data(), S, Y.data(), S);
    return Y;
  };
  using V = std::vector<double>;
  EXPECT_EQ(run(BinaryFn::Eq), (V{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(run(BinaryFn::Lt), (V{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(run(BinaryFn::Le), (V{1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(run(BinaryFn::Gt), (V{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(run(BinaryFn::Ge), (V{0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(run(BinaryFn::And), (V{1, 1, 1, 1, 0, 1}));
  EXPECT_EQ(run(BinaryFn::Or), (V{1, 1, 1, 1, 0, 1}));
  std::vector<double> Not(6), Nan(6);
  pointwise(PointwiseFn::Not, 0.0, A.data(), Not.data(), 6);
  pointwise(PointwiseFn::IsNan, 0.0, A.data(), Nan.data(), 6);
  EXPECT_EQ(Not, (V{0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(Nan, (V{0, 0, 0, 1, 0, 0}));
}

// Max and Min as torch.maximum/minimum (NaN wins; a tie halves the
// gradient), clamp_min and clamp_max as torch.clamp's halves (the bound
// itself passes the gradient; NaN passes none).
TEST(GenericKernels, ExtremaAndClampsAsTorch) {
  const double NaN = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(weft::binary<double>(BinaryFn::Max, 1, 2), 2);
  EXPECT_EQ(weft::binary<double>(BinaryFn::Min, 1, 2), 1);
  EXPECT_TRUE(std::isnan(weft::binary<double>(BinaryFn::Max, NaN, 2)));
  EXPECT_TRUE(std::isnan(weft::binary<double>(BinaryFn::Min, 2, NaN)));
  for (BinaryFn Fn : {BinaryFn::Max, BinaryFn::Min})
    for (int Op : {0, 1})
      EXPECT_EQ(weft::binaryGrad<double>(Fn, Op, 3, 3, 1), 0.5);
  EXPECT_EQ(weft::binaryGrad<double>(BinaryFn::Max, 0, 1, 2, 1), 0);
  EXPECT_EQ(weft::binaryGrad<double>(BinaryFn::Max, 1, 1, 2, 1), 1);
  EXPECT_EQ(weft::binaryGrad<double>(BinaryFn::Min, 0, 1, 2, 1), 1);
  EXPECT_EQ(weft::binaryGrad<double>(BinaryFn::Min, 1, 1, 2, 1), 0);
  using P = PointwiseFn;
  EXPECT_EQ(weft::pointwise<double>(P::ClampMin, -1, 0), 0);
  EXPECT_EQ(weft::pointwise<double>(P::ClampMax, 3, 2), 2);
  EXPECT_EQ(weft::pointwiseGrad<double>(P::ClampMin, 0, 0, 1), 1);
  EXPECT_EQ(weft::pointwiseGrad<double>(P::ClampMin, -1, 0, 1), 0);
  EXPECT_EQ(weft::pointwiseGrad<double>(P::ClampMax, 2, 2, 1), 1);
  EXPECT_EQ(weft::pointwiseGrad<double>(P::ClampMax, 3, 2, 1), 0);
  EXPECT_TRUE(std::isnan(weft::pointwise<double>(P::ClampMin, NaN, 0)));
  EXPECT_EQ(weft::pointwiseGrad<double>(P::ClampMin, NaN, 0, 1), 0);
}

TEST(GenericKernels, SelectNeverReadsTheUnpickedInfinity) {
  const Dims S{2, 3};
  std::vector<double> C = {1, 0, 1, 0, 0, 1}, A = {1, 2, 3, 4, 5, 6};
  const double Inf = std::numeric_limits<double>::infinity();
  std::vector<double> Ninf = {-Inf}, Y(6);
  select(C.data(), S, A.data(), S, Ninf.data(), Dims{}, Y.data(), S);
  EXPECT_EQ(Y, (std::vector<double>{1, -Inf, 3, -Inf, -Inf, 6}));
  std::vector<double> Dy = {1, 1, 1, 1, 1, 1}, DNinf(1);
  selectGrad(1, C.data(), S, Dy.data(), S, DNinf.data(), Dims{});
  EXPECT_EQ(DNinf[0], 3.0); // the three positions -inf was picked at
}

} // namespace

// weft.softmax over the last dim and its gradient, in f32 (the SIMD clones'
// vexp and lane sums) against loops in double: rows of 37 and 300 columns
// (a masked lane tail, a chunk past 256), a masked key (-inf) giving 0,
// and an all-masked row giving NaN, as exp(-inf - -inf).
TEST(GenericKernels, SoftmaxAndItsGradientMatchLoops) {
  const float NegInf = -std::numeric_limits<float>::infinity();
  for (int64_t N : {37, 300}) {
    const int64_t Rows = 5;
    std::mt19937 Rng{unsigned(N)};
    std::uniform_real_distribution<float> U(-4.0f, 4.0f);
    std::vector<float> X(size_t(Rows * N)), Dy(size_t(Rows * N)),
        Y(size_t(Rows * N)), Dx(size_t(Rows * N));
    for (size_t I = 0; I < X.size(); ++I) {
      X[I] = U(Rng);
      Dy[I] = U(Rng);
    }
    X[size_t(N + 3)] = NegInf;
    for (int64_t J = 0; J < N; ++J)
      X[size_t(4 * N + J)] = NegInf;
    softmax(X.data(), Y.data(), Rows, N);
    softmaxGrad(Y.data(), Dy.data(), Dx.data(), Rows, N);
    for (int64_t R = 0; R < 4; ++R) {
      double M = -1e300, S = 0, Dot = 0;
      for (int64_t J = 0; J < N; ++J)
        M = std::max(M, double(X[size_t(R * N + J)]));
      for (int64_t J = 0; J < N; ++J)
        S += std::exp(double(X[size_t(R * N + J)]) - M);
      for (int64_t J = 0; J < N; ++J)
        Dot += double(Dy[size_t(R * N + J)]) * double(Y[size_t(R * N + J)]);
      for (int64_t J = 0; J < N; ++J) {
        const size_t I = size_t(R * N + J);
        const double P = std::exp(double(X[I]) - M) / S;
        EXPECT_NEAR(Y[I], P, 1e-6 * std::max(1.0, P)) << "row " << R;
        EXPECT_NEAR(Dx[I], double(Y[I]) * (double(Dy[I]) - Dot), 1e-5)
            << "row " << R;
      }
    }
    EXPECT_EQ(Y[size_t(N + 3)], 0.0f);
    EXPECT_TRUE(std::isnan(Y[size_t(4 * N)]));
  }
}
