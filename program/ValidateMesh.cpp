//===- ValidateMesh.cpp - Layouts of sharded params and buffers (v2) -----===//
#include "program/Program.h"

#include <map>
#include <tuple>

namespace weft {

Status checkGlobalLayout(const Mesh &M, const Layout &L,
                         const std::string &Ctx) {
  const size_t R = L.Global.size();
  if (L.Sharding.size() != R || L.Blocks.size() != R)
    return Status::error(
        Ctx + ": global_shape " + shapeString(L.Global) + ", sharding (" +
        std::to_string(L.Sharding.size()) + " dims) and blocks (" +
        std::to_string(L.Blocks.size()) + " dims) must have the same rank");
  std::vector<std::string> Used;
  for (size_t D = 0; D < R; ++D) {
    for (const std::string &A : L.Sharding[D]) {
      if (M.axisIndex(A) < 0)
        return Status::error(Ctx + ": sharding of dim " + std::to_string(D) +
                             " names axis '" + A +
                             "', not an axis of the mesh " + M.describe());
      for (const std::string &U : Used)
        if (U == A)
          return Status::error(Ctx + ": mesh axis '" + A +
                               "' shards more than one dim or twice");
      Used.push_back(A);
    }
    int64_t C = M.count(L.Sharding[D]), B = L.Blocks[D], G = L.Global[D];
    // B <= G / C first, so that B * C cannot overflow (blocks of 2^63-1).
    if (B < 1 || G < 1 || C < 1 || B > G / C || G % (B * C) != 0)
      return Status::error(Ctx + ": dim " + std::to_string(D) +
                           " of global size " + std::to_string(G) +
                           " cannot be split into " + std::to_string(B) +
                           " blocks x " + std::to_string(C) + " shards (over " +
                           axesString(L.Sharding[D]) + ")");
  }
  return Status::success();
}

namespace {

Status checkLayout(const Mesh &M, const Layout &L, const Shape &Local,
                   const std::string &Ctx) {
  const size_t R = Local.size();
  if (L.Global.size() != R)
    return Status::error(Ctx + ": global_shape " + shapeString(L.Global) +
                         " must have the rank of the local shape " +
                         shapeString(Local));
  WEFT_RETURN_IF_ERROR(checkGlobalLayout(M, L, Ctx));
  for (size_t D = 0; D < R; ++D) {
    int64_t C = M.count(L.Sharding[D]), G = L.Global[D];
    if (Local[D] != G / C)
      return Status::error(Ctx + ": local shape " + shapeString(Local) +
                           " has dim " + std::to_string(D) + " = " +
                           std::to_string(Local[D]) + ", expected " +
                           std::to_string(G / C) + " (global " +
                           std::to_string(G) + " / " + std::to_string(C) +
                           " shards over " + axesString(L.Sharding[D]) + ")");
  }
  return Status::success();
}

} // namespace

Status checkLayouts(const Program &P) {
  for (size_t I = 0; I < P.Params.size(); ++I)
    WEFT_RETURN_IF_ERROR(checkLayout(
        P.Devices, P.Params[I].Place, P.Params[I].Dims,
        "params[" + std::to_string(I) + "] '" + P.Params[I].Name + "'"));
  // Buffers of one kind and param are one tensor: same shape and layout.
  std::map<std::pair<int, int64_t>, size_t> First;
  // The rows every input's are compared with: the first i32 input of
  // [batch, seq] (whichever order the file lists them in).
  const BufferSpec *Tokens = nullptr;
  for (const BufferSpec &B : P.Buffers)
    if (!Tokens && B.Kind == BufferKind::Input && !B.tensorInput() &&
        B.Type == DType::I32 && B.Dims.size() == 2 &&
        B.Place.Sharding.size() == 2)
      Tokens = &B;
  std::map<std::string, const BufferSpec *> Named; // inputs by name
  for (size_t I = 0; I < P.Buffers.size(); ++I) {
    const BufferSpec &B = P.Buffers[I];
    std::string Ctx =
        "buffers[" + std::to_string(I) + "] (" + bufferKindName(B.Kind) +
        (B.Kind == BufferKind::Input ? " '" + B.Name + "'" : "") + ")";
    if (B.Kind == BufferKind::Arena)
      continue;
    WEFT_RETURN_IF_ERROR(checkLayout(P.Devices, B.Place, B.Dims, Ctx));
    for (size_t K = 0; K < B.Partial.size(); ++K) {
      const std::string &A = B.Partial[K];
      if (P.Devices.axisIndex(A) < 0)
        return Status::error(Ctx + ": partial names axis '" + A +
                             "', not an axis of the mesh " +
                             P.Devices.describe());
      for (size_t J = 0; J < K; ++J)
        if (B.Partial[J] == A)
          return Status::error(Ctx + ": partial names axis '" + A + "' twice");
      for (const AxesList &D : B.Place.Sharding)
        for (const std::string &U : D)
          if (U == A)
            return Status::error(Ctx + ": partial over axis '" + A +
                                 "', which also shards it");
    }
    if (B.Kind == BufferKind::Param && B.Param >= 0 &&
        B.Param < int64_t(P.Params.size())) {
      const Layout &L = P.Params[size_t(B.Param)].Place;
      if (B.Place.Global != L.Global || B.Place.Sharding != L.Sharding ||
          B.Place.Blocks != L.Blocks)
        return Status::error(
            Ctx + ": the layout of param '" + P.Params[size_t(B.Param)].Name +
            "' differs from params[" + std::to_string(B.Param) +
            "]'s (global_shape " + shapeString(B.Place.Global) + " vs " +
            shapeString(L.Global) + ", blocks " + shapeString(B.Place.Blocks) +
            " vs " + shapeString(L.Blocks) + ")");
    }
    // weft-run gives every rank the whole of a tensor input.
    if (B.tensorInput()) {
      if (B.Place.Global != B.Dims || !B.Partial.empty())
        return Status::error(Ctx +
                             ": a tensor input is whole on every rank, "
                             "but its layout is global_shape " +
                             shapeString(B.Place.Global) + " over local " +
                             shapeString(B.Dims) +
                             (B.Partial.empty() ? "" : ", partial"));
      continue;
    }
    if (B.Kind == BufferKind::Input) {
      // [batch, seq], or (version 11) labels of one per sample, [batch],
      // or float targets, [batch, ...] split along the rows only. An input
      // holds one micro-batch.
      const Shape Local = unsplitInputShape(P, B);
      const size_t Rank = Local.size();
      const bool Floats = B.Type != DType::I32;
      if (B.Place.Blocks != std::vector<int64_t>(Rank, 1))
        return Status::error(Ctx + ": inputs take no blocks");
      for (size_t D = 1; Floats && D < Rank; ++D)
        if (!B.Place.Sharding[D].empty())
          return Status::error(Ctx +
                               ": float targets are split along their "
                               "rows only, but dim " +
                               std::to_string(D) + " is split over " +
                               axesString(B.Place.Sharding[D]));
      Shape Global = Local;
      for (size_t D = 0; D < Rank; ++D)
        Global[D] *= P.Devices.count(B.Place.Sharding[D]);
      if (B.Place.Global != Local && B.Place.Global != Global)
        return Status::error(Ctx + ": global shape " +
                             shapeString(B.Place.Global) + " is neither " +
                             (Floats      ? "[batch/microbatches, ...]"
                              : Rank == 1 ? "[batch/microbatches]"
                                          : "[batch/microbatches, seq]") +
                             " = " + shapeString(Local) + " nor its " +
                             shapeString(Global) + " over the input's shards");
      // Inputs of one name are one tensor (several stages may read it).
      if (auto [It, New] = Named.emplace(B.Name, &B);
          !New && (It->second->Dims != B.Dims ||
                   It->second->Place.Sharding != B.Place.Sharding))
        return Status::error(Ctx + " " + shapeString(B.Dims) +
                             " differs in shape or sharding from another '" +
                             B.Name + "' input " +
                             shapeString(It->second->Dims));
      // The inputs' rows are the same samples: alike in rows and their
      // split (and in columns, both of a sequence).
      if (Tokens && Tokens != &B &&
          (Tokens->Dims[0] != B.Dims[0] ||
           Tokens->Place.Sharding[0] != B.Place.Sharding[0] ||
           (Rank == 2 && !Floats &&
            (Tokens->Dims != B.Dims ||
             Tokens->Place.Sharding != B.Place.Sharding))))
        return Status::error(Ctx + " " + shapeString(B.Dims) +
                             " is sharded unlike the other input " +
                             shapeString(Tokens->Dims));
      continue;
    }
    if (B.Kind == BufferKind::Constant)
      continue; // one tensor each, whole (parseConstantData)
    auto Key = std::make_pair(int(B.Kind), B.Param);
    auto [It, New] = First.emplace(Key, I);
    if (New)
      continue;
    const BufferSpec &A = P.Buffers[It->second];
    if (A.Dims != B.Dims || A.Place.Global != B.Place.Global ||
        A.Place.Sharding != B.Place.Sharding ||
        A.Place.Blocks != B.Place.Blocks || A.Partial != B.Partial)
      return Status::error(Ctx + " " + shapeString(B.Dims) +
                           " differs in shape, layout or partial axes "
                           "from buffers[" +
                           std::to_string(It->second) + "] " +
                           shapeString(A.Dims) + ", the same " +
                           bufferKindName(B.Kind) + " tensor");
  }
  return Status::success();
}

} // namespace weft
