//===- PeriodicCheckpoints.cpp - Checkpoints every K steps, kept N --------===//
#include "runtime/checkpoint/PeriodicCheckpoints.h"
#include "runtime/DurableFile.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointManifest.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace fs = std::filesystem;

namespace weft {

namespace {

/// The step of a "step-<digits>" name, or -1.
int64_t stepOfName(const std::string &Name) {
  if (Name.rfind("step-", 0) != 0 || Name.size() < 6 || Name.size() > 5 + 18)
    return -1;
  int64_t S = 0;
  for (size_t I = 5; I < Name.size(); ++I) {
    if (Name[I] < '0' || Name[I] > '9')
      return -1;
    S = S * 10 + (Name[I] - '0');
  }
  return S;
}

/// Step directories under Root, newest first, with whether each is complete.
struct StepDir {
  int64_t Step;
  fs::path Path;
  bool Complete;
};
std::vector<StepDir> stepDirs(const std::string &Root) {
  std::vector<StepDir> R;
  std::error_code EC;
  for (const fs::directory_entry &D : fs::directory_iterator(Root, EC)) {
    int64_t Step = stepOfName(D.path().filename().string());
    if (Step >= 0 && D.is_directory(EC))
      R.push_back({Step, D.path(), fs::exists(D.path() / "manifest.json", EC)});
  }
  std::sort(R.begin(), R.end(),
            [](const StepDir &A, const StepDir &B) { return A.Step > B.Step; });
  return R;
}

/// Removes a checkpoint directory: its manifest first (durably), so that a
/// removal cut short leaves an incomplete checkpoint, never a wrong one.
Status removeCheckpoint(const fs::path &Dir) {
  std::error_code EC;
  fs::remove(Dir / "manifest.json", EC);
  if (EC)
    return Status::error("cannot remove '" + (Dir / "manifest.json").string() +
                         "': " + EC.message());
  WEFT_RETURN_IF_ERROR(syncDirectory(Dir.string()));
  fs::remove_all(Dir, EC);
  if (EC)
    return Status::error("cannot remove '" + Dir.string() +
                         "': " + EC.message());
  return Status::success();
}

Status rotate(const std::string &Root, int64_t Keep) {
  int64_t Kept = 0;
  bool SeenComplete = false;
  for (const StepDir &D : stepDirs(Root)) {
    bool Drop = D.Complete ? Kept >= Keep : SeenComplete;
    Kept += D.Complete;
    SeenComplete |= D.Complete;
    if (Drop)
      WEFT_RETURN_IF_ERROR(removeCheckpoint(D.Path));
  }
  return Status::success();
}

double secondsSince(std::chrono::steady_clock::time_point T0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - T0)
      .count();
}

} // namespace

std::string checkpointDirName(int64_t Step) {
  char Buf[32];
  std::snprintf(Buf, sizeof(Buf), "step-%08lld", (long long)Step);
  return Buf;
}

std::vector<std::pair<int64_t, std::string>>
listCheckpoints(const std::string &Root) {
  std::vector<std::pair<int64_t, std::string>> R;
  for (const StepDir &D : stepDirs(Root))
    if (D.Complete)
      R.push_back({D.Step, D.Path.string()});
  // Root itself (a --save directory) by its manifest's step; one that does
  // not parse comes last, and loading it reports why.
  const std::string Manifest = (fs::path(Root) / "manifest.json").string();
  std::error_code EC;
  if (fs::exists(Manifest, EC)) {
    int64_t Step = -1;
    if (Expected<std::string> Text = readTextFile(Manifest); Text.ok())
      if (Expected<weft::Manifest> M = parseManifest(*Text, Manifest); M.ok())
        Step = M->Step;
    R.push_back({Step, Root});
  }
  std::stable_sort(R.begin(), R.end(), [](const auto &A, const auto &B) {
    return A.first > B.first;
  });
  return R;
}

PeriodicCheckpoints::~PeriodicCheckpoints() {
  if (Writer.joinable())
    Writer.join();
}

Status PeriodicCheckpoints::join() {
  if (Writer.joinable())
    Writer.join();
  Status S = WriteStatus;
  WriteStatus = Status::success();
  return S;
}

Status PeriodicCheckpoints::save(const Executor &E, int64_t Step) {
  Status S = join();
  const fs::path Dir = fs::path(Root) / checkpointDirName(Step);
  // A directory of this step left by an earlier, failed attempt of the run
  // is rewritten from scratch; rank 0 clears it before anyone writes.
  if (S.ok() && E.rank() == 0) {
    std::error_code EC;
    fs::create_directories(Root, EC);
    if (EC)
      S = Status::error("cannot create '" + Root + "': " + EC.message());
    else if (fs::exists(Dir, EC))
      S = removeCheckpoint(Dir);
  }
  WEFT_RETURN_IF_ERROR(checkpointBarrier(E, S));
  auto T0 = std::chrono::steady_clock::now();
  std::vector<std::vector<char>> Recycled;
  if (Last)
    Recycled = std::move(Last->Copies);
  Expected<CheckpointSnapshot> Made =
      snapshotCheckpoint(E, Step, std::move(Recycled));
  if (!Made.ok())
    return Made.status();
  auto Snap = std::make_shared<CheckpointSnapshot>(Made.take());
  Last = Snap;
  LastStep = Step;
  const bool Root0 = E.rank() == 0;
  if (Verbose && Root0)
    std::printf("checkpoint: step %lld copied in %.3f s, writing %s in the "
                "background\n",
                (long long)Step, secondsSince(T0), Dir.string().c_str());
  Writer = std::thread([this, Snap, Dir, Root0] {
    auto T1 = std::chrono::steady_clock::now();
    Status W = writeCheckpoint(*Snap, Dir.string(), WaitSeconds);
    if (W.ok() && Root0)
      W = rotate(Root, Keep);
    if (W.ok() && Verbose && Root0)
      std::printf("checkpoint: step %lld complete after %.3f s\n",
                  (long long)Snap->Step, secondsSince(T1));
    WriteStatus = W;
  });
  return Status::success();
}

Status PeriodicCheckpoints::finish(const Executor &E) {
  return checkpointBarrier(E, join());
}

} // namespace weft
