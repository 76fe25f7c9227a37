//===- Dump.cpp - Readable listing of a program (weft-run --dump) ---------===//
#include "program/Program.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace weft {

namespace {

std::string idList(const std::vector<int64_t> &Ids) {
  std::string R = "[";
  for (size_t I = 0; I < Ids.size(); ++I)
    R += (I ? "," : "") + std::to_string(Ids[I]);
  return R + "]";
}

std::string num(double V) {
  char B[32];
  std::snprintf(B, sizeof(B), "%g", V);
  return B;
}

// A constant's first values (all of a small one), as the file holds them.
std::string constantValues(const BufferSpec &B) {
  constexpr int64_t Shown = 6;
  std::string S = "values=[";
  const int64_t N = B.numel();
  for (int64_t I = 0; I < std::min(N, Shown); ++I) {
    double V;
    if (B.Type == DType::F64) {
      std::memcpy(&V, B.Data.data() + I * 8, 8);
    } else {
      float F;
      std::memcpy(&F, B.Data.data() + I * 4, 4);
      V = F;
    }
    S += (I ? ", " : "") + num(V);
  }
  return S + (N > Shown ? ", ... (" + std::to_string(N) + ")]" : "]");
}

std::string attrString(const Instruction &I) {
  const OpAttrs &A = I.Attrs;
  std::string R;
  auto Add = [&](const std::string &S) { R += "  " + S; };
  switch (I.Op) {
  case OpKind::Matmul:
  case OpKind::BatchMatmul:
    if (A.TransposeA)
      Add("transpose_a=true");
    if (A.TransposeB)
      Add("transpose_b=true");
    break;
  case OpKind::LayerNorm:
  case OpKind::LayerNormGrad:
  case OpKind::RmsNorm:
  case OpKind::RmsNormGrad:
    Add("eps=" + num(A.Eps));
    break;
  case OpKind::Act:
  case OpKind::ActGrad: {
    size_t N;
    const ActivationName *T = activationNames(N);
    for (size_t K = 0; K < N; ++K)
      if (T[K].Kind == A.Act) {
        Add(std::string("kind=") + T[K].Name);
        break;
      }
    break;
  }
  case OpKind::Rope:
    Add("num_heads=" + std::to_string(A.NumHeads) + " theta=" + num(A.Theta) +
        (A.InvFreq.empty()
             ? ""
             : " inv_freq=[" + std::to_string(A.InvFreq.size()) + " values]") +
        (A.Scale != 1.0 ? " scale=" + num(A.Scale) : "") +
        (A.Inverse ? " inverse=true" : ""));
    break;
  case OpKind::Attention:
  case OpKind::AttentionGrad:
    Add("num_heads=" + std::to_string(A.NumHeads) +
        " num_kv_heads=" + std::to_string(A.NumKvHeads) +
        (A.AttnScale > 0 ? " scale=" + num(A.AttnScale) : "") +
        (A.Bidirectional ? " bidirectional=true" : "") +
        (A.Window > 0 ? " window=" + std::to_string(A.Window) : "") +
        (A.KeyPadding ? " key_padding=true" : "") +
        (A.DropP > 0 ? " dropout=" + num(A.DropP) +
                           " dropout_site=" + std::to_string(A.DropSite)
                     : ""));
    break;
  case OpKind::Dropout:
    Add("p=" + num(A.DropP) + " site=" + std::to_string(A.DropSite));
    break;
  case OpKind::Split:
    Add("sizes=" + idList(A.Sizes));
    break;
  case OpKind::AddRow:
    Add("row=" + std::to_string(A.Row));
    break;
  case OpKind::RowGrad:
    Add("row=" + std::to_string(A.Row) + " rows=" + std::to_string(A.Rows));
    break;
  case OpKind::Pointwise:
  case OpKind::PointwiseGrad: {
    size_t N;
    const PointwiseName *Names = pointwiseNames(N);
    for (size_t K = 0; K < N; ++K)
      if (Names[K].Fn == A.Pointwise)
        Add(std::string("fn=") + Names[K].Name);
    if (takesScalar(A.Pointwise))
      Add("scalar=" + num(A.Scalar));
    break;
  }
  case OpKind::Binary:
  case OpKind::BinaryGrad: {
    Add(std::string("fn=") + binaryFnName(A.Binary));
    if (I.Op == OpKind::BinaryGrad)
      Add("operand=" + std::to_string(A.Operand));
    break;
  }
  case OpKind::SelectGrad:
    Add("operand=" + std::to_string(A.Operand));
    break;
  case OpKind::Transpose:
    Add("perm=" + idList(A.Perm));
    break;
  case OpKind::Pack:
  case OpKind::Unpack:
    if (A.Blocks != 1)
      Add("blocks=" + std::to_string(A.Blocks));
    break;
  case OpKind::Fill:
    Add("value=" + num(A.Value));
    break;
  case OpKind::AdamW:
    Add(std::string("weight_decay=") + (A.WeightDecay ? "true" : "false"));
    break;
  default:
    break;
  }
  // Mesh attributes (version 2), wherever an op carries them.
  auto AddAxes = [&](const char *Name, const AxesList &Axes) {
    if (!Axes.empty())
      Add(std::string(Name) + "=" + axesString(Axes));
  };
  AddAxes("axes", A.Axes);
  if (I.Op == OpKind::AllGather || I.Op == OpKind::ReduceScatter ||
      I.Op == OpKind::AllToAll || I.Op == OpKind::Slice)
    Add("dim=" + std::to_string(A.Dim));
  AddAxes("seq_axes", A.SeqAxes);
  if (I.Op == OpKind::AttentionBlock || I.Op == OpKind::AttentionBlockGrad)
    Add("ring_step=" + std::to_string(A.RingStep));
  if (A.TokenTypes)
    Add("token_types=true");
  AddAxes("vocab_axes", A.VocabAxes);
  AddAxes("shard_axes", A.ShardAxes);
  if (!A.DimAxes.empty()) {
    std::string D;
    for (const AxesList &Axes : A.DimAxes)
      D += (D.empty() ? "" : ",") + axesString(Axes);
    Add("dim_axes=[" + D + "]");
  }
  if (A.Denominator > 0)
    Add("denominator=" + std::to_string(A.Denominator));
  if (A.Masked)
    Add("masked");
  if (A.Classes > 0) // a padded vocabulary: the columns from it on are padding
    Add("classes=" + std::to_string(A.Classes));
  return R;
}

std::string shapes(const Program &P, const std::vector<int64_t> &Ids,
                   const char *Sep) {
  std::string R;
  for (size_t I = 0; I < Ids.size(); ++I)
    R += (I ? Sep : "") + shapeString(P.Buffers[Ids[I]].Dims);
  return R;
}

} // namespace

std::string dumpProgram(const Program &P) {
  std::ostringstream OS;
  const OptimizerSpec &O = P.Optimizer;
  OS << "program: model " << P.Model << " | dtype " << dtypeName(P.Type)
     << " | batch " << P.Batch << " | seq " << P.Seq << " | vocab " << P.Vocab;
  if (P.Classes)
    OS << " | classes " << P.Classes;
  OS << "\n";
  if (P.forwardOnly())
    OS << "optimizer: none (a forward-only program)\n";
  else
    OS << "optimizer: " << O.Kind << " lr=" << num(O.Lr)
       << " beta1=" << num(O.Beta1) << " beta2=" << num(O.Beta2)
       << " eps=" << num(O.Eps) << " weight_decay=" << num(O.WeightDecay)
       << " schedule=" << O.Schedule << " warmup_steps=" << O.WarmupSteps
       << " total_steps=" << O.TotalSteps << " min_lr=" << num(O.MinLr) << "\n";
  if (!P.Devices.Axes.empty()) {
    OS << "mesh: " << P.Devices.describe();
    if (!P.Devices.Pipeline.empty())
      OS << " | pipeline " << P.Devices.Pipeline;
    OS << " | groups:";
    for (const AxesList &G : P.Devices.Groups)
      OS << " " << axesString(G);
    OS << "\n";
  }
  int64_t Total = 0;
  for (const ParamSpec &Pa : P.Params)
    Total += numElements(Pa.Dims);
  OS << "params: " << P.Params.size() << " (" << Total << " elements)\n";
  for (size_t I = 0; I < P.Params.size(); ++I) {
    const ParamSpec &Pa = P.Params[I];
    OS << "  " << I << "  " << Pa.Name << "  " << shapeString(Pa.Dims)
       << "  init="
       << (Pa.Init.K == InitSpec::Normal
               ? "normal(std=" + num(Pa.Init.Std) + ")"
           : Pa.Init.K == InitSpec::Ones   ? "ones"
           : Pa.Init.K == InitSpec::Loaded ? "loaded"
                                           : "zeros")
       << (Pa.WeightDecay ? "  decay" : "");
    // A padded vocabulary's (version 15): the model's rows of the stored.
    if (Pa.LogicalRows > 0)
      OS << "  rows " << Pa.LogicalRows << " of "
         << (Pa.Place.Global.empty() ? 0 : Pa.Place.Global[0])
         << " (padded for tp)";
    OS << "\n";
  }
  OS << "arena_bytes: " << P.ArenaBytes << "\n";
  OS << "buffers: " << P.Buffers.size() << "\n";
  for (size_t I = 0; I < P.Buffers.size(); ++I) {
    const BufferSpec &B = P.Buffers[I];
    OS << "  " << I << "  " << bufferKindName(B.Kind) << "  "
       << dtypeName(B.Type) << shapeString(B.Dims);
    if (B.Kind == BufferKind::Input)
      OS << "  " << B.Name;
    else if (B.Kind == BufferKind::Arena)
      OS << "  offset=" << B.Offset;
    else if (B.Kind == BufferKind::Constant)
      OS << "  " << constantValues(B);
    else
      OS << "  " << P.Params[B.Param].Name;
    for (size_t A = 0; A < B.Partial.size(); ++A)
      OS << (A ? "," : "  partial=") << B.Partial[A];
    if (P.Stages.size() > 1)
      OS << "  stage " << B.StageIndex;
    OS << "\n";
  }
  OS << "microbatches: " << P.Microbatches << "\n";
  if (P.MaskedLm.enabled())
    OS << "loss: masked-lm mask_token=" << P.MaskedLm.MaskToken
       << " mask_prob=" << num(P.MaskedLm.MaskProb)
       << " seed=" << P.MaskedLm.Seed << "\n";
  if (P.SeqChunks > 0)
    OS << "seq_chunks: " << P.SeqChunks << " per sequence, stored 0, "
       << P.SeqChunks - 1 << ", 1, ... (load-balanced context parallelism)\n";
  if (P.DocumentEos >= 0)
    OS << "documents: each ends with token " << P.DocumentEos << "\n";
  if (P.DocumentsFromMask)
    OS << "documents: padded rows, by each sample's attention mask\n";
  else if (const BufferSpec *F = P.floatTargets())
    OS << "loss: mse on float targets " << shapeString(F->Dims)
       << " (a regression's)\n";
  else if (P.givenTargets())
    OS << "loss: cross-entropy on given targets (-100 ignored"
       << (P.sampleTargets() ? "; one per sample" : "")
       << (P.Classes ? "; labels of the classes" : "") << ")\n";
  OS << "instructions: " << P.Instructions.size();
  if (P.forwardOnly())
    for (const OutputSpec &Out : P.Outputs)
      OS << " (" << Out.Name << " = buffer " << Out.Buffer << ")";
  else
    OS << " (loss = buffer " << P.Loss << ")";
  OS << "\n";
  for (size_t S = 0; S < P.Stages.size(); ++S) {
    const Stage &St = P.Stages[S];
    const int64_t Begin = St.Fragments.empty() ? 0 : St.Fragments.front().Begin;
    const int64_t End = St.Fragments.empty() ? 0 : St.Fragments.back().End;
    if (P.Stages.size() > 1)
      OS << "stage " << S << ": " << End - Begin << " instructions, slots "
         << St.Slots << ", arena "
         << (St.ArenaBytes >= 0 ? St.ArenaBytes : P.ArenaBytes)
         << (St.SlotBytes >= 0
                 ? " bytes, " + std::to_string(St.SlotBytes) + " per slot\n"
                 : std::string(" bytes per slot\n"));
    // A stage's instructions are numbered from 0, as messages number them.
    for (int64_t I = Begin; I < End; ++I) {
      const Instruction &In = P.Instructions[size_t(I)];
      for (const Fragment &F : St.Fragments)
        if (F.Begin == I)
          OS << "  -- fragment " << F.Name << " [" << F.Begin - Begin << ", "
             << F.End - Begin << ")"
             << (F.PerMicrobatch ? ", per micro-batch" : "") << "\n";
      char Idx[32];
      std::snprintf(Idx, sizeof(Idx), "%4lld",
                    static_cast<long long>(I - Begin));
      OS << Idx << "  " << instructionName(In) << "  in=" << idList(In.In)
         << " out=" << idList(In.Out) << attrString(In) << "  : "
         << shapes(P, In.In, " x ") << " -> " << shapes(P, In.Out, ", ")
         << "\n";
    }
    // Empty fragments at the end of the stage.
    for (const Fragment &F : St.Fragments)
      if (F.Begin == F.End && F.Begin == End)
        OS << "  -- fragment " << F.Name << " [" << F.Begin - Begin << ", "
           << F.End - Begin << ")\n";
    OS << "schedule:";
    for (const Action &A : St.Schedule) {
      if (A.isTransfer())
        OS << " " << (A.K == Action::Send ? "send" : "recv") << "[" << A.Buffer
           << (A.K == Action::Send ? "]->" : "]<-") << A.Peer;
      else
        OS << " " << St.Fragments[size_t(A.Frag)].Name;
      if (A.Microbatch >= 0)
        OS << "(" << A.Microbatch << ")";
    }
    OS << "\n";
  }
  return OS.str();
}

} // namespace weft
