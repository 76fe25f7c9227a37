//===- CommPaths.cpp - the measured path table ----------------------------===//
#include "runtime/comm/CommPaths.h"

#include "program/JsonDepth.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

namespace weft {
namespace {
using nlohmann::json;

constexpr const char *kKinds[] = {"all_reduce", "all_gather", "reduce_scatter"};

const char *pathName(CommPath P) {
  return P == CommPath::Shm ? "shm" : P == CommPath::Hier ? "hier" : "mpi";
}
} // namespace

Expected<CommPathTable> CommPathTable::parse(const std::string &Text,
                                             const std::string &Where) {
  std::string Deep = jsonDepthError(Text, Where);
  if (!Deep.empty())
    return Status::error(Deep);
  json J = json::parse(Text, nullptr, /*allow_exceptions=*/false);
  if (J.is_discarded())
    return Status::error(Where + ": not valid JSON (a path table from "
                                 "weft-bench-comm --write-table)");
  if (!J.is_object())
    return Status::error(Where + ": not a JSON object (a path table from "
                                 "weft-bench-comm --write-table)");
  auto Fail = [&](const std::string &Key, const std::string &Why) {
    return Status::error(Where + ": key '" + Key + "' " + Why);
  };
  if (!J.contains("weft_comm_paths") || J["weft_comm_paths"] != 1)
    return Fail("weft_comm_paths", "must be 1 (the table's format version)");
  CommPathTable T;
  const json &R = J.contains("ranks") ? J["ranks"] : json();
  if (!R.is_number_integer() || R.get<int64_t>() < 2 ||
      R.get<int64_t>() > (int64_t(1) << 20))
    return Fail("ranks", "must be an integer from 2 to 2^20, got " + R.dump());
  T.Ranks = R.get<int>();
  for (const auto &[Key, V] : J.items()) {
    if (Key == "weft_comm_paths" || Key == "ranks" || Key == "measured")
      continue;
    bool Known = false;
    for (const char *K : kKinds)
      Known |= Key == K;
    if (!Known)
      return Fail(Key, "is not a collective of the table (all_reduce, "
                       "all_gather, reduce_scatter)");
    if (!V.is_array())
      return Fail(Key, "must be a list of [bytes, \"shm\" or \"mpi\"]");
    std::vector<std::pair<size_t, CommPath>> Steps;
    for (size_t I = 0; I < V.size(); ++I) {
      const json &E = V[I];
      std::string At = Key + "[" + std::to_string(I) + "]";
      if (!E.is_array() || E.size() != 2 || !E[0].is_number_unsigned() ||
          !E[1].is_string())
        return Fail(At, "must be [bytes, \"shm\", \"hier\" or \"mpi\"], got " +
                            E.dump());
      size_t Bytes = E[0].get<size_t>();
      std::string P = E[1].get<std::string>();
      if (P != "shm" && P != "hier" && P != "mpi")
        return Fail(At, "path must be \"shm\", \"hier\" or \"mpi\", got \"" +
                            P + "\"");
      if (!Steps.empty() && Bytes <= Steps.back().first)
        return Fail(At, "bytes " + std::to_string(Bytes) +
                            " must exceed the previous entry's " +
                            std::to_string(Steps.back().first));
      Steps.push_back({Bytes, P == "shm"    ? CommPath::Shm
                              : P == "hier" ? CommPath::Hier
                                            : CommPath::Mpi});
    }
    T.Entries[Key] = std::move(Steps);
  }
  return T;
}

std::optional<CommPath> CommPathTable::choose(const std::string &Kind,
                                              int GroupSize,
                                              size_t Bytes) const {
  if (GroupSize != Ranks)
    return std::nullopt;
  auto It = Entries.find(Kind);
  if (It == Entries.end())
    return std::nullopt;
  std::optional<CommPath> Chosen;
  for (const auto &[From, Path] : It->second)
    if (Bytes >= From)
      Chosen = Path;
  return Chosen;
}

std::string CommPathTable::describe() const {
  std::string Out;
  for (const auto &[Kind, Steps] : Entries) {
    Out += (Out.empty() ? "" : "; ") + Kind + ":";
    for (const auto &[From, Path] : Steps)
      Out += " " + std::string(pathName(Path)) + " from " +
             std::to_string(From) + " B";
  }
  return Out;
}

std::string CommPathTable::format(
    int Ranks,
    const std::map<std::string, std::vector<std::pair<size_t, CommPath>>>
        &Entries,
    const std::string &Measured) {
  // One line per collective, for people reading or editing the table.
  std::string Out =
      "{\"weft_comm_paths\": 1, \"ranks\": " + std::to_string(Ranks) +
      ",\n \"measured\": " + json(Measured).dump();
  for (const auto &[Kind, Steps] : Entries) {
    Out += ",\n " + json(Kind).dump() + ": [";
    for (size_t I = 0; I < Steps.size(); ++I)
      Out += (I ? ", [" : "[") + std::to_string(Steps[I].first) + ", \"" +
             pathName(Steps[I].second) + "\"]";
    Out += "]";
  }
  return Out + "}\n";
}

std::string commPathTableFile() {
  if (const char *Set = std::getenv("WEFT_COMM_TABLE"))
    return Set;
  std::string Dir;
  if (const char *Cache = std::getenv("XDG_CACHE_HOME"); Cache && *Cache)
    Dir = Cache;
  else if (const char *Home = std::getenv("HOME"); Home && *Home)
    Dir = std::string(Home) + "/.cache";
  if (Dir.empty())
    return "";
  std::string File = Dir + "/weft/comm-paths.json";
  return std::ifstream(File).good() ? File : "";
}

} // namespace weft
