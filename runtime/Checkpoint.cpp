//===- Checkpoint.cpp - Model/optimizer checkpoints -----------------------===//
#include "runtime/Checkpoint.h"
#include "runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

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

using Getter = void *(Executor::*)(size_t) const;

Status
writeState(const Executor &E, const std::string &Path,
           std::initializer_list<std::pair<Getter, const char *>> Parts) {
  const Program &P = E.program();
  std::vector<TensorToWrite> Tensors;
  for (auto [Get, Suffix] : Parts)
    for (size_t I = 0; I < P.Params.size(); ++I)
      Tensors.push_back(
          {P.Params[I].Name + Suffix, P.Type, P.Params[I].Dims, (E.*Get)(I)});
  return writeSafetensors(Path, Tensors);
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

} // namespace

Status saveCheckpoint(const Executor &E, const std::string &Dir, int64_t Step) {
  WEFT_RETURN_IF_ERROR(makeDir(Dir));
  WEFT_RETURN_IF_ERROR(
      writeState(E, Dir + "/model.safetensors", {{&Executor::param, ""}}));
  WEFT_RETURN_IF_ERROR(writeState(
      E, Dir + "/optimizer.safetensors",
      {{&Executor::adamM, ".exp_avg"}, {&Executor::adamV, ".exp_avg_sq"}}));
  std::ofstream Out(Dir + "/trainer_state.json", std::ios::trunc);
  Out << json{{"step", Step}}.dump() << "\n";
  Out.close();
  if (!Out)
    return Status::error("cannot write '" + Dir + "/trainer_state.json'");
  return Status::success();
}

Status saveGradients(const Executor &E, const std::string &Dir) {
  WEFT_RETURN_IF_ERROR(makeDir(Dir));
  return writeState(E, Dir + "/grads.safetensors", {{&Executor::grad, ""}});
}

Expected<int64_t> loadCheckpoint(Executor &E, const std::string &Path) {
  std::error_code EC;
  std::vector<std::string> Paths;
  fs::path Dir;
  if (fs::is_directory(Path, EC)) {
    Dir = Path;
    // A weft checkpoint is model + optimizer; otherwise every file (e.g. a
    // sharded Hugging Face checkpoint). grads.safetensors (--save-grads)
    // repeats the parameter names and is never read.
    if (fs::exists(Dir / "model.safetensors", EC)) {
      Paths.push_back((Dir / "model.safetensors").string());
      if (fs::exists(Dir / "optimizer.safetensors", EC))
        Paths.push_back((Dir / "optimizer.safetensors").string());
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
  std::vector<SafetensorsFile> Files;
  for (const std::string &F : Paths) {
    Expected<SafetensorsFile> File = SafetensorsFile::read(F);
    if (!File.ok())
      return File.status();
    Files.push_back(File.take());
  }
  const Program &P = E.program();
  bool HasOptimizer = false;
  for (size_t I = 0; I < P.Params.size(); ++I) {
    const ParamSpec &Spec = P.Params[I];
    Found F = lookup(Files, Spec.Name);
    if (!F.Tensor)
      return Status::error("checkpoint '" + Path +
                           "' has no tensor for parameter '" + Spec.Name +
                           "' (shape " + shapeString(Spec.Dims) + ")");
    WEFT_RETURN_IF_ERROR(loadInto(F, Spec.Name, Spec.Dims, P.Type, E.param(I)));
    HasOptimizer |= lookup(Files, Spec.Name + ".exp_avg").Tensor != nullptr;
  }
  if (HasOptimizer) {
    for (size_t I = 0; I < P.Params.size(); ++I) {
      const ParamSpec &Spec = P.Params[I];
      for (auto [Suffix, Out] :
           {std::pair<const char *, void *>{".exp_avg", E.adamM(I)},
            {".exp_avg_sq", E.adamV(I)}}) {
        Found F = lookup(Files, Spec.Name + Suffix);
        if (!F.Tensor)
          return Status::error("checkpoint '" + Path +
                               "' has optimizer state but no tensor '" +
                               Spec.Name + Suffix + "'");
        WEFT_RETURN_IF_ERROR(
            loadInto(F, Spec.Name + Suffix, Spec.Dims, P.Type, Out));
      }
    }
  }
  int64_t Step = 0;
  if (!Dir.empty() && fs::exists(Dir / "trainer_state.json", EC)) {
    std::ifstream In(Dir / "trainer_state.json");
    std::stringstream SS;
    SS << In.rdbuf();
    json J = json::parse(SS.str(), nullptr, false);
    if (J.is_discarded() || !J.is_object() || !J.contains("step") ||
        !J["step"].is_number_integer() || J["step"].get<int64_t>() < 0)
      return Status::error("'" + (Dir / "trainer_state.json").string() +
                           "' must be {\"step\": <non-negative integer>}");
    Step = J["step"].get<int64_t>();
  }
  return Step;
}

} // namespace weft
