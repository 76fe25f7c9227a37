//===- CheckpointManifest.cpp - What makes a checkpoint complete ----------===//
#include "runtime/checkpoint/CheckpointManifest.h"
#include "program/JsonDepth.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace weft {

namespace {

constexpr const char *kFormat = "weft-checkpoint";
constexpr int kVersion = 1;

std::string partName(int64_t Rank) {
  return "rank-" + std::to_string(Rank) + ".json";
}

Expected<json> parseObject(const std::string &Text, const std::string &Where) {
  std::string Deep = jsonDepthError(Text, "'" + Where + "'");
  if (!Deep.empty())
    return Status::error(Deep);
  json J = json::parse(Text, nullptr, false);
  if (J.is_discarded() || !J.is_object())
    return Status::error("'" + Where + "' is not a JSON object");
  return J;
}

Expected<json> readJson(const fs::path &Path) {
  Expected<std::string> Text = readTextFile(Path.string());
  if (!Text.ok())
    return Text.status();
  return parseObject(*Text, Path.string());
}

/// A list of integers (no floats, no other types), or false.
bool intList(const json &J, std::vector<int64_t> &Out) {
  if (!J.is_array())
    return false;
  Out.clear();
  for (const json &V : J) {
    if (!V.is_number_integer() ||
        (V.is_number_unsigned() && V.get<uint64_t>() > uint64_t(INT64_MAX)))
      return false;
    Out.push_back(V.get<int64_t>());
  }
  return true;
}

bool stringList(const json &J, AxesList &Out) {
  if (!J.is_array())
    return false;
  Out.clear();
  for (const json &V : J) {
    if (!V.is_string())
      return false;
    Out.push_back(V.get<std::string>());
  }
  return true;
}

Status parseMeshJson(const json &J, const std::string &Where, Mesh &M) {
  if (!J.is_object() || !J.contains("axes") || !J.contains("shape") ||
      !stringList(J["axes"], M.Axes) || !intList(J["shape"], M.Dims))
    return Status::error("'" + Where +
                         "': mesh needs axes (strings) and shape (integers)");
  if (Status S = checkMesh(M); !S.ok())
    return Status::error("'" + Where + "': " + S.message());
  return Status::success();
}

json filesJson(const std::string &Dir, const std::vector<std::string> &Names,
               int64_t Rank, Status &S) {
  json Files = json::object();
  for (const std::string &N : Names) {
    Expected<FileDigest> D = digestFile((fs::path(Dir) / N).string());
    if (!D.ok()) {
      S = D.status();
      return Files;
    }
    Files[N] = {{"bytes", D->Bytes}, {"hash", D->hashHex()}, {"rank", Rank}};
  }
  return Files;
}

/// Reads an integer field in [Min, Max] or fails naming it.
Status intField(const json &J, const char *Key, int64_t Min, int64_t Max,
                const std::string &Where, int64_t &Out) {
  if (!J.contains(Key) || !J[Key].is_number_integer())
    return Status::error("'" + Where + "': \"" + Key + "\" must be an integer");
  bool Unsigned = J[Key].is_number_unsigned();
  if ((Unsigned && J[Key].get<uint64_t>() > uint64_t(Max)) ||
      (!Unsigned &&
       (J[Key].get<int64_t>() < Min || J[Key].get<int64_t>() > Max)))
    return Status::error("'" + Where + "': \"" + Key + "\" is " +
                         J[Key].dump() + ", expected " + std::to_string(Min) +
                         ".." + std::to_string(Max));
  int64_t V = J[Key].get<int64_t>();
  Out = V;
  return Status::success();
}

bool parseHex(const std::string &S, uint64_t &Out) {
  if (S.size() != 16)
    return false;
  Out = 0;
  for (char C : S) {
    int V = C >= '0' && C <= '9'   ? C - '0'
            : C >= 'a' && C <= 'f' ? C - 'a' + 10
                                   : -1;
    if (V < 0)
      return false;
    Out = Out << 4 | uint64_t(V);
  }
  return true;
}

} // namespace

Expected<std::string> readTextFile(const std::string &Path) {
  std::error_code EC;
  if (!fs::is_regular_file(Path, EC))
    return Status::error("'" + Path + "' is not a regular file");
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error("cannot open '" + Path + "'");
  std::stringstream SS;
  SS << In.rdbuf();
  if (In.bad())
    return Status::error("cannot read '" + Path + "'");
  return SS.str();
}

Expected<int64_t> parseTrainerState(const std::string &Text,
                                    const std::string &Where) {
  Expected<json> J = parseObject(Text, Where);
  if (!J.ok())
    return J.status();
  int64_t Step = 0;
  if (!intField(*J, "step", 0, kMaxCheckpointStep, Where, Step).ok())
    return Status::error("'" + Where + "' must be {\"step\": <integer in 0.." +
                         std::to_string(kMaxCheckpointStep) + ">}");
  return Step;
}

Expected<CheckpointLayout> parseCheckpointLayout(const std::string &Text,
                                                 const std::string &Where) {
  Expected<json> JE = parseObject(Text, Where);
  if (!JE.ok())
    return JE.status();
  const json &J = *JE;
  if (!J.contains("mesh") || !J.contains("tensors") ||
      !J["tensors"].is_object())
    return Status::error("'" + Where +
                         "' must be {\"mesh\": ..., \"tensors\": {...}}");
  CheckpointLayout C;
  WEFT_RETURN_IF_ERROR(parseMeshJson(J["mesh"], Where, C.Saved));
  for (auto It = J["tensors"].begin(); It != J["tensors"].end(); ++It) {
    const json &T = It.value();
    Layout L;
    bool Ok = T.is_object() && T.contains("global_shape") &&
              T.contains("sharding") && T.contains("blocks") &&
              intList(T["global_shape"], L.Global) &&
              intList(T["blocks"], L.Blocks) && T["sharding"].is_array();
    for (size_t D = 0; Ok && D < T["sharding"].size(); ++D) {
      L.Sharding.emplace_back();
      Ok = stringList(T["sharding"][D], L.Sharding.back());
    }
    if (!Ok)
      return Status::error("'" + Where + "': tensor '" + It.key() +
                           "' needs global_shape and blocks (integers) and "
                           "sharding (lists of axis names)");
    WEFT_RETURN_IF_ERROR(checkGlobalLayout(
        C.Saved, L, "'" + Where + "': tensor '" + It.key() + "'"));
    if (T.contains("logical_shape")) {
      Shape Logical;
      // The padding is the last elements: the logical shape holds fewer.
      if (!intList(T["logical_shape"], Logical) ||
          Logical.size() != L.Global.size() || Logical.empty() ||
          Logical[0] < 1 || Logical[0] > L.Global[0] ||
          !std::equal(Logical.begin() + 1, Logical.end(), L.Global.begin() + 1))
        return Status::error("'" + Where + "': tensor '" + It.key() +
                             "' has logical_shape " +
                             T["logical_shape"].dump() + ", not global_shape " +
                             shapeString(L.Global) + " with fewer rows");
      C.Logical[It.key()] = Logical;
    }
    C.Tensors[It.key()] = std::move(L);
  }
  return C;
}

Status writeRankPart(const std::string &Dir, int64_t Step, int64_t Rank,
                     int64_t WorldSize, const std::vector<std::string> &Names) {
  Status S = Status::success();
  json Files = filesJson(Dir, Names, Rank, S);
  WEFT_RETURN_IF_ERROR(S);
  json Part = {{"step", Step},
               {"rank", Rank},
               {"world_size", WorldSize},
               {"files", Files}};
  return writeTextDurably((fs::path(Dir) / partName(Rank)).string(),
                          Part.dump(1));
}

Status writeManifest(const std::string &Dir, int64_t Step, const Mesh &M,
                     int64_t WorldSize, const std::vector<std::string> &Names,
                     double WaitSeconds) {
  Status S = Status::success();
  json Files = filesJson(Dir, Names, 0, S);
  WEFT_RETURN_IF_ERROR(S);
  auto Deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(WaitSeconds);
  for (int64_t R = 1; R < WorldSize; ++R) {
    fs::path Part = fs::path(Dir) / partName(R);
    std::error_code EC;
    while (!fs::exists(Part, EC)) {
      if (std::chrono::steady_clock::now() > Deadline)
        return Status::error("checkpoint '" + Dir + "': rank " +
                             std::to_string(R) + " did not write '" +
                             Part.filename().string() + "' within " +
                             std::to_string(int64_t(WaitSeconds)) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    Expected<json> J = readJson(Part);
    if (!J.ok())
      return J.status();
    if (!J->contains("files") || !(*J)["files"].is_object() ||
        !J->contains("step") || (*J)["step"] != Step || !J->contains("rank") ||
        (*J)["rank"] != R)
      return Status::error("'" + Part.string() + "' is not rank " +
                           std::to_string(R) + "'s part of step " +
                           std::to_string(Step));
    for (auto It = (*J)["files"].begin(); It != (*J)["files"].end(); ++It)
      Files[It.key()] = It.value();
  }
  json Man = {{"format", kFormat},
              {"version", kVersion},
              {"step", Step},
              {"world_size", WorldSize},
              {"files", Files}};
  if (!M.Axes.empty())
    Man["mesh"] = {{"axes", M.Axes}, {"shape", M.Dims}};
  return writeTextDurably((fs::path(Dir) / "manifest.json").string(),
                          Man.dump(1));
}

namespace {

/// The names only weft writes into a checkpoint directory.
bool isWeftFile(const std::string &Name) {
  auto Starts = [&](const char *P) { return Name.rfind(P, 0) == 0; };
  return Name == "manifest.json" || Name == "trainer_state.json" ||
         Name == "layout.json" || Name == "optimizer.safetensors" ||
         Starts("model-rank") || Starts("optimizer-rank") || Starts("rank-");
}

} // namespace

bool looksLikeWeftCheckpoint(const std::string &Dir) {
  std::error_code EC;
  for (const fs::directory_entry &D : fs::directory_iterator(Dir, EC))
    if (isWeftFile(D.path().filename().string()))
      return true;
  return false;
}

Expected<Manifest> parseManifest(const std::string &Text,
                                 const std::string &Where) {
  Expected<json> JE = parseObject(Text, Where);
  if (!JE.ok())
    return JE.status();
  const json &J = *JE;
  if (!J.contains("format") || J["format"] != kFormat ||
      !J.contains("version") || J["version"] != kVersion)
    return Status::error("'" + Where + "' is not a version " +
                         std::to_string(kVersion) + " " + kFormat +
                         " manifest");
  Manifest M;
  WEFT_RETURN_IF_ERROR(
      intField(J, "step", 0, kMaxCheckpointStep, Where, M.Step));
  WEFT_RETURN_IF_ERROR(
      intField(J, "world_size", 1, int64_t(1) << 20, Where, M.WorldSize));
  if (J.contains("mesh")) {
    WEFT_RETURN_IF_ERROR(parseMeshJson(J["mesh"], Where, M.M));
    if (M.M.size() != M.WorldSize)
      return Status::error("'" + Where + "': mesh " + M.M.describe() +
                           " does not have world_size " +
                           std::to_string(M.WorldSize) + " ranks");
  }
  if (!J.contains("files") || !J["files"].is_object())
    return Status::error("'" + Where + "': \"files\" must be an object");
  for (auto It = J["files"].begin(); It != J["files"].end(); ++It) {
    const std::string &Name = It.key();
    const json &F = It.value();
    std::string FWhere = Where + "' file '" + Name;
    if (Name.empty() || Name.find('/') != std::string::npos ||
        Name.find("..") != std::string::npos || !F.is_object())
      return Status::error("'" + Where + "': bad file entry '" + Name + "'");
    ManifestFile MF;
    MF.Name = Name;
    int64_t Bytes = 0;
    WEFT_RETURN_IF_ERROR(intField(F, "bytes", 0, INT64_MAX, FWhere, Bytes));
    WEFT_RETURN_IF_ERROR(
        intField(F, "rank", 0, M.WorldSize - 1, FWhere, MF.Rank));
    MF.Digest.Bytes = uint64_t(Bytes);
    if (!F.contains("hash") || !F["hash"].is_string() ||
        !parseHex(F["hash"].get<std::string>(), MF.Digest.Hash))
      return Status::error("'" + FWhere + "': \"hash\" must be 16 hex digits");
    M.Files.push_back(MF);
  }
  return M;
}

Expected<Manifest> verifyCheckpoint(const std::string &Dir) {
  fs::path Path = fs::path(Dir) / "manifest.json";
  std::string Where = Path.string();
  std::error_code EC;
  if (!fs::exists(Path, EC))
    return Status::error(
        "checkpoint '" + Dir +
        "' is incomplete: it has no manifest.json (its save was interrupted, "
        "or it was written by a weft older than manifests)");
  Expected<std::string> Text = readTextFile(Where);
  if (!Text.ok())
    return Text.status();
  Expected<Manifest> ME = parseManifest(*Text, Where);
  if (!ME.ok())
    return ME.status();
  Manifest &M = *ME;
  // Every file the manifest names, as it was written.
  for (const ManifestFile &F : M.Files) {
    fs::path P = fs::path(Dir) / F.Name;
    if (!fs::is_regular_file(P, EC))
      return Status::error("checkpoint '" + Dir + "' lacks '" + F.Name +
                           "' (written by rank " + std::to_string(F.Rank) +
                           " at step " + std::to_string(M.Step) +
                           " per manifest.json)");
    Expected<FileDigest> D = digestFile(P.string());
    if (!D.ok())
      return D.status();
    if (D->Bytes != F.Digest.Bytes || D->Hash != F.Digest.Hash)
      return Status::error(
          "checkpoint '" + Dir + "': '" + F.Name + "' is not the file rank " +
          std::to_string(F.Rank) + " wrote at step " + std::to_string(M.Step) +
          " (" + std::to_string(D->Bytes) + " bytes, hash " + D->hashHex() +
          "; manifest.json: " + std::to_string(F.Digest.Bytes) +
          " bytes, hash " + F.Digest.hashHex() + ")");
  }
  // No weft file beside them that the manifest does not name.
  for (const fs::directory_entry &D : fs::directory_iterator(Dir, EC)) {
    std::string Name = D.path().filename().string();
    if (Name == "manifest.json" || Name.rfind("rank-", 0) == 0 ||
        !isWeftFile(Name))
      continue;
    bool Listed = false;
    for (const ManifestFile &F : M.Files)
      Listed |= F.Name == Name;
    if (!Listed)
      return Status::error("checkpoint '" + Dir + "' holds '" + Name +
                           "', which its manifest.json does not list");
  }
  return ME;
}

} // namespace weft
