//===- Samples.cpp - whole samples from .npy files, or drawn --------------===//
#include "runtime/data/Samples.h"
#include "program/Hash.h"
#include "runtime/data/Npy.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace weft {

Expected<std::vector<int32_t>> loadTokenRows(const std::string &TokensNpy,
                                             const Program &P) {
  Expected<NpyArray> A = readNpy(TokensNpy);
  if (!A.ok())
    return A.status();
  const std::string What = "--tokens '" + TokensNpy + "'";
  if (A->Dims.size() != 2 || A->Dims[0] < 1 || A->Dims[1] != P.Seq)
    return Status::error(What + " has shape " + shapeString(A->Dims) +
                         ", expected [samples, seq=" + std::to_string(P.Seq) +
                         "]");
  return npyTokenIds(*A, A->Dims, P.Vocab, What);
}

namespace {
/// --targets [N, ...] floats (a regression's: the shape of each sample's
/// output), finite, beside the samples' Ids.
Expected<SampleData> loadFloatSamples(const std::string &TargetsNpy,
                                      const Program &P,
                                      const BufferSpec &Targets,
                                      std::vector<int32_t> Ids) {
  Expected<NpyArray> Y = readNpy(TargetsNpy);
  if (!Y.ok())
    return Y.status();
  const std::string YWhat = "--targets '" + TargetsNpy + "'";
  Shape Want = Targets.Dims;
  Want[0] = int64_t(Ids.size()) / P.Seq;
  Expected<std::vector<char>> Bytes =
      npyFloats(*Y, Want, P.Type == DType::F64, YWhat);
  if (!Bytes.ok())
    return Status::error(Bytes.message() +
                         " (float targets: one row of the output's shape per "
                         "sample)");
  const size_t Elem = dtypeBytes(P.Type), N = Bytes->size() / Elem;
  for (size_t I = 0; I < N; ++I) {
    double V;
    if (Elem == 8) {
      std::memcpy(&V, Bytes->data() + I * 8, 8);
    } else {
      float F;
      std::memcpy(&F, Bytes->data() + I * 4, 4);
      V = F;
    }
    if (!std::isfinite(V))
      return Status::error(YWhat + ": target " + std::to_string(V) +
                           " at flat index " + std::to_string(I) +
                           " is not finite");
  }
  return SampleData::fromFloatRows(std::move(Ids), std::move(*Bytes),
                                   size_t(Targets.bytes() / Targets.Dims[0]),
                                   P.Seq, P.Vocab, "--tokens/--targets");
}

} // namespace

Status loadAttentionMask(const std::string &MaskNpy, const Program &P,
                         SampleData &S) {
  const std::string What = "--attention-mask '" + MaskNpy + "'";
  Expected<NpyArray> A = readNpy(MaskNpy);
  if (!A.ok())
    return A.status();
  Expected<std::vector<int32_t>> M =
      npyTokenIds(*A, Shape{S.rows(), P.Seq}, 2, What, false, "{0, 1}");
  if (!M.ok())
    return M.status();
  const std::vector<int32_t> &T = S.targetRows();
  for (int64_t R = 0; R < S.rows(); ++R) {
    const int32_t *Row = M->data() + R * P.Seq;
    int64_t First = -1, Last = -1;
    for (int64_t J = 0; J < P.Seq; ++J) {
      const auto At = [&] {
        return " at [" + std::to_string(R) + ", " + std::to_string(J) + "]";
      };
      if (Row[J] == 1) {
        if (Last >= 0 && Last != J - 1)
          return Status::error(What + ": padding inside row " +
                               std::to_string(R) + "'s tokens" + At() +
                               ": weft trains rows whose tokens are one run, "
                               "padded left or right");
        First = First < 0 ? J : First;
        Last = J;
      } else if (!P.sampleTargets() && T[size_t(R * P.Seq + J)] != -100) {
        return Status::error(What +
                             ": a padded position's target must be "
                             "-100 (it predicts nothing), got " +
                             std::to_string(T[size_t(R * P.Seq + J)]) + At());
      }
    }
    if (First < 0)
      return Status::error(What + ": row " + std::to_string(R) +
                           " is all padding");
  }
  S.setMask(std::move(*M));
  return Status::success();
}

Status loadTokenTypes(const std::string &TypesNpy, const Program &P,
                      SampleData &S) {
  const std::string What = "--token-type-ids '" + TypesNpy + "'";
  Expected<NpyArray> A = readNpy(TypesNpy);
  if (!A.ok())
    return A.status();
  Expected<std::vector<int32_t>> T =
      npyTokenIds(*A, Shape{S.rows(), P.Seq}, P.TokenTypeRows, What, false,
                  "[0, " + std::to_string(P.TokenTypeRows) +
                      ") (the token-type table's rows)");
  if (!T.ok())
    return T.status();
  S.setTokenTypes(std::move(*T));
  return Status::success();
}

Expected<SampleData> loadSamples(const std::string &TokensNpy,
                                 const std::string &TargetsNpy,
                                 const Program &P, bool MaskedLoss) {
  std::vector<int32_t> Ids[2];
  Expected<std::vector<int32_t>> Tokens = loadTokenRows(TokensNpy, P);
  if (!Tokens.ok())
    return Tokens.status();
  Ids[0] = std::move(*Tokens);
  if (const BufferSpec *Floats = P.floatTargets())
    return loadFloatSamples(TargetsNpy, P, *Floats, std::move(Ids[0]));
  Expected<NpyArray> A = readNpy(TargetsNpy);
  if (!A.ok())
    return A.status();
  const std::string What = "--targets '" + TargetsNpy + "'";
  const bool PerSample = P.sampleTargets();
  if (A->Dims.size() != (PerSample ? 1u : 2u) || A->Dims[0] < 1 ||
      (!PerSample && A->Dims[1] != P.Seq))
    return Status::error(
        What + " has shape " + shapeString(A->Dims) + ", expected " +
        (PerSample ? std::string("[samples] (the program's loss reads one "
                                 "target per sample)")
                   : "[samples, seq=" + std::to_string(P.Seq) + "]"));
  Expected<std::vector<int32_t>> V =
      npyTokenIds(*A, A->Dims, P.targetBound(), What, /*AllowIgnored=*/true,
                  P.Classes ? "the classes" : "the vocabulary");
  if (!V.ok())
    return V.status();
  Ids[1] = std::move(*V);
  // A next-token cross-entropy counts every target: refused here, not at
  // the first step's loss.
  if (!MaskedLoss)
    if (auto It = std::find(Ids[1].begin(), Ids[1].end(), -100);
        It != Ids[1].end()) {
      const int64_t At = It - Ids[1].begin();
      return Status::error(
          "--targets '" + TargetsNpy + "': -100 (ignored) at [" +
          std::to_string(At / P.Seq) + ", " + std::to_string(At % P.Seq) +
          "], but the program's loss counts every target: compile it with "
          "--loss cross-entropy");
    }
  return SampleData::fromRows(std::move(Ids[0]), std::move(Ids[1]), P.Seq,
                              P.Vocab, P.targetBound(), PerSample,
                              "--tokens/--targets");
}

std::vector<uint32_t> randomTokens(const Program &P, uint64_t Seed) {
  std::vector<uint32_t> T(size_t(P.Batch * P.Seq + 1));
  for (size_t I = 0; I < T.size(); ++I)
    T[I] = uint32_t(splitmix64(splitmix64(Seed) + I) % uint64_t(P.Vocab));
  return T;
}

Expected<SampleData> randomSamples(const Program &P, uint64_t Seed) {
  std::vector<uint32_t> T = randomTokens(P, Seed);
  std::vector<int32_t> Tokens(T.begin(), T.end() - 1), Targets;
  // A regression's: floats in [-1, 1), in the program's dtype.
  if (const BufferSpec *F = P.floatTargets()) {
    const size_t RowBytes = size_t(F->bytes() / F->Dims[0]);
    const size_t Elem = dtypeBytes(P.Type);
    std::vector<char> Bytes(size_t(P.Batch) * RowBytes);
    for (size_t I = 0; I < Bytes.size() / Elem; ++I) {
      const double V =
          double(splitmix64(splitmix64(Seed + 1) + I) >> 11) * 0x1p-52 - 1.0;
      const float F32 = float(V);
      std::memcpy(Bytes.data() + I * Elem,
                  Elem == 8 ? static_cast<const void *>(&V) : &F32, Elem);
    }
    return SampleData::fromFloatRows(std::move(Tokens), std::move(Bytes),
                                     RowBytes, P.Seq, P.Vocab,
                                     "--grad-check samples");
  }
  const int64_t N = P.sampleTargets() ? P.Batch : P.Batch * P.Seq;
  for (int64_t I = 0; I < N; ++I)
    Targets.push_back(int32_t(splitmix64(splitmix64(Seed + 1) + uint64_t(I)) %
                              uint64_t(P.targetBound())));
  return SampleData::fromRows(std::move(Tokens), std::move(Targets), P.Seq,
                              P.Vocab, P.targetBound(), P.sampleTargets(),
                              "--grad-check samples");
}

} // namespace weft
