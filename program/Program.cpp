//===- Program.cpp - Program container and JSON payload parsing -----------===//
#include "program/Program.h"
#include "program/Base64.h"
#include "program/Hash.h"
#include "program/JsonDepth.h"
#include "program/UniqueNames.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

using json = nlohmann::json;

namespace weft {

namespace {

const char *const OpNames[NumOpKinds] = {"embedding",
                                         "embedding_grad",
                                         "position_embedding",
                                         "position_embedding_grad",
                                         "matmul",
                                         "bias_add",
                                         "reduce_rows",
                                         "add",
                                         "mul",
                                         "split",
                                         "concat",
                                         "layer_norm",
                                         "layer_norm_grad",
                                         "rms_norm",
                                         "rms_norm_grad",
                                         "gelu",
                                         "gelu_grad",
                                         "silu",
                                         "silu_grad",
                                         "swiglu",
                                         "swiglu_grad",
                                         "rope",
                                         "attention",
                                         "attention_grad",
                                         "cross_entropy",
                                         "cross_entropy_grad",
                                         "fill",
                                         "copy",
                                         "pack",
                                         "unpack",
                                         "adamw",
                                         "cross_entropy_stats",
                                         "cross_entropy_from_stats",
                                         "cross_entropy_stats_grad",
                                         "all_reduce",
                                         "all_gather",
                                         "reduce_scatter",
                                         "slice",
                                         "act",
                                         "act_grad",
                                         "accumulate",
                                         "wait",
                                         "block_transpose",
                                         "cast",
                                         "add_row",
                                         "row_grad",
                                         "pointwise",
                                         "pointwise_grad",
                                         "binary",
                                         "binary_grad",
                                         "broadcast",
                                         "reduce",
                                         "reshape",
                                         "transpose",
                                         "softmax",
                                         "softmax_grad",
                                         "batch_matmul",
                                         "select",
                                         "select_grad",
                                         "mse_loss",
                                         "mse_loss_grad",
                                         "dropout",
                                         "all_to_all",
                                         "attention_block",
                                         "softmax_merge",
                                         "attention_block_grad",
                                         "ring_shift"};

uint64_t readLE(const std::string &B, size_t Off, int Bytes) {
  uint64_t V = 0;
  for (int I = Bytes - 1; I >= 0; --I)
    V = (V << 8) | static_cast<unsigned char>(B[Off + I]);
  return V;
}

void writeLE(std::string &B, uint64_t V, int Bytes) {
  for (int I = 0; I < Bytes; ++I)
    B.push_back(static_cast<char>((V >> (8 * I)) & 0xff));
}

/// Field readers: each names the field path in its message.
Status need(const json &Obj, const char *Key, const std::string &Ctx,
            const json *&Out) {
  if (!Obj.is_object())
    return Status::error(Ctx + " is not an object");
  auto It = Obj.find(Key);
  if (It == Obj.end())
    return Status::error("missing field '" + std::string(Key) + "' in " + Ctx);
  Out = &*It;
  return Status::success();
}

Status getInt(const json &Obj, const char *Key, const std::string &Ctx,
              int64_t &Out) {
  const json *V;
  WEFT_RETURN_IF_ERROR(need(Obj, Key, Ctx, V));
  if (!V->is_number_integer())
    return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                         " must be an integer, got " + V->dump());
  Out = V->get<int64_t>();
  return Status::success();
}

Status getNumber(const json &Obj, const char *Key, const std::string &Ctx,
                 double &Out) {
  const json *V;
  WEFT_RETURN_IF_ERROR(need(Obj, Key, Ctx, V));
  if (!V->is_number())
    return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                         " must be a number, got " + V->dump());
  Out = V->get<double>();
  return Status::success();
}

Status getString(const json &Obj, const char *Key, const std::string &Ctx,
                 std::string &Out) {
  const json *V;
  WEFT_RETURN_IF_ERROR(need(Obj, Key, Ctx, V));
  if (!V->is_string())
    return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                         " must be a string, got " + V->dump());
  Out = V->get<std::string>();
  return Status::success();
}

Status getBool(const json &Obj, const char *Key, const std::string &Ctx,
               bool &Out) {
  const json *V;
  WEFT_RETURN_IF_ERROR(need(Obj, Key, Ctx, V));
  if (!V->is_boolean())
    return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                         " must be a bool, got " + V->dump());
  Out = V->get<bool>();
  return Status::success();
}

// Version 9: a masked-LM program's recipe; its ranges are checked by
// validateProgram.
Status parseMaskedLm(const json &Root, Program &P) {
  if (!Root.contains("masked_lm"))
    return Status::success();
  if (P.Version < 9)
    return Status::error("field 'masked_lm' (a masked-language-model loss) "
                         "needs format version 9, the file is version " +
                         std::to_string(P.Version));
  const json &M = Root["masked_lm"];
  if (!M.is_object())
    return Status::error("field 'masked_lm' must be an object, got " +
                         M.dump());
  WEFT_RETURN_IF_ERROR(
      getInt(M, "mask_token", "masked_lm", P.MaskedLm.MaskToken));
  WEFT_RETURN_IF_ERROR(
      getNumber(M, "mask_prob", "masked_lm", P.MaskedLm.MaskProb));
  WEFT_RETURN_IF_ERROR(getInt(M, "seed", "masked_lm", P.MaskedLm.Seed));
  const MaskedLmSpec &S = P.MaskedLm;
  if (S.MaskToken < 0 || S.MaskToken >= P.Vocab)
    return Status::error(
        "masked_lm.mask_token=" + std::to_string(S.MaskToken) +
        " is not a token id in [0, vocab=" + std::to_string(P.Vocab) + ")");
  if (!(S.MaskProb > 0 && S.MaskProb <= 1))
    return Status::error("masked_lm.mask_prob=" + std::to_string(S.MaskProb) +
                         " is not in (0, 1]");
  if (S.Seed < 0)
    return Status::error("masked_lm.seed=" + std::to_string(S.Seed) +
                         " is negative");
  if (P.forwardOnly())
    return Status::error("field 'masked_lm' in a forward-only program, which "
                         "has no loss");
  return Status::success();
}

// Version 14: the order of each sequence's chunks under load-balanced
// context parallelism.
Status parseSeqChunks(const json &Root, Program &P) {
  if (!Root.contains("seq_chunks"))
    return Status::success();
  if (P.Version < 14)
    return Status::error("field 'seq_chunks' (load-balanced context "
                         "parallelism) needs format version 14, the file is "
                         "version " +
                         std::to_string(P.Version));
  WEFT_RETURN_IF_ERROR(getInt(Root, "seq_chunks", "program", P.SeqChunks));
  if (P.SeqChunks < 2 || P.SeqChunks % 2 != 0 || P.Seq % P.SeqChunks != 0)
    return Status::error(
        "seq_chunks=" + std::to_string(P.SeqChunks) +
        " must be even, at least 2, and divide seq=" + std::to_string(P.Seq));
  if (P.packsDocuments() || P.forwardOnly() || P.sampleTargets() ||
      P.floatTargets())
    return Status::error("seq_chunks (chunks out of order) in a program that " +
                         std::string(P.packsDocuments() ? "packs documents"
                                     : P.forwardOnly()
                                         ? "is forward-only"
                                         : "reads one target per sample") +
                         ": the runtime reads those in the natural order");
  return Status::success();
}

// Version 12: rows that pack documents, each ending with `eos`.
Status parseDocuments(const json &Root, Program &P) {
  if (!Root.contains("documents"))
    return Status::success();
  if (P.Version < 12)
    return Status::error("field 'documents' (rows that pack documents) needs "
                         "format version 12, the file is version " +
                         std::to_string(P.Version));
  const json &D = Root["documents"];
  if (!D.is_object())
    return Status::error("field 'documents' must be an object, got " +
                         D.dump());
  WEFT_RETURN_IF_ERROR(
      getBool(D, "given_targets", "documents", P.DocumentTargetsGiven));
  if (D.contains("attention_mask")) {
    WEFT_RETURN_IF_ERROR(
        getBool(D, "attention_mask", "documents", P.DocumentsFromMask));
    if (!P.DocumentsFromMask || D.contains("eos") || !P.DocumentTargetsGiven)
      return Status::error("field 'documents' with attention_mask is "
                           "{\"attention_mask\": true, \"given_targets\": "
                           "true}, got " +
                           D.dump());
    return Status::success();
  }
  WEFT_RETURN_IF_ERROR(getInt(D, "eos", "documents", P.DocumentEos));
  if (P.DocumentEos < 0 || P.DocumentEos >= P.Vocab)
    return Status::error(
        "documents.eos=" + std::to_string(P.DocumentEos) +
        " is not a token id in [0, vocab=" + std::to_string(P.Vocab) + ")");
  if (P.forwardOnly())
    return Status::error("field 'documents' in a forward-only program, which "
                         "trains nothing");
  return Status::success();
}

Status getIntList(const json &Obj, const char *Key, const std::string &Ctx,
                  std::vector<int64_t> &Out) {
  const json *V;
  WEFT_RETURN_IF_ERROR(need(Obj, Key, Ctx, V));
  if (!V->is_array())
    return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                         " must be an array of integers, got " + V->dump());
  Out.clear();
  for (const json &E : *V) {
    if (!E.is_number_integer())
      return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                           " must be an array of integers, got " + V->dump());
    Out.push_back(E.get<int64_t>());
  }
  return Status::success();
}

Status getShape(const json &Obj, const std::string &Ctx, Shape &Out) {
  WEFT_RETURN_IF_ERROR(getIntList(Obj, "shape", Ctx, Out));
  // Bounded so that byte sizes cannot overflow int64 anywhere later.
  return checkShapeSize(Out, Ctx);
}

Status parseDType(const std::string &S, const std::string &Ctx, DType &Out) {
  if (S == "f32")
    Out = DType::F32;
  else if (S == "f64")
    Out = DType::F64;
  else if (S == "i32")
    Out = DType::I32;
  else if (S == "bf16")
    Out = DType::BF16;
  else
    return Status::error("unknown dtype '" + S + "' in " + Ctx +
                         " (expected f32, f64, bf16 or i32)");
  return Status::success();
}

Status parseOptimizer(const json &Root, bool ForwardOnly, OptimizerSpec &O) {
  const json *Opt;
  WEFT_RETURN_IF_ERROR(need(Root, "optimizer", "program", Opt));
  std::string Ctx = "optimizer";
  WEFT_RETURN_IF_ERROR(getString(*Opt, "kind", Ctx, O.Kind));
  // A forward-only program trains nothing.
  if (ForwardOnly != (O.Kind == "none"))
    return Status::error("optimizer kind '" + O.Kind + "' in a " +
                         (ForwardOnly ? "forward-only program (expected none)"
                                      : "training program (expected adamw)"));
  if (ForwardOnly)
    return Status::success();
  if (O.Kind != "adamw")
    return Status::error("unknown optimizer kind '" + O.Kind +
                         "' (expected adamw)");
  WEFT_RETURN_IF_ERROR(getNumber(*Opt, "lr", Ctx, O.Lr));
  WEFT_RETURN_IF_ERROR(getNumber(*Opt, "beta1", Ctx, O.Beta1));
  WEFT_RETURN_IF_ERROR(getNumber(*Opt, "beta2", Ctx, O.Beta2));
  WEFT_RETURN_IF_ERROR(getNumber(*Opt, "eps", Ctx, O.Eps));
  WEFT_RETURN_IF_ERROR(getNumber(*Opt, "weight_decay", Ctx, O.WeightDecay));
  WEFT_RETURN_IF_ERROR(getString(*Opt, "schedule", Ctx, O.Schedule));
  WEFT_RETURN_IF_ERROR(getInt(*Opt, "warmup_steps", Ctx, O.WarmupSteps));
  WEFT_RETURN_IF_ERROR(getInt(*Opt, "total_steps", Ctx, O.TotalSteps));
  WEFT_RETURN_IF_ERROR(getNumber(*Opt, "min_lr", Ctx, O.MinLr));
  std::string Problem = checkHyperparams(O);
  if (!Problem.empty())
    return Status::error("optimizer: " + Problem);
  return Status::success();
}

Status getAxes(const json &Obj, const char *Key, const std::string &Ctx,
               AxesList &Out) {
  const json *V;
  WEFT_RETURN_IF_ERROR(need(Obj, Key, Ctx, V));
  if (!V->is_array())
    return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                         " must be an array of axis names, got " + V->dump());
  Out.clear();
  for (const json &E : *V) {
    if (!E.is_string())
      return Status::error("field '" + std::string(Key) + "' in " + Ctx +
                           " must be an array of axis names, got " + V->dump());
    Out.push_back(E.get<std::string>());
  }
  return Status::success();
}

/// dim_axes (version 12): per dim, a list of axis names.
Status getDimAxes(const json &Obj, const std::string &Ctx,
                  std::vector<AxesList> &Out) {
  Out.clear();
  if (!Obj.contains("dim_axes"))
    return Status::success();
  const json &V = Obj["dim_axes"];
  if (!V.is_array())
    return Status::error("field 'dim_axes' in " + Ctx +
                         " must be an array of lists of axis names, got " +
                         V.dump());
  for (const json &Dim : V) {
    AxesList Axes;
    if (!Dim.is_array())
      return Status::error("field 'dim_axes' in " + Ctx +
                           " must be an array of lists of axis names, got " +
                           V.dump());
    for (const json &E : Dim) {
      if (!E.is_string())
        return Status::error("field 'dim_axes' in " + Ctx +
                             " must be an array of lists of axis names, got " +
                             V.dump());
      Axes.push_back(E.get<std::string>());
    }
    Out.push_back(std::move(Axes));
  }
  return Status::success();
}

/// A drop probability: 0 < p < 1.
Status getDropP(const json &Obj, const char *Key, const std::string &Ctx,
                double &Out) {
  WEFT_RETURN_IF_ERROR(getNumber(Obj, Key, Ctx, Out));
  if (!(Out > 0.0 && Out < 1.0))
    return Status::error("field '" + std::string(Key) + "' in " + Ctx + " is " +
                         std::to_string(Out) + ", expected 0 < p < 1");
  return Status::success();
}

/// Version 2: optional global_shape, sharding and blocks. Returns whether
/// any of them is present; absent parts default to the local shape,
/// replicated, one block. Consistency is checked by validateProgram.
Status parseLayout(const json &J, const std::string &Ctx, const Shape &Local,
                   Layout &L, bool &Present) {
  L = Layout::replicated(Local);
  Present = false;
  if (J.contains("global_shape")) {
    Present = true;
    WEFT_RETURN_IF_ERROR(getIntList(J, "global_shape", Ctx, L.Global));
  }
  if (J.contains("sharding")) {
    Present = true;
    const json &S = J["sharding"];
    if (!S.is_array())
      return Status::error("field 'sharding' in " + Ctx +
                           " must be an array (per dim) of axis lists");
    L.Sharding.assign(S.size(), {});
    for (size_t D = 0; D < S.size(); ++D) {
      json Wrap = {{"dim", S[D]}};
      WEFT_RETURN_IF_ERROR(getAxes(Wrap, "dim",
                                   Ctx + ".sharding[" + std::to_string(D) + "]",
                                   L.Sharding[D]));
    }
  }
  if (J.contains("blocks")) {
    Present = true;
    WEFT_RETURN_IF_ERROR(getIntList(J, "blocks", Ctx, L.Blocks));
  }
  if (L.Sharding.size() != L.Global.size() && !J.contains("sharding"))
    L.Sharding.assign(L.Global.size(), {});
  if (L.Blocks.size() != L.Global.size() && !J.contains("blocks"))
    L.Blocks.assign(L.Global.size(), 1);
  return Status::success();
}

} // namespace

Status checkMesh(const Mesh &M) {
  if (M.Axes.size() != M.Dims.size())
    return Status::error("mesh has " + std::to_string(M.Axes.size()) +
                         " axes but " + std::to_string(M.Dims.size()) +
                         " sizes");
  int64_t Ranks = 1;
  for (size_t I = 0; I < M.Axes.size(); ++I) {
    if (M.Dims[I] < 1 || M.Dims[I] > (1 << 20))
      return Status::error("mesh axis '" + M.Axes[I] + "' has size " +
                           std::to_string(M.Dims[I]) + " (expected 1 to 2^20)");
    if (M.Axes[I].empty() || M.axisIndex(M.Axes[I]) != int(I))
      return Status::error("mesh axis name '" + M.Axes[I] +
                           "' is empty or repeated");
    // Checked per axis, so that the product cannot overflow.
    Ranks *= M.Dims[I];
    if (Ranks > (1 << 20))
      return Status::error("mesh " + M.describe() +
                           " has more than 2^20 ranks");
  }
  return Status::success();
}

namespace {

Status parseMesh(const json &Root, Mesh &M) {
  if (!Root.contains("mesh") || Root["mesh"].is_null())
    return Status::success();
  const json &J = Root["mesh"];
  WEFT_RETURN_IF_ERROR(getAxes(J, "axes", "mesh", M.Axes));
  WEFT_RETURN_IF_ERROR(getIntList(J, "shape", "mesh", M.Dims));
  WEFT_RETURN_IF_ERROR(checkMesh(M));
  if (J.contains("pipeline")) {
    WEFT_RETURN_IF_ERROR(getString(J, "pipeline", "mesh", M.Pipeline));
    if (M.axisIndex(M.Pipeline) < 0)
      return Status::error("mesh.pipeline names axis '" + M.Pipeline +
                           "', not an axis of the mesh " + M.describe());
  }
  // The communicator groups, each a list of the mesh's axes (each once),
  // none twice: every rank creates them in this order at load.
  const json *Groups;
  WEFT_RETURN_IF_ERROR(need(J, "groups", "mesh", Groups));
  if (!Groups->is_array())
    return Status::error("field 'groups' in mesh must be an array of axis "
                         "lists, got " +
                         Groups->dump());
  for (size_t G = 0; G < Groups->size(); ++G) {
    const std::string Ctx = "mesh.groups[" + std::to_string(G) + "]";
    json Wrapped = {{"axes", (*Groups)[G]}};
    AxesList A;
    WEFT_RETURN_IF_ERROR(getAxes(Wrapped, "axes", Ctx, A));
    if (A.empty())
      return Status::error(Ctx + " is empty (a group of one rank needs no "
                                 "communicator)");
    for (size_t K = 0; K < A.size(); ++K) {
      if (M.axisIndex(A[K]) < 0)
        return Status::error(Ctx + " names axis '" + A[K] +
                             "', not an axis of the mesh " + M.describe());
      for (size_t L = 0; L < K; ++L)
        if (A[L] == A[K])
          return Status::error(Ctx + " repeats axis '" + A[K] + "'");
    }
    for (size_t H = 0; H < M.Groups.size(); ++H)
      if (M.Groups[H] == A)
        return Status::error(Ctx + " repeats mesh.groups[" + std::to_string(H) +
                             "]");
    M.Groups.push_back(std::move(A));
  }
  return Status::success();
}

Status parseOutput(const json &J, size_t I, OutputSpec &O) {
  std::string Ctx = "outputs[" + std::to_string(I) + "]";
  WEFT_RETURN_IF_ERROR(getString(J, "name", Ctx, O.Name));
  // Version 7 names logits or hidden (checked with the version below).
  if (O.Name.empty())
    return Status::error(Ctx + " has an empty name");
  return getInt(J, "buffer", Ctx, O.Buffer);
}

Status parseParam(const json &J, size_t I, ParamSpec &P) {
  std::string Ctx = "params[" + std::to_string(I) + "]";
  WEFT_RETURN_IF_ERROR(getString(J, "name", Ctx, P.Name));
  WEFT_RETURN_IF_ERROR(getShape(J, Ctx, P.Dims));
  WEFT_RETURN_IF_ERROR(getBool(J, "weight_decay", Ctx, P.WeightDecay));
  bool Present;
  WEFT_RETURN_IF_ERROR(parseLayout(J, Ctx, P.Dims, P.Place, Present));
  if (J.contains("logical_rows")) {
    WEFT_RETURN_IF_ERROR(getInt(J, "logical_rows", Ctx, P.LogicalRows));
    const Shape &G = P.Place.Global;
    if (G.empty() || P.LogicalRows < 1 || P.LogicalRows > G[0])
      return Status::error(
          Ctx + ".logical_rows=" + std::to_string(P.LogicalRows) +
          " is not in [1, " + std::to_string(G.empty() ? 0 : G[0]) +
          "] (the rows the program stores, " + shapeString(G) + ")");
  }
  const json *Init;
  WEFT_RETURN_IF_ERROR(need(J, "init", Ctx, Init));
  std::string Kind;
  WEFT_RETURN_IF_ERROR(getString(*Init, "kind", Ctx + ".init", Kind));
  if (Kind == "normal") {
    P.Init.K = InitSpec::Normal;
    WEFT_RETURN_IF_ERROR(getNumber(*Init, "std", Ctx + ".init", P.Init.Std));
  } else if (Kind == "zeros") {
    P.Init.K = InitSpec::Zeros;
  } else if (Kind == "ones") {
    P.Init.K = InitSpec::Ones;
  } else if (Kind == "loaded") {
    P.Init.K = InitSpec::Loaded;
  } else {
    return Status::error("unknown init kind '" + Kind + "' in " + Ctx +
                         " (expected normal, zeros, ones or loaded)");
  }
  return Status::success();
}

// A constant's `data`: base64 of exactly its bytes, of the program's float
// types (its dtype against the program's is Validate.cpp's check), whole
// on every rank (no layout).
Status parseConstantData(const json &J, const std::string &Ctx, BufferSpec &B) {
  if (B.Type != DType::F32 && B.Type != DType::F64)
    return Status::error(Ctx + ": a constant is f32 or f64, got " +
                         dtypeName(B.Type));
  if (B.HasLayout)
    return Status::error(Ctx + ": a constant is whole on every rank (no "
                               "global_shape, sharding or blocks)");
  std::string Text;
  WEFT_RETURN_IF_ERROR(getString(J, "data", Ctx, Text));
  std::optional<std::vector<char>> Bytes = base64Decode(Text);
  if (!Bytes)
    return Status::error("field 'data' in " + Ctx + " is not base64");
  if (int64_t(Bytes->size()) != B.bytes())
    return Status::error("field 'data' in " + Ctx + " holds " +
                         std::to_string(Bytes->size()) + " bytes, shape " +
                         shapeString(B.Dims) + " of " + dtypeName(B.Type) +
                         " needs " + std::to_string(B.bytes()));
  B.Data = std::move(*Bytes);
  return Status::success();
}

Status parseBuffer(const json &J, size_t I, BufferSpec &B) {
  std::string Ctx = "buffers[" + std::to_string(I) + "]";
  std::string Kind, Type;
  WEFT_RETURN_IF_ERROR(getString(J, "kind", Ctx, Kind));
  WEFT_RETURN_IF_ERROR(getShape(J, Ctx, B.Dims));
  WEFT_RETURN_IF_ERROR(getString(J, "dtype", Ctx, Type));
  WEFT_RETURN_IF_ERROR(parseDType(Type, Ctx, B.Type));
  WEFT_RETURN_IF_ERROR(parseLayout(J, Ctx, B.Dims, B.Place, B.HasLayout));
  if (J.contains("stage")) {
    WEFT_RETURN_IF_ERROR(getInt(J, "stage", Ctx, B.StageIndex));
    if (B.StageIndex < 0)
      return Status::error(Ctx + ": stage " + std::to_string(B.StageIndex) +
                           " is negative");
  }
  if (Kind == "input") {
    B.Kind = BufferKind::Input;
    WEFT_RETURN_IF_ERROR(getString(J, "name", Ctx, B.Name));
  } else if (Kind == "arena") {
    B.Kind = BufferKind::Arena;
    WEFT_RETURN_IF_ERROR(getInt(J, "offset", Ctx, B.Offset));
  } else if (Kind == "constant") {
    B.Kind = BufferKind::Constant;
    WEFT_RETURN_IF_ERROR(parseConstantData(J, Ctx, B));
  } else {
    if (Kind == "param")
      B.Kind = BufferKind::Param;
    else if (Kind == "grad")
      B.Kind = BufferKind::Grad;
    else if (Kind == "adam_m")
      B.Kind = BufferKind::AdamM;
    else if (Kind == "adam_v")
      B.Kind = BufferKind::AdamV;
    else
      return Status::error(
          "unknown buffer kind '" + Kind + "' in " + Ctx +
          " (expected input, param, grad, adam_m, adam_v, arena or "
          "constant)");
    WEFT_RETURN_IF_ERROR(getInt(J, "param", Ctx, B.Param));
  }
  if (J.contains("partial")) {
    if (B.Kind != BufferKind::Grad)
      return Status::error("field 'partial' in " + Ctx + " (" + Kind +
                           ") is only allowed on grad buffers");
    WEFT_RETURN_IF_ERROR(getAxes(J, "partial", Ctx, B.Partial));
    if (B.Partial.empty())
      return Status::error("field 'partial' in " + Ctx +
                           " names no axes (omit it instead)");
  }
  return Status::success();
}

// A cross-entropy's `classes` (version 15): absent, or at least 1.
Status getClasses(const json &Attrs, const std::string &Ctx, int64_t &Out) {
  if (!Attrs.contains("classes"))
    return Status::success();
  WEFT_RETURN_IF_ERROR(getInt(Attrs, "classes", Ctx, Out));
  if (Out < 1)
    return Status::error("field 'classes' in " + Ctx + " must be >= 1, got " +
                         std::to_string(Out));
  return Status::success();
}

Status parseAttrs(const json &J, const std::string &Ctx, OpKind Op,
                  OpAttrs &A) {
  const json *Attrs;
  WEFT_RETURN_IF_ERROR(need(J, "attrs", Ctx, Attrs));
  if (!Attrs->is_object())
    return Status::error("field 'attrs' in " + Ctx + " must be an object");
  std::string ACtx = Ctx + ".attrs";
  auto optBool = [&](const char *Key, bool &Out) -> Status {
    if (!Attrs->contains(Key))
      return Status::success();
    return getBool(*Attrs, Key, ACtx, Out);
  };
  WEFT_RETURN_IF_ERROR(optBool("transpose_a", A.TransposeA));
  WEFT_RETURN_IF_ERROR(optBool("transpose_b", A.TransposeB));
  WEFT_RETURN_IF_ERROR(optBool("inverse", A.Inverse));
  WEFT_RETURN_IF_ERROR(optBool("weight_decay", A.WeightDecay));
  WEFT_RETURN_IF_ERROR(optBool("masked", A.Masked));
  if (Attrs->contains("async"))
    return Status::error(ACtx + ": 'async' is not an attribute since format "
                                "version 3: an asynchronous collective is "
                                "all_reduce_start or all_gather_start, "
                                "completed by a wait");
  if (Attrs->contains("shard_axes"))
    WEFT_RETURN_IF_ERROR(getAxes(*Attrs, "shard_axes", ACtx, A.ShardAxes));
  // dropout, attention, rope and position_embedding(_grad) (version 12).
  WEFT_RETURN_IF_ERROR(getDimAxes(*Attrs, ACtx, A.DimAxes));
  // A block of the sequence: position_embedding(_grad), and rope and
  // attention(_grad) under context parallelism (version 14).
  const bool SeqBlock = Op == OpKind::PositionEmbedding ||
                        Op == OpKind::PositionEmbeddingGrad ||
                        Op == OpKind::Rope || Op == OpKind::Attention ||
                        Op == OpKind::AttentionGrad;
  if (SeqBlock && Attrs->contains("seq_axes"))
    WEFT_RETURN_IF_ERROR(getAxes(*Attrs, "seq_axes", ACtx, A.SeqAxes));
  switch (Op) {
  case OpKind::AllReduce:
  case OpKind::RingShift:
    return getAxes(*Attrs, "axes", ACtx, A.Axes);
  case OpKind::SoftmaxMerge:
    return getInt(*Attrs, "num_heads", ACtx, A.NumHeads);
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
  case OpKind::AllToAll:
  case OpKind::Slice:
  case OpKind::BlockTranspose:
    WEFT_RETURN_IF_ERROR(getAxes(*Attrs, "axes", ACtx, A.Axes));
    return getInt(*Attrs, "dim", ACtx, A.Dim);
  case OpKind::CrossEntropy:
  case OpKind::CrossEntropyGrad:
    WEFT_RETURN_IF_ERROR(getClasses(*Attrs, ACtx, A.Classes));
    [[fallthrough]];
  case OpKind::MseLoss:
  case OpKind::MseLossGrad:
    if (Attrs->contains("denominator"))
      return getInt(*Attrs, "denominator", ACtx, A.Denominator);
    return Status::success();
  case OpKind::Embedding:
  case OpKind::EmbeddingGrad:
    if (Attrs->contains("vocab_axes"))
      return getAxes(*Attrs, "vocab_axes", ACtx, A.VocabAxes);
    return Status::success();
  case OpKind::CrossEntropyStats:
    WEFT_RETURN_IF_ERROR(getClasses(*Attrs, ACtx, A.Classes));
    return getAxes(*Attrs, "vocab_axes", ACtx, A.VocabAxes);
  case OpKind::CrossEntropyFromStats:
    return getInt(*Attrs, "denominator", ACtx, A.Denominator);
  case OpKind::CrossEntropyStatsGrad:
    WEFT_RETURN_IF_ERROR(getClasses(*Attrs, ACtx, A.Classes));
    WEFT_RETURN_IF_ERROR(getAxes(*Attrs, "vocab_axes", ACtx, A.VocabAxes));
    return getInt(*Attrs, "denominator", ACtx, A.Denominator);
  case OpKind::PositionEmbedding:
  case OpKind::PositionEmbeddingGrad:
    return optBool("token_types", A.TokenTypes);
  case OpKind::LayerNorm:
  case OpKind::LayerNormGrad:
  case OpKind::RmsNorm:
  case OpKind::RmsNormGrad:
    return getNumber(*Attrs, "eps", ACtx, A.Eps);
  case OpKind::Act:
  case OpKind::ActGrad: {
    std::string Kind;
    WEFT_RETURN_IF_ERROR(getString(*Attrs, "kind", ACtx, Kind));
    if (!parseActivation(Kind, A.Act))
      return Status::error("unknown activation '" + Kind + "' in " + ACtx +
                           " (expected one of " + activationList() + ")");
    return Status::success();
  }
  case OpKind::Rope:
    WEFT_RETURN_IF_ERROR(getNumber(*Attrs, "theta", ACtx, A.Theta));
    if (Attrs->contains("scale"))
      WEFT_RETURN_IF_ERROR(getNumber(*Attrs, "scale", ACtx, A.Scale));
    if (Attrs->contains("inv_freq")) {
      const json &F = (*Attrs)["inv_freq"];
      if (!F.is_array())
        return Status::error("field 'inv_freq' in " + ACtx +
                             " must be an array of numbers");
      for (const json &V : F) {
        if (!V.is_number())
          return Status::error("field 'inv_freq' in " + ACtx +
                               " must be an array of numbers, got " + V.dump());
        A.InvFreq.push_back(V.get<double>());
      }
    }
    return getInt(*Attrs, "num_heads", ACtx, A.NumHeads);
  case OpKind::AttentionBlock:
  case OpKind::AttentionBlockGrad:
    WEFT_RETURN_IF_ERROR(getAxes(*Attrs, "seq_axes", ACtx, A.SeqAxes));
    WEFT_RETURN_IF_ERROR(getInt(*Attrs, "ring_step", ACtx, A.RingStep));
    [[fallthrough]];
  case OpKind::Attention:
  case OpKind::AttentionGrad:
    if (Attrs->contains("scale")) {
      WEFT_RETURN_IF_ERROR(getNumber(*Attrs, "scale", ACtx, A.AttnScale));
      if (!std::isfinite(A.AttnScale) || !(A.AttnScale > 0))
        return Status::error("field 'scale' in " + ACtx +
                             " must be finite and positive");
    }
    WEFT_RETURN_IF_ERROR(optBool("bidirectional", A.Bidirectional));
    WEFT_RETURN_IF_ERROR(optBool("key_padding", A.KeyPadding));
    if (Attrs->contains("window")) {
      WEFT_RETURN_IF_ERROR(getInt(*Attrs, "window", ACtx, A.Window));
      if (A.Window < 1 || A.Bidirectional)
        return Status::error("field 'window' in " + ACtx + " is " +
                             std::to_string(A.Window) +
                             ": a sliding window is >= 1, on causal "
                             "attention only");
    }
    if (Attrs->contains("dropout")) {
      WEFT_RETURN_IF_ERROR(getDropP(*Attrs, "dropout", ACtx, A.DropP));
      WEFT_RETURN_IF_ERROR(getInt(*Attrs, "dropout_site", ACtx, A.DropSite));
    }
    WEFT_RETURN_IF_ERROR(getInt(*Attrs, "num_heads", ACtx, A.NumHeads));
    return getInt(*Attrs, "num_kv_heads", ACtx, A.NumKvHeads);
  case OpKind::Dropout:
    WEFT_RETURN_IF_ERROR(getDropP(*Attrs, "p", ACtx, A.DropP));
    return getInt(*Attrs, "site", ACtx, A.DropSite);
  case OpKind::Split:
    return getIntList(*Attrs, "sizes", ACtx, A.Sizes);
  case OpKind::AddRow:
    return getInt(*Attrs, "row", ACtx, A.Row);
  case OpKind::RowGrad:
    WEFT_RETURN_IF_ERROR(getInt(*Attrs, "row", ACtx, A.Row));
    return getInt(*Attrs, "rows", ACtx, A.Rows);
  case OpKind::Pack:
  case OpKind::Unpack:
    if (Attrs->contains("blocks"))
      return getInt(*Attrs, "blocks", ACtx, A.Blocks);
    return Status::success();
  case OpKind::Fill:
    return getNumber(*Attrs, "value", ACtx, A.Value);
  case OpKind::Pointwise:
  case OpKind::PointwiseGrad: {
    std::string Fn;
    WEFT_RETURN_IF_ERROR(getString(*Attrs, "fn", ACtx, Fn));
    if (!parsePointwiseFn(Fn, A.Pointwise))
      return Status::error("unknown fn '" + Fn + "' in " + ACtx +
                           " (expected one of " + pointwiseList() + ")");
    if (!takesScalar(A.Pointwise)) {
      if (Attrs->contains("scalar"))
        return Status::error("fn '" + Fn + "' in " + ACtx +
                             " takes no 'scalar'");
      return Status::success();
    }
    WEFT_RETURN_IF_ERROR(getNumber(*Attrs, "scalar", ACtx, A.Scalar));
    if (!std::isfinite(A.Scalar))
      return Status::error("field 'scalar' in " + ACtx + " must be finite");
    return Status::success();
  }
  case OpKind::Binary:
  case OpKind::BinaryGrad: {
    std::string Fn;
    WEFT_RETURN_IF_ERROR(getString(*Attrs, "fn", ACtx, Fn));
    if (!parseBinaryFn(Fn, A.Binary))
      return Status::error("unknown fn '" + Fn + "' in " + ACtx +
                           " (expected " + binaryList() + ")");
    if (Op == OpKind::Binary)
      return Status::success();
    [[fallthrough]];
  }
  case OpKind::SelectGrad:
    WEFT_RETURN_IF_ERROR(getInt(*Attrs, "operand", ACtx, A.Operand));
    if (A.Operand != 0 && A.Operand != 1)
      return Status::error("field 'operand' in " + ACtx + " is " +
                           std::to_string(A.Operand) + ", expected 0 or 1");
    return Status::success();
  case OpKind::Transpose:
    return getIntList(*Attrs, "perm", ACtx, A.Perm);
  default:
    return Status::success();
  }
}

Status parseInstruction(const json &J, size_t I, Instruction &Inst) {
  std::string Ctx = "instructions[" + std::to_string(I) + "]";
  std::string Op;
  WEFT_RETURN_IF_ERROR(getString(J, "op", Ctx, Op));
  // The asynchronous forms: the blocking op, started only.
  const std::string Start = "_start";
  if (Op.size() > Start.size() &&
      Op.compare(Op.size() - Start.size(), Start.size(), Start) == 0) {
    Op.resize(Op.size() - Start.size());
    Inst.Attrs.Async = true;
    if (Op != "all_reduce" && Op != "all_gather" && Op != "reduce_scatter" &&
        Op != "ring_shift")
      return Status::error("unknown op '" + Op + Start + "' in " + Ctx +
                           " (only all_reduce, all_gather, reduce_scatter and "
                           "ring_shift start asynchronously)");
  }
  if (!parseOpName(Op, Inst.Op))
    return Status::error("unknown op '" + Op + "' in " + Ctx);
  WEFT_RETURN_IF_ERROR(getIntList(J, "in", Ctx, Inst.In));
  WEFT_RETURN_IF_ERROR(getIntList(J, "out", Ctx, Inst.Out));
  return parseAttrs(J, Ctx, Inst.Op, Inst.Attrs);
}

template <typename T, typename Fn>
Status parseArray(const json &Root, const char *Key, std::vector<T> &Out,
                  Fn Parse) {
  const json *Arr;
  WEFT_RETURN_IF_ERROR(need(Root, Key, "program", Arr));
  if (!Arr->is_array())
    return Status::error("field '" + std::string(Key) +
                         "' in program must be an array");
  Out.resize(Arr->size());
  for (size_t I = 0; I < Arr->size(); ++I)
    WEFT_RETURN_IF_ERROR(Parse((*Arr)[I], I, Out[I]));
  return Status::success();
}

/// What a fragment's name says: forward and backward ("forward.2": of
/// chunk 2) run per micro-batch. checkSchedule checks the names.
void parseFragmentName(Fragment &Fr) {
  if (Fr.Name == FragmentWeight) {
    Fr.PerMicrobatch = Fr.Backward = Fr.Weight = true;
    return;
  }
  for (bool Backward : {false, true}) {
    const std::string Base = Backward ? FragmentBackward : FragmentForward;
    if (Fr.Name.compare(0, Base.size(), Base) != 0)
      continue;
    const std::string Suffix = Fr.Name.substr(Base.size());
    if (!Suffix.empty() &&
        (Suffix[0] != '.' || Suffix.size() < 2 || Suffix.size() > 5 ||
         !std::all_of(Suffix.begin() + 1, Suffix.end(), ::isdigit)))
      continue;
    Fr.PerMicrobatch = true;
    Fr.Backward = Backward;
    Fr.Chunk = Suffix.empty() ? 0 : std::stoll(Suffix.substr(1));
  }
}

/// A stage's fragments, appended to the instruction table in order, and its
/// schedule; ForwardEnd and OptimizerBegin are read off the fragments.
Status parseStage(const json &J, size_t SI, Program &P) {
  const std::string Ctx = "stages[" + std::to_string(SI) + "]";
  Stage S;
  const json *Frags, *Sched;
  WEFT_RETURN_IF_ERROR(need(J, "fragments", Ctx, Frags));
  WEFT_RETURN_IF_ERROR(need(J, "schedule", Ctx, Sched));
  if (!Frags->is_array() || !Sched->is_array())
    return Status::error(Ctx + ": 'fragments' and 'schedule' must be arrays");
  for (size_t F = 0; F < Frags->size(); ++F) {
    const std::string FCtx = Ctx + ".fragments[" + std::to_string(F) + "]";
    Fragment Fr;
    WEFT_RETURN_IF_ERROR(getString((*Frags)[F], "name", FCtx, Fr.Name));
    if (S.find(Fr.Name) >= 0)
      return Status::error(FCtx + " repeats the name '" + Fr.Name + "'");
    parseFragmentName(Fr);
    S.Chunks = std::max(S.Chunks, Fr.Chunk + 1);
    const json *Insts;
    WEFT_RETURN_IF_ERROR(need((*Frags)[F], "instructions", FCtx, Insts));
    if (!Insts->is_array())
      return Status::error("field 'instructions' in " + FCtx +
                           " must be an array");
    Fr.Begin = int64_t(P.Instructions.size());
    for (const json &I : *Insts) {
      P.Instructions.emplace_back();
      // Messages number instructions in the whole table, as --dump does.
      WEFT_RETURN_IF_ERROR(parseInstruction(I, P.Instructions.size() - 1,
                                            P.Instructions.back()));
    }
    Fr.End = int64_t(P.Instructions.size());
    // A whole program's marks are its first stage's (stageView rebases
    // every stage's).
    if (Fr.Name == FragmentOptimizer && SI == 0)
      P.OptimizerBegin = Fr.Begin;
    S.Fragments.push_back(std::move(Fr));
  }
  if (SI == 0 && S.lastForward() >= 0)
    P.ForwardEnd = S.Fragments[size_t(S.lastForward())].End;
  if (J.contains("arena_bytes")) {
    WEFT_RETURN_IF_ERROR(getInt(J, "arena_bytes", Ctx, S.ArenaBytes));
    if (S.ArenaBytes < 0 || S.ArenaBytes > (int64_t(1) << 60))
      return Status::error(Ctx +
                           ": arena_bytes=" + std::to_string(S.ArenaBytes) +
                           " (expected 0 to 2^60)");
  }
  if (J.contains("slot_bytes")) {
    WEFT_RETURN_IF_ERROR(getInt(J, "slot_bytes", Ctx, S.SlotBytes));
    if (S.SlotBytes < 0 || S.SlotBytes > (int64_t(1) << 60) ||
        S.SlotBytes % 64 != 0)
      return Status::error(Ctx + ": slot_bytes=" + std::to_string(S.SlotBytes) +
                           " (expected a multiple of 64 from 0 to 2^60)");
  }
  if (J.contains("slots")) {
    WEFT_RETURN_IF_ERROR(getInt(J, "slots", Ctx, S.Slots));
    if (S.Slots < 1 || S.Slots > (int64_t(1) << 20))
      return Status::error(Ctx + ": slots=" + std::to_string(S.Slots) +
                           " (expected 1 to 2^20)");
  }
  for (size_t A = 0; A < Sched->size(); ++A) {
    const std::string ACtx = Ctx + ".schedule[" + std::to_string(A) + "]";
    const json &J = (*Sched)[A];
    Action Act;
    if (J.is_object() && (J.contains("send") || J.contains("recv"))) {
      const bool Send = J.contains("send");
      Act.K = Send ? Action::Send : Action::Recv;
      WEFT_RETURN_IF_ERROR(getInt(J, Send ? "send" : "recv", ACtx, Act.Buffer));
      WEFT_RETURN_IF_ERROR(getInt(J, Send ? "to" : "from", ACtx, Act.Peer));
    } else {
      std::string Name;
      WEFT_RETURN_IF_ERROR(getString(J, "run", ACtx, Name));
      Act.Frag = S.find(Name);
      if (Act.Frag < 0)
        return Status::error(ACtx + " runs '" + Name +
                             "', which is no fragment of " + Ctx);
    }
    if (J.contains("microbatch")) {
      WEFT_RETURN_IF_ERROR(getInt(J, "microbatch", ACtx, Act.Microbatch));
      if (Act.Microbatch < 0)
        return Status::error(ACtx + ": microbatch " +
                             std::to_string(Act.Microbatch) + " is negative");
    }
    S.Schedule.push_back(Act);
  }
  P.Stages.push_back(std::move(S));
  return Status::success();
}

Status parseStages(const json &Root, Program &P) {
  const json *Stages;
  WEFT_RETURN_IF_ERROR(need(Root, "stages", "program", Stages));
  if (!Stages->is_array())
    return Status::error("field 'stages' in program must be an array");
  for (size_t S = 0; S < Stages->size(); ++S)
    WEFT_RETURN_IF_ERROR(parseStage((*Stages)[S], S, P));
  P.NumStages = int64_t(P.Stages.size());
  return Status::success();
}

} // namespace

const char *opName(OpKind K) { return OpNames[static_cast<int>(K)]; }

bool isCollective(OpKind K) {
  return K == OpKind::AllReduce || K == OpKind::AllGather ||
         K == OpKind::ReduceScatter || K == OpKind::AllToAll ||
         K == OpKind::RingShift || K == OpKind::Slice || K == OpKind::Wait;
}

std::string instructionName(const Instruction &I) {
  return std::string(opName(I.Op)) + (I.Attrs.Async ? "_start" : "");
}

const char *groupAttrName(OpKind K) {
  switch (K) {
  case OpKind::AllReduce:
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
  case OpKind::AllToAll:
  case OpKind::RingShift:
  case OpKind::Slice:
    return "axes";
  case OpKind::AdamW:
    return "shard_axes";
  default:
    return nullptr;
  }
}

bool parseOpName(const std::string &Name, OpKind &K) {
  for (int I = 0; I < NumOpKinds; ++I)
    if (Name == OpNames[I]) {
      K = static_cast<OpKind>(I);
      return true;
    }
  return false;
}

const char *dtypeName(DType T) {
  switch (T) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  case DType::BF16:
    return "bf16";
  }
  return "?";
}

size_t dtypeBytes(DType T) {
  return T == DType::F64 ? 8 : T == DType::BF16 ? 2 : 4;
}

const char *bufferKindName(BufferKind K) {
  switch (K) {
  case BufferKind::Input:
    return "input";
  case BufferKind::Param:
    return "param";
  case BufferKind::Grad:
    return "grad";
  case BufferKind::AdamM:
    return "adam_m";
  case BufferKind::AdamV:
    return "adam_v";
  case BufferKind::Arena:
    return "arena";
  case BufferKind::Constant:
    return "constant";
  }
  return "?";
}

int64_t numElements(const Shape &S) {
  int64_t N = 1;
  for (int64_t D : S)
    if (__builtin_mul_overflow(N, D, &N))
      return -1;
  return N;
}

Status checkShapeSize(const Shape &S, const std::string &What, bool AllowZero) {
  const int64_t Min = AllowZero ? 0 : 1;
  int64_t Numel = 1;
  for (int64_t D : S) {
    if (D < Min || D > MaxNumElements)
      return Status::error("shape " + shapeString(S) + " of " + What +
                           " has an invalid dimension " + std::to_string(D) +
                           " (expected " + std::to_string(Min) + " to 2^48)");
    // Saturating, and sticky like numElements' overflow: a zero after a
    // product past 2^48 does not make the shape acceptable.
    if (Numel <= MaxNumElements)
      Numel = D && Numel > MaxNumElements / D ? MaxNumElements + 1 : Numel * D;
  }
  if (Numel > MaxNumElements)
    return Status::error("shape " + shapeString(S) + " of " + What +
                         " has more than 2^48 elements");
  return Status::success();
}

std::string shapeString(const Shape &S) {
  return shapeString(S.data(), S.size(), /*Spaced=*/false);
}

std::string shapeString(const int64_t *Dims, size_t Count, bool Spaced) {
  std::string R = "[";
  for (size_t I = 0; I < Count; ++I)
    R += (I ? (Spaced ? ", " : ",") : "") + std::to_string(Dims[I]);
  return R + "]";
}

Shape logicalShape(const ParamSpec &P, const Shape &Global) {
  const Shape &Stored = P.Place.Global;
  if (P.LogicalRows <= 0 || Stored.empty() || Global.empty() ||
      P.LogicalRows >= Stored[0])
    return Global;
  int64_t RowElems = numElements(Stored) / Stored[0];
  if (Global.size() == 1 && Stored.size() != 1) // flattened state
    return {P.LogicalRows * RowElems};
  Shape Out = Global;
  Out[0] = P.LogicalRows;
  return Out;
}

Shape unsplitInputShape(const Program &P, const BufferSpec &B) {
  const int64_t Rows = P.microbatchRows();
  if (B.Type != DType::I32 && !B.Dims.empty()) {
    Shape S = B.Dims;
    S[0] = Rows;
    return S;
  }
  return B.Dims.size() == 1 ? Shape{Rows} : Shape{Rows, P.Seq};
}

/// Buffers without their own layout: params and same-shaped grad/adam
/// buffers take the param's; inputs are blocks of [batch/microbatches, seq].
void resolveLayouts(Program &P) {
  for (ParamSpec &Par : P.Params)
    if (Par.Place.Global.empty() && Par.Place.Sharding.empty())
      Par.Place = Layout::replicated(Par.Dims);
  for (BufferSpec &B : P.Buffers) {
    // A tensor input is whole (checkLayouts refuses one that states more).
    if (B.tensorInput()) {
      if (!B.HasLayout)
        B.Place = Layout::replicated(B.Dims);
      continue;
    }
    if (B.Kind == BufferKind::Input) {
      // Without global_shape: `batch`/`seq` are the global sizes when the
      // local shape is their block, the local sizes when it equals them.
      // Labels of one per sample (version 11) are [batch] alone, float
      // targets [batch, ...].
      Shape Local = unsplitInputShape(P, B);
      const size_t Rank = Local.size();
      // Sharding and blocks the file states stay as written (checkLayouts
      // refuses another rank, and blocks).
      Layout L = B.Place;
      if (L.Sharding.empty())
        L.Sharding.assign(Rank, {});
      if (L.Blocks.empty())
        L.Blocks.assign(Rank, 1);
      // An input holds one micro-batch (checkSchedule refuses a batch that
      // the micro-batch count does not divide).
      if (!B.HasLayout || L.Global == B.Dims) {
        L.Global = Local;
        // A sharding of another rank stays for checkLayouts to refuse.
        if (B.Dims == Local && L.Sharding.size() == Rank)
          for (size_t D = 0; D < Rank; ++D)
            L.Global[D] *= P.Devices.count(L.Sharding[D]);
      }
      B.Place = L;
      continue;
    }
    if (B.Kind == BufferKind::Arena || B.Param < 0 ||
        B.Param >= int64_t(P.Params.size()))
      continue;
    const ParamSpec &Par = P.Params[size_t(B.Param)];
    // A param buffer that states a layout keeps it: checkLayouts requires it
    // to be its param's (it was overwritten silently, blocks of 2^63-1
    // included).
    if (!B.HasLayout && (B.Kind == BufferKind::Param || B.Dims == Par.Dims))
      B.Place = Par.Place;
  }
}

Expected<Program> parseProgramJson(const std::string &Text, uint32_t Version) {
  std::string Deep = jsonDepthError(Text, "the JSON payload");
  if (!Deep.empty())
    return Status::error(Deep);
  json Root = json::parse(Text, nullptr, /*allow_exceptions=*/false);
  if (Root.is_discarded())
    return Status::error("malformed JSON payload");
  if (!Root.is_object())
    return Status::error("malformed JSON payload: top level is not an object");
  Program P;
  P.Version = Version;
  std::string Type;
  WEFT_RETURN_IF_ERROR(getString(Root, "model", "program", P.Model));
  WEFT_RETURN_IF_ERROR(getString(Root, "dtype", "program", Type));
  WEFT_RETURN_IF_ERROR(parseDType(Type, "program", P.Type));
  if (P.Type == DType::I32 || P.Type == DType::BF16)
    return Status::error(std::string("program dtype must be f32 or f64 (that "
                                     "of parameters and optimizer state), "
                                     "got ") +
                         dtypeName(P.Type));
  WEFT_RETURN_IF_ERROR(getInt(Root, "batch", "program", P.Batch));
  WEFT_RETURN_IF_ERROR(getInt(Root, "seq", "program", P.Seq));
  WEFT_RETURN_IF_ERROR(getInt(Root, "vocab", "program", P.Vocab));
  // Version 11: the targets' bound when they are not token ids.
  if (Root.contains("classes")) {
    if (Version < 11)
      return Status::error("field 'classes' (targets that are not token "
                           "ids) needs format version 11, the file is "
                           "version " +
                           std::to_string(Version));
    WEFT_RETURN_IF_ERROR(getInt(Root, "classes", "program", P.Classes));
    if (P.Classes < 1 || P.Classes > INT32_MAX)
      return Status::error("classes=" + std::to_string(P.Classes) +
                           " is not 1 to 2^31-1 (targets are int32)");
  }
  // Version 7: a forward-only program names its outputs.
  if (Root.contains("outputs")) {
    if (Version < 7)
      return Status::error("field 'outputs' (a forward-only program) needs "
                           "format version 7, the file is version " +
                           std::to_string(Version));
    WEFT_RETURN_IF_ERROR(parseArray(Root, "outputs", P.Outputs, parseOutput));
    if (P.Outputs.empty())
      return Status::error("field 'outputs' is empty (a forward-only program "
                           "computes at least one)");
    for (size_t I = 0; I < P.Outputs.size(); ++I) {
      const std::string &N = P.Outputs[I].Name;
      if (Version < 8 && N != "logits" && N != "hidden")
        return Status::error("outputs[" + std::to_string(I) + "] has name '" +
                             N +
                             "', expected logits or hidden (other names "
                             "need format version 8)");
    }
    WEFT_RETURN_IF_ERROR(
        checkUniqueNames(P.Outputs.size(), "outputs", "",
                         [&](size_t I) { return &P.Outputs[I].Name; }));
  }
  WEFT_RETURN_IF_ERROR(parseOptimizer(Root, P.forwardOnly(), P.Optimizer));
  WEFT_RETURN_IF_ERROR(parseMesh(Root, P.Devices));
  WEFT_RETURN_IF_ERROR(parseArray(Root, "params", P.Params, parseParam));
  WEFT_RETURN_IF_ERROR(getInt(Root, "arena_bytes", "program", P.ArenaBytes));
  WEFT_RETURN_IF_ERROR(parseArray(Root, "buffers", P.Buffers, parseBuffer));
  for (size_t I = 0; I < P.Buffers.size() && Version < 10; ++I)
    if (P.Buffers[I].Kind == BufferKind::Constant)
      return Status::error("buffers[" + std::to_string(I) +
                           "] is a constant, which needs format version 10, "
                           "the file is version " +
                           std::to_string(Version));
  WEFT_RETURN_IF_ERROR(getInt(Root, "microbatches", "program", P.Microbatches));
  WEFT_RETURN_IF_ERROR(parseStages(Root, P));
  WEFT_RETURN_IF_ERROR(getInt(Root, "loss", "program", P.Loss));
  WEFT_RETURN_IF_ERROR(parseMaskedLm(Root, P));
  WEFT_RETURN_IF_ERROR(parseDocuments(Root, P));
  WEFT_RETURN_IF_ERROR(parseSeqChunks(Root, P));
  for (const Instruction &I : P.Instructions) {
    P.ReadsKeyPadding |= I.Attrs.KeyPadding;
    if (!I.Attrs.TokenTypes || I.In.empty() || I.Out.empty())
      continue;
    // The table: position_embedding's input 1, its gradient's output.
    const int64_t T = I.Op == OpKind::PositionEmbedding && I.In.size() > 1
                          ? I.In[1]
                          : I.Out[0];
    if (T < 0 || T >= int64_t(P.Buffers.size()) ||
        P.Buffers[size_t(T)].Dims.empty())
      continue; // validateProgram names it
    const int64_t Rows = P.Buffers[size_t(T)].Dims[0];
    P.TokenTypeRows =
        P.ReadsTokenTypes ? std::min(P.TokenTypeRows, Rows) : Rows;
    P.ReadsTokenTypes = true;
  }
  if (P.SeqChunks > 0 && (P.ReadsKeyPadding || P.ReadsTokenTypes))
    return Status::error(
        "seq_chunks (chunks out of order) in a program that "
        "reads the step's " +
        std::string(P.ReadsKeyPadding ? "key padding" : "token types") +
        ", which the runtime holds in the natural order");
  resolveLayouts(P);
  WEFT_RETURN_IF_ERROR(validateProgram(P));
  return P;
}

Expected<Program> parseProgram(const std::string &B) {
  if (B.size() < ProgramHeaderBytes)
    return Status::error("truncated: file has " + std::to_string(B.size()) +
                         " bytes, the header alone needs " +
                         std::to_string(ProgramHeaderBytes));
  if (std::memcmp(B.data(), "WEFTPROG", 8) != 0)
    return Status::error("not a weft program (bad magic)");
  uint32_t Version = static_cast<uint32_t>(readLE(B, 8, 4));
  if (Version < ProgramFormatMinVersion)
    return Status::error(
        "format version " + std::to_string(Version) +
        " is an older program format (versions 1-2: a flat instruction "
        "list, 3: no communicator groups, 4: one pipeline stage); this "
        "runtime reads version " +
        std::to_string(ProgramFormatVersion) +
        ": recompile the model with this release's weft-compile");
  if (Version > ProgramFormatVersion)
    return Status::error("format version " + std::to_string(Version) +
                         ", this runtime reads version " +
                         std::to_string(ProgramFormatVersion) +
                         " (a newer weft-compile wrote it)");
  uint64_t N = readLE(B, 12, 8);
  uint64_t Found = B.size() - ProgramHeaderBytes;
  if (Found < N)
    return Status::error("truncated: expected " + std::to_string(N) +
                         " payload bytes, found " + std::to_string(Found));
  if (Found > N)
    return Status::error("trailing bytes: expected " + std::to_string(N) +
                         " payload bytes, found " + std::to_string(Found));
  uint64_t Want = readLE(B, 20, 8);
  uint64_t Got = fnv1a64(B.data() + ProgramHeaderBytes, N);
  if (Want != Got) {
    std::ostringstream OS;
    OS << "payload hash mismatch: header says 0x" << std::hex << Want
       << ", payload hashes to 0x" << Got;
    return Status::error(OS.str());
  }
  return parseProgramJson(B.substr(ProgramHeaderBytes), Version);
}

Expected<Program> loadProgramFile(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error("cannot open program file '" + Path + "'");
  std::ostringstream SS;
  SS << In.rdbuf();
  if (In.bad())
    return Status::error("cannot read program file '" + Path + "'");
  Expected<Program> P = parseProgram(SS.str());
  if (!P.ok())
    return P.status().withContext(Path);
  return P;
}

std::string encodeProgramContainer(const std::string &Json, uint32_t Version) {
  std::string B = "WEFTPROG";
  writeLE(B, Version, 4);
  writeLE(B, Json.size(), 8);
  writeLE(B, fnv1a64(Json.data(), Json.size()), 8);
  return B + Json;
}

} // namespace weft
