//===- Checkpoint.cpp - Model/optimizer checkpoints -----------------------===//
#include "runtime/checkpoint/Checkpoint.h"
#include "program/Shard.h"
#include "runtime/DurableFile.h"
#include "runtime/checkpoint/CheckpointManifest.h"
#include "runtime/checkpoint/OnnxWeights.h"
#include "runtime/checkpoint/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace weft {

namespace {

Status makeDir(const std::string &Dir) {
  std::error_code EC;
  fs::create_directories(Dir, EC);
  if (EC)
    return Status::error("cannot create directory '" + Dir +
                         "': " + EC.message());
  return Status::success();
}

struct Found {
  const SafetensorsFile *File = nullptr;
  const SafeTensor *Tensor = nullptr;
};

/// Looks Name up, then the same name with the "transformer." prefix removed
/// or added.
Found lookup(const std::vector<SafetensorsFile> &Files,
             const std::string &Name) {
  const std::string Prefix = "transformer.";
  std::vector<std::string> Candidates{Name};
  if (Name.compare(0, Prefix.size(), Prefix) == 0)
    Candidates.push_back(Name.substr(Prefix.size()));
  else
    Candidates.push_back(Prefix + Name);
  for (const std::string &C : Candidates)
    for (const SafetensorsFile &F : Files)
      if (const SafeTensor *T = F.find(C))
        return {&F, T};
  return {};
}

Status loadInto(const Found &F, const std::string &Name, const Shape &Want,
                DType Type, void *Out) {
  if (F.Tensor->Dims != Want)
    return Status::error("tensor '" + F.Tensor->Name + "' has shape " +
                         shapeString(F.Tensor->Dims) + ", expected " +
                         shapeString(Want) + " for parameter '" + Name + "'");
  return F.File->convert(*F.Tensor, Type, Out);
}

bool onMesh(const Executor &E) { return E.comm().size() > 1; }

json layoutJson(const Layout &L, const Shape &Logical) {
  json J = {{"global_shape", L.Global},
            {"sharding", L.Sharding},
            {"blocks", L.Blocks}};
  // A padded vocabulary: the rows the model has (the rest are padding).
  if (Logical != L.Global)
    J["logical_shape"] = Logical;
  return J;
}

/// The persistent tensors a checkpoint holds, by name.
struct Entry {
  std::string Name;
  size_t Param;
  BufferKind Kind;
};
std::vector<Entry> entries(const Program &P, bool Optimizer) {
  std::vector<Entry> R;
  for (size_t I = 0; I < P.Params.size(); ++I)
    R.push_back({P.Params[I].Name, I, BufferKind::Param});
  if (Optimizer)
    for (size_t I = 0; I < P.Params.size(); ++I) {
      R.push_back({P.Params[I].Name + ".exp_avg", I, BufferKind::AdamM});
      R.push_back({P.Params[I].Name + ".exp_avg_sq", I, BufferKind::AdamV});
    }
  return R;
}

/// A sharded checkpoint: layout.json and the rank files it names.
struct ShardedCheckpoint {
  Mesh Saved;
  std::map<std::string, Layout> Layouts;
  std::map<std::string, Shape> Logical; // layout.json's logical_shape
  std::vector<SafetensorsFile> Files;   // model-rank<r>, optimizer-rank<r>
  std::vector<int64_t> FileRank;
};

Expected<ShardedCheckpoint> readSharded(const fs::path &Dir) {
  ShardedCheckpoint C;
  std::string Where = (Dir / "layout.json").string();
  Expected<std::string> Text = readTextFile(Where);
  if (!Text.ok())
    return Text.status();
  Expected<CheckpointLayout> L = parseCheckpointLayout(*Text, Where);
  if (!L.ok())
    return L.status();
  C.Saved = L->Saved;
  C.Layouts = std::move(L->Tensors);
  C.Logical = std::move(L->Logical);
  std::error_code EC;
  for (int64_t R = 0; R < C.Saved.size(); ++R)
    for (const char *Kind : {"model", "optimizer"}) {
      fs::path F = Dir / (std::string(Kind) + "-rank" + std::to_string(R) +
                          ".safetensors");
      if (!fs::exists(F, EC)) {
        if (std::string(Kind) == "model")
          return Status::error("sharded checkpoint '" + Dir.string() +
                               "' (mesh " + C.Saved.describe() + ") has no '" +
                               F.filename().string() + "'");
        continue;
      }
      Expected<SafetensorsFile> File = SafetensorsFile::read(F.string());
      if (!File.ok())
        return File.status();
      C.Files.push_back(File.take());
      C.FileRank.push_back(R);
    }
  return C;
}

/// Assembles the global tensor Name (Type elements) from the rank files.
Status assemble(const ShardedCheckpoint &C, const std::string &Name, DType Type,
                std::vector<char> &Global, Shape &GlobalDims) {
  auto It = C.Layouts.find(Name);
  if (It == C.Layouts.end())
    return Status::error("layout.json has no tensor '" + Name + "'");
  const Layout &L = It->second;
  GlobalDims = L.Global;
  const size_t E = dtypeBytes(Type);
  Global.assign(size_t(numElements(L.Global)) * E, 0);
  std::vector<char> Local;
  std::vector<std::vector<int64_t>> Done; // shard indices already placed
  for (size_t F = 0; F < C.Files.size(); ++F) {
    const SafeTensor *T = C.Files[F].find(Name);
    if (!T)
      continue;
    ShardMap S = shardMap(L, C.Saved, C.FileRank[F]);
    if (std::find(Done.begin(), Done.end(), S.Index) != Done.end())
      continue;
    if (T->Dims != S.Local)
      return Status::error("tensor '" + Name + "' of rank " +
                           std::to_string(C.FileRank[F]) + " has shape " +
                           shapeString(T->Dims) + ", layout.json implies " +
                           shapeString(S.Local));
    Local.resize(size_t(S.localNumel()) * E);
    WEFT_RETURN_IF_ERROR(C.Files[F].convert(*T, Type, Local.data()));
    insertShard(S, Local.data(), Global.data(), E);
    Done.push_back(S.Index);
  }
  int64_t Need = 1;
  for (size_t D = 0; D < L.Global.size(); ++D)
    Need *= C.Saved.count(L.Sharding[D]);
  if (int64_t(Done.size()) != Need)
    return Status::error("tensor '" + Name + "': the rank files hold " +
                         std::to_string(Done.size()) + " of its " +
                         std::to_string(Need) + " shards");
  // Without a padded vocabulary's rows (the last elements): the model's.
  auto Logical = C.Logical.find(Name);
  if (Logical != C.Logical.end()) {
    GlobalDims = Logical->second;
    Global.resize(size_t(numElements(GlobalDims)) * E);
  }
  return Status::success();
}

/// Keeps the executor rank's block of a global tensor (the model's: where
/// the program pads a vocabulary, its padding rows are zeros).
Status place(Executor &E, const Entry &En, const std::vector<char> &Model,
             const Shape &ModelDims, const std::string &From) {
  const BufferSpec &Spec = E.stateSpec(En.Param, En.Kind);
  const Layout &L = Spec.Place;
  const size_t Elem = dtypeBytes(E.program().Type);
  const Shape Logical = logicalShape(E.program().Params[En.Param], L.Global);
  const std::vector<char> *Source = &Model;
  Shape GlobalDims = ModelDims;
  std::vector<char> Padded;
  if (Logical != L.Global && numElements(ModelDims) == numElements(Logical) &&
      (ModelDims == Logical || ModelDims.size() == 1 || Logical.size() == 1)) {
    Padded.assign(size_t(numElements(L.Global)) * Elem, 0);
    std::memcpy(Padded.data(), Model.data(),
                size_t(numElements(Logical)) * Elem);
    Source = &Padded;
    GlobalDims = ModelDims.size() == 1 && L.Global.size() != 1
                     ? Shape{numElements(L.Global)}
                     : L.Global;
  }
  const std::vector<char> &Global = *Source;
  bool Exact = GlobalDims == L.Global;
  // Optimizer state may be stored flattened by ZeRO: the same elements as
  // one dim on either side.
  bool SameElems = En.Kind != BufferKind::Param &&
                   (GlobalDims.size() == 1 || L.Global.size() == 1) &&
                   numElements(GlobalDims) == numElements(L.Global);
  if (!Exact && !SameElems)
    return Status::error("tensor '" + From + "' has shape " +
                         shapeString(ModelDims) + ", expected " +
                         shapeString(Logical) + " for '" + En.Name + "'");
  if (!E.holds(En.Param, En.Kind))
    return Status::success(); // another pipeline stage's
  std::vector<char> Local(size_t(Spec.numel()) * Elem);
  extractShard(shardMap(L, E.mesh(), E.rank()), Global.data(), Local.data(),
               Elem);
  return E.writeState(En.Param, En.Kind, Local.data());
}

Expected<int64_t> readStep(const fs::path &Dir) {
  std::error_code EC;
  if (Dir.empty() || !fs::exists(Dir / "trainer_state.json", EC))
    return int64_t(0);
  std::string Where = (Dir / "trainer_state.json").string();
  Expected<std::string> Text = readTextFile(Where);
  if (!Text.ok())
    return Text.status();
  return parseTrainerState(*Text, Where);
}

/// Names that hold no trained values: the causal mask GPT-2 checkpoints
/// carry as attn.bias / attn.masked_bias, Llama's cached rotary inv_freq.
bool isDerivedBuffer(const std::string &Name) {
  auto EndsWith = [&](const std::string &Suffix) {
    return Name.size() >= Suffix.size() &&
           Name.compare(Name.size() - Suffix.size(), Suffix.size(), Suffix) ==
               0;
  };
  return EndsWith(".attn.bias") || EndsWith(".attn.masked_bias") ||
         EndsWith(".rotary_emb.inv_freq");
}

/// Whether the 2-D table X (of shape DA) holds Y's values (of shape DB), as
/// stored or transposed. A table of one value (zeros, ones) is nobody's copy.
bool sameOrTransposed(const Shape &DA, const std::vector<double> &X,
                      const Shape &DB, const std::vector<double> &Y) {
  if (DA.size() != 2 || X.empty() ||
      std::all_of(X.begin(), X.end(), [&](double V) { return V == X[0]; }))
    return false;
  if (DA == DB)
    return X == Y;
  if (DA.size() != 2 || DB.size() != 2 || DA[0] != DB[1] || DA[1] != DB[0])
    return false;
  for (int64_t R = 0; R < DA[0]; ++R)
    for (int64_t C = 0; C < DA[1]; ++C)
      if (X[size_t(R * DA[1] + C)] != Y[size_t(C * DA[0] + R)])
        return false;
  return true;
}

/// Refuses (or, with AllowUnused, reports) the tensors of a checkpoint the
/// program did not load. `Equal(A, B)` tells whether two tensors hold the
/// same values, as stored or one the other transposed (an lm_head.weight
/// saved beside the embedding it is tied to).
Status checkUnused(const std::vector<std::string> &All,
                   const std::set<std::string> &Used, const std::string &Path,
                   const LoadOptions &Options,
                   const std::function<bool(const std::string &,
                                            const std::string &)> &Equal) {
  std::vector<std::string> Unused;
  for (const std::string &Name : All) {
    if (Used.count(Name) || isDerivedBuffer(Name))
      continue;
    // A copy of a tensor the program reads (a tied head saved beside its
    // embedding, or written transposed by an ONNX exporter) is that tensor.
    if (std::any_of(Used.begin(), Used.end(),
                    [&](const std::string &U) { return Equal(Name, U); }))
      continue;
    Unused.push_back(Name);
  }
  if (Unused.empty())
    return Status::success();
  std::string List;
  for (size_t I = 0; I < Unused.size() && I < 8; ++I)
    List += (I ? ", '" : "'") + Unused[I] + "'";
  if (Unused.size() > 8)
    List += " and " + std::to_string(Unused.size() - 8) + " more";
  if (Options.AllowUnused) {
    if (Options.Warnings)
      for (const std::string &Name : Unused)
        Options.Warnings->push_back("checkpoint '" + Path + "' tensor '" +
                                    Name + "' is not used by the program");
    return Status::success();
  }
  return Status::error(
      "checkpoint '" + Path + "' holds " + std::to_string(Unused.size()) +
      " tensor(s) the program does not use: " + List +
      "; it describes a different model (pass --allow-unused-tensors to "
      "load it anyway)");
}

Expected<int64_t> loadSharded(Executor &E, const fs::path &Dir,
                              const LoadOptions &Options,
                              const Mesh *ManifestMesh) {
  Expected<ShardedCheckpoint> C = readSharded(Dir);
  if (!C.ok())
    return C.status();
  if (ManifestMesh && (ManifestMesh->Axes != C->Saved.Axes ||
                       ManifestMesh->Dims != C->Saved.Dims))
    return Status::error("checkpoint '" + Dir.string() +
                         "': layout.json's mesh " + C->Saved.describe() +
                         " is not manifest.json's " + ManifestMesh->describe());
  const Program &P = E.program();
  bool HasOptimizer = false;
  for (const ParamSpec &Par : P.Params)
    HasOptimizer |= C->Layouts.count(Par.Name + ".exp_avg") > 0;
  std::vector<char> Global;
  Shape Dims;
  std::set<std::string> Used;
  for (const Entry &En : entries(P, HasOptimizer)) {
    if (!C->Layouts.count(En.Name))
      return Status::error("checkpoint '" + Dir.string() + "' has no tensor '" +
                           En.Name + "'");
    WEFT_RETURN_IF_ERROR(assemble(*C, En.Name, P.Type, Global, Dims));
    WEFT_RETURN_IF_ERROR(place(E, En, Global, Dims, En.Name));
    Used.insert(En.Name);
  }
  std::vector<std::string> All;
  for (const auto &[Name, L] : C->Layouts)
    All.push_back(Name);
  WEFT_RETURN_IF_ERROR(checkUnused(
      All, Used, Dir.string(), Options,
      [&](const std::string &A, const std::string &B) {
        std::vector<char> X, Y;
        Shape DA, DB;
        if (!assemble(*C, A, DType::F64, X, DA).ok() ||
            !assemble(*C, B, DType::F64, Y, DB).ok() ||
            numElements(DA) != numElements(DB))
          return false;
        std::vector<double> XA(size_t(numElements(DA))), YB(XA.size());
        std::memcpy(XA.data(), X.data(), XA.size() * sizeof(double));
        std::memcpy(YB.data(), Y.data(), YB.size() * sizeof(double));
        return sameOrTransposed(DA, XA, DB, YB);
      }));
  return readStep(Dir);
}

/// Loads from the files Paths (flat: each holds whole tensors); the step
/// from Dir/trainer_state.json when Dir is not empty.
Expected<int64_t> loadFlat(Executor &E, const fs::path &Dir,
                           const std::vector<std::string> &Paths,
                           const LoadOptions &Options) {
  const std::string Path = Dir.empty() ? Paths.front() : Dir.string();
  std::vector<SafetensorsFile> Files;
  for (const std::string &F : Paths) {
    Expected<SafetensorsFile> File = fs::path(F).extension() == ".onnx"
                                         ? readOnnxInitializers(F)
                                         : SafetensorsFile::read(F);
    if (!File.ok())
      return File.status();
    Files.push_back(File.take());
  }
  const Program &P = E.program();
  bool HasOptimizer = false;
  for (const ParamSpec &Spec : P.Params)
    HasOptimizer |= lookup(Files, Spec.Name + ".exp_avg").Tensor != nullptr;
  std::vector<char> Global, Local;
  std::set<std::string> Used;
  bool Untied = false;
  for (const ParamSpec &Spec : P.Params)
    Untied |= Spec.Name == "lm_head.weight";
  for (const Entry &En : entries(P, HasOptimizer)) {
    Found F = lookup(Files, En.Name);
    // A tied embedding kept once under the head's name (torch.onnx.export
    // of a tied Hugging Face model writes only lm_head.weight); its shape
    // is checked as the embedding's.
    if (!F.Tensor && !Untied && En.Kind == BufferKind::Param &&
        (En.Name == "transformer.wte.weight" ||
         En.Name == "model.embed_tokens.weight"))
      F = lookup(Files, "lm_head.weight");
    if (F.Tensor)
      Used.insert(F.Tensor->Name);
    if (!F.Tensor) {
      if (En.Kind == BufferKind::Param)
        return Status::error(
            "checkpoint '" + Path + "' has no tensor for parameter '" +
            En.Name + "' (shape " +
            shapeString(P.Params[En.Param].Place.Global) + ")");
      return Status::error("checkpoint '" + Path +
                           "' has optimizer state but no tensor '" + En.Name +
                           "'");
    }
    const BufferSpec &Spec = E.stateSpec(En.Param, En.Kind);
    // The model's shape (a padded vocabulary's without its padding rows).
    const Shape Model = logicalShape(P.Params[En.Param], Spec.Place.Global);
    if (!E.holds(En.Param, En.Kind)) {
      // Another pipeline stage loads it; the shape is still checked.
      if (F.Tensor->Dims != Spec.Dims && F.Tensor->Dims != Model)
        return loadInto(F, En.Name, Model, P.Type, nullptr);
      continue;
    }
    if (!Spec.Place.sharded() && F.Tensor->Dims == Spec.Dims) {
      Local.resize(size_t(Spec.numel()) * dtypeBytes(P.Type));
      WEFT_RETURN_IF_ERROR(F.File->convert(*F.Tensor, P.Type, Local.data()));
      WEFT_RETURN_IF_ERROR(E.writeState(En.Param, En.Kind, Local.data()));
      continue;
    }
    if (En.Kind == BufferKind::Param && F.Tensor->Dims != Model)
      return loadInto(F, En.Name, Model, P.Type, nullptr);
    Global.resize(size_t(numElements(F.Tensor->Dims)) * dtypeBytes(P.Type));
    WEFT_RETURN_IF_ERROR(F.File->convert(*F.Tensor, P.Type, Global.data()));
    WEFT_RETURN_IF_ERROR(place(E, En, Global, F.Tensor->Dims, F.Tensor->Name));
  }
  std::vector<std::string> All;
  for (const SafetensorsFile &F : Files)
    for (const SafeTensor &T : F.tensors())
      All.push_back(T.Name);
  WEFT_RETURN_IF_ERROR(checkUnused(
      All, Used, Path, Options,
      [&](const std::string &A, const std::string &B) {
        Found FA = lookup(Files, A), FB = lookup(Files, B);
        if (!FA.Tensor || !FB.Tensor ||
            numElements(FA.Tensor->Dims) != numElements(FB.Tensor->Dims))
          return false;
        size_t N = size_t(numElements(FA.Tensor->Dims));
        std::vector<double> X(N), Y(N);
        return FA.File->convert(*FA.Tensor, DType::F64, X.data()).ok() &&
               FB.File->convert(*FB.Tensor, DType::F64, Y.data()).ok() &&
               sameOrTransposed(FA.Tensor->Dims, X, FB.Tensor->Dims, Y);
      }));
  return readStep(Dir);
}

} // namespace

Status checkpointBarrier(const Executor &E, Status S) {
  Expected<const CommGroup *> W = E.comm().group(E.mesh(), E.mesh().Axes);
  if (!W.ok())
    return S.ok() ? W.status() : S;
  Status B = E.comm().barrier(**W);
  return S.ok() ? B : S;
}

Expected<CheckpointSnapshot>
snapshotCheckpoint(const Executor &E, int64_t Step,
                   std::vector<std::vector<char>> Recycled) {
  const Program &P = E.program();
  CheckpointSnapshot S;
  S.Step = Step;
  S.Rank = E.rank();
  S.WorldSize = E.comm().size();
  if (onMesh(E))
    S.M = E.mesh();
  for (const Entry &En : entries(P, true)) {
    // A pipeline rank writes its stage's tensors; layout.json names all.
    if (!E.holds(En.Param, En.Kind))
      continue;
    const BufferSpec &Spec = E.stateSpec(En.Param, En.Kind);
    // Copied from the device: the files are written from host memory.
    const size_t Bytes = size_t(Spec.numel()) * dtypeBytes(P.Type);
    size_t K = S.Copies.size();
    S.Copies.push_back(K < Recycled.size() ? std::move(Recycled[K])
                                           : std::vector<char>());
    S.Copies.back().resize(Bytes);
    WEFT_RETURN_IF_ERROR(
        E.readState(En.Param, En.Kind, S.Copies.back().data()));
    TensorToWrite T{En.Name, P.Type, Spec.Dims, S.Copies.back().data()};
    (En.Kind == BufferKind::Param ? S.Model : S.Optimizer).push_back(T);
  }
  S.Batches = E.batchesDescription();
  if (onMesh(E) && E.rank() == 0) {
    json Tensors = json::object();
    for (const Entry &En : entries(P, true)) {
      const Layout &L = E.stateSpec(En.Param, En.Kind).Place;
      Tensors[En.Name] =
          layoutJson(L, logicalShape(P.Params[En.Param], L.Global));
    }
    S.LayoutJson = json{
        {"mesh", {{"axes", S.M.Axes}, {"shape", S.M.Dims}}},
        {"tensors",
         Tensors}}.dump(1);
  }
  return S;
}

Status writeCheckpoint(const CheckpointSnapshot &S, const std::string &Dir,
                       double WaitSeconds) {
  WEFT_RETURN_IF_ERROR(makeDir(Dir));
  const bool Mesh = !S.M.Axes.empty();
  const std::string Suffix =
      Mesh ? "-rank" + std::to_string(S.Rank) + ".safetensors" : ".safetensors";
  std::vector<std::string> Names;
  auto Tensors = [&](const std::string &Name,
                     const std::vector<TensorToWrite> &T) {
    Names.push_back(Name);
    return writeDurably(Dir + "/" + Name, [&](const std::string &Tmp) {
      return writeSafetensors(Tmp, T);
    });
  };
  auto Text = [&](const std::string &Name, const std::string &Body) {
    Names.push_back(Name);
    return writeTextDurably(Dir + "/" + Name, Body);
  };
  WEFT_RETURN_IF_ERROR(Tensors("model" + Suffix, S.Model));
  WEFT_RETURN_IF_ERROR(Tensors("optimizer" + Suffix, S.Optimizer));
  if (S.Rank != 0)
    return writeRankPart(Dir, S.Step, S.Rank, S.WorldSize, Names);
  if (Mesh)
    WEFT_RETURN_IF_ERROR(Text("layout.json", S.LayoutJson));
  json State{{"step", S.Step}};
  if (!S.Batches.empty())
    State["batches"] = S.Batches;
  WEFT_RETURN_IF_ERROR(Text("trainer_state.json", State.dump()));
  return writeManifest(Dir, S.Step, S.M, S.WorldSize, Names, WaitSeconds);
}

namespace {
// The files a checkpoint holds (writeCheckpoint): the manifest, trainer
// state, mesh layout, each rank's part note and safetensors.
bool isCheckpointFile(const std::string &Name) {
  auto Ends = [&](const std::string &Suffix) {
    return Name.size() >= Suffix.size() &&
           Name.compare(Name.size() - Suffix.size(), Suffix.size(), Suffix) ==
               0;
  };
  return Name == "manifest.json" || Name == "trainer_state.json" ||
         Name == "layout.json" ||
         (Name.rfind("rank-", 0) == 0 && Ends(".json")) ||
         ((Name.rfind("model", 0) == 0 || Name.rfind("optimizer", 0) == 0) &&
          Ends(".safetensors"));
}
} // namespace

Status checkSaveTarget(const std::string &Dir) {
  std::error_code EC;
  fs::file_status St = fs::status(Dir, EC);
  if (!fs::exists(St))
    return Status::success();
  if (!fs::is_directory(St))
    return Status::error("--save '" + Dir + "' is not a directory");
  bool Manifest = fs::exists(fs::path(Dir) / "manifest.json", EC);
  std::string Other;
  for (fs::directory_iterator It(Dir, EC), End; !EC && It != End;
       It.increment(EC)) {
    std::string Name = It->path().filename().string();
    bool Folder = It->is_directory(EC);
    if (Folder || !Manifest || !isCheckpointFile(Name)) {
      Other = Name + (Folder ? "/" : "");
      break;
    }
  }
  if (EC)
    return Status::error("cannot list --save '" + Dir + "': " + EC.message());
  if (Other.empty())
    return Status::success();
  return Status::error(
      "--save '" + Dir + "' holds '" + Other +
      "', which is not a weft checkpoint's (" +
      (Manifest ? "a checkpoint holds its manifest, state and safetensors "
                  "only"
                : "it has no manifest.json") +
      "): a save replaces its folder whole, so weft will not save there; "
      "--save-every's step-* checkpoints live in --checkpoint-dir, and "
      "--save takes a folder of its own");
}

Status saveCheckpoint(const Executor &E, const std::string &Dir, int64_t Step,
                      double WaitSeconds) {
  std::string Trimmed = Dir;
  while (Trimmed.size() > 1 && Trimmed.back() == '/')
    Trimmed.pop_back();
  const std::string Staging = Trimmed + ".partial";
  // Rank 0 clears what an interrupted save left before anyone writes.
  Status S = Status::success();
  if (E.rank() == 0)
    S = checkSaveTarget(Trimmed);
  if (E.rank() == 0 && S.ok()) {
    std::error_code EC;
    fs::remove_all(Staging, EC);
    if (EC)
      S = Status::error("cannot remove '" + Staging + "': " + EC.message());
  }
  S = checkpointBarrier(E, S);
  if (!S.ok())
    return S;
  Expected<CheckpointSnapshot> Snap = snapshotCheckpoint(E, Step);
  S = Snap.ok() ? writeCheckpoint(*Snap, Staging, WaitSeconds) : Snap.status();
  S = checkpointBarrier(E, S);
  if (!S.ok() || E.rank() != 0)
    return S;
  WEFT_RETURN_IF_ERROR(exchangeOrRename(Staging, Trimmed));
  std::error_code EC;
  fs::remove_all(Staging, EC); // the previous checkpoint, if there was one
  return Status::success();
}

Status saveGradients(const Executor &E, const std::string &Dir) {
  if (!onMesh(E)) {
    WEFT_RETURN_IF_ERROR(makeDir(Dir));
    const Program &P = E.program();
    std::vector<TensorToWrite> Tensors;
    std::vector<std::vector<char>> Host(P.Params.size());
    for (size_t I = 0; I < P.Params.size(); ++I) {
      Expected<std::vector<char>> G = E.stateBytes(I, BufferKind::Grad);
      if (!G.ok())
        return G.status();
      Host[I] = G.take();
      Tensors.push_back({P.Params[I].Name, P.Type,
                         E.stateSpec(I, BufferKind::Grad).Dims,
                         Host[I].data()});
    }
    return writeSafetensors(Dir + "/grads.safetensors", Tensors);
  }
  // Gather every rank's grad shard over the world; rank 0 assembles.
  Expected<const CommGroup *> W = E.comm().group(E.mesh(), E.mesh().Axes);
  if (!W.ok())
    return W.status();
  const Program &P = E.program();
  const size_t Elem = dtypeBytes(P.Type);
  const int64_t N = E.comm().size();
  std::vector<std::vector<char>> Globals(P.Params.size());
  std::vector<TensorToWrite> Tensors;
  std::vector<char> All, Summed;
  for (size_t I = 0; I < P.Params.size(); ++I) {
    const BufferSpec &Spec = E.stateSpec(I, BufferKind::Grad);
    size_t Local = size_t(Spec.numel());
    // Gathered from a host copy, over the host queue. Ranks of other
    // pipeline stages send zeros, not used.
    Expected<std::vector<char>> Copy =
        E.holds(I, BufferKind::Grad)
            ? E.stateBytes(I, BufferKind::Grad)
            : Expected<std::vector<char>>(std::vector<char>(Local * Elem, 0));
    if (!Copy.ok())
      return Copy.status();
    const void *Grad = Copy->data();
    if (!Spec.Partial.empty()) {
      // A partial grad (ZeRO-1) holds this rank's contribution: its sum
      // over the partial axes is the gradient (not in comm_bytes).
      Expected<const CommGroup *> G = E.comm().group(E.mesh(), Spec.Partial);
      if (!G.ok())
        return G.status();
      Summed.resize(Local * Elem);
      WEFT_RETURN_IF_ERROR(E.comm().allReduce(**G, Grad, Summed.data(), Local,
                                              P.Type, hostQueue()));
      Grad = Summed.data();
    }
    All.resize(Local * size_t(N) * Elem);
    WEFT_RETURN_IF_ERROR(
        E.comm().allGather(**W, Grad, All.data(), Local, P.Type, hostQueue()));
    if (E.rank() != 0)
      continue;
    Globals[I].assign(size_t(numElements(Spec.Place.Global)) * Elem, 0);
    const Mesh &M = E.mesh();
    for (int64_t R = 0; R < N; ++R) {
      if (!M.Pipeline.empty() &&
          M.coords(R)[size_t(M.axisIndex(M.Pipeline))] != E.paramStage(I))
        continue;
      insertShard(shardMap(Spec.Place, E.mesh(), R),
                  All.data() + size_t(R) * Local * Elem, Globals[I].data(),
                  Elem);
    }
    // The model's gradient: a padded vocabulary's rows (the last
    // elements) are not written.
    Tensors.push_back({P.Params[I].Name, P.Type,
                       logicalShape(P.Params[I], Spec.Place.Global),
                       Globals[I].data()});
  }
  Status S = Status::success();
  if (E.rank() == 0) {
    S = makeDir(Dir);
    if (S.ok())
      S = writeSafetensors(Dir + "/grads.safetensors", Tensors);
  }
  return checkpointBarrier(E, S);
}

Expected<int64_t> loadCheckpoint(Executor &E, const std::string &Path,
                                 const LoadOptions &Options) {
  std::error_code EC;
  std::vector<std::string> Paths;
  fs::path Dir;
  if (fs::is_directory(Path, EC)) {
    Dir = Path;
    // A weft checkpoint loads only whole: every file as its manifest says.
    if (looksLikeWeftCheckpoint(Path)) {
      Expected<Manifest> Man = verifyCheckpoint(Path);
      if (!Man.ok())
        return Man.status();
      Expected<int64_t> Step =
          fs::exists(Dir / "layout.json", EC)
              ? loadSharded(E, Dir, Options, &Man->M)
              : loadFlat(E, Dir,
                         {(Dir / "model.safetensors").string(),
                          (Dir / "optimizer.safetensors").string()},
                         Options);
      if (Step.ok() && *Step != Man->Step)
        return Status::error("checkpoint '" + Path +
                             "': trainer_state.json holds step " +
                             std::to_string(*Step) + ", manifest.json step " +
                             std::to_string(Man->Step));
      return Step;
    }
    // Otherwise model.safetensors, or every file (e.g. a sharded Hugging
    // Face checkpoint). grads.safetensors (--save-grads) repeats the
    // parameter names and is never read.
    if (fs::exists(Dir / "model.safetensors", EC)) {
      Paths.push_back((Dir / "model.safetensors").string());
    } else {
      for (const fs::directory_entry &D : fs::directory_iterator(Path, EC))
        if (D.path().extension() == ".safetensors" &&
            D.path().filename() != "grads.safetensors")
          Paths.push_back(D.path().string());
      std::sort(Paths.begin(), Paths.end());
    }
    if (Paths.empty())
      return Status::error("no *.safetensors files in '" + Path + "'");
  } else if (fs::exists(Path, EC)) {
    Paths.push_back(Path);
  } else {
    return Status::error("checkpoint '" + Path + "' does not exist");
  }
  return loadFlat(E, Dir, Paths, Options);
}

Expected<std::string> readBatchesDescription(const std::string &Dir) {
  std::error_code EC;
  const fs::path File = fs::path(Dir) / "trainer_state.json";
  if (Dir.empty() || !fs::exists(File, EC))
    return std::string();
  Expected<std::string> Text = readTextFile(File.string());
  if (!Text.ok())
    return Text.status();
  json J = json::parse(*Text, nullptr, /*allow_exceptions=*/false);
  if (!J.is_object() || !J.contains("batches"))
    return std::string();
  if (!J["batches"].is_string())
    return Status::error("'" + File.string() +
                         "': \"batches\" must be a string");
  return J["batches"].get<std::string>();
}

} // namespace weft
