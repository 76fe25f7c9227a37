//===- PeriodicCheckpoints.h - Checkpoints every K steps, kept N -*- C++
//-*-===//
//
// Root/step-<8 digits>/ holds the checkpoint of a step. A save copies the
// state (the host copy PyTorch DCP's async save makes) and writes it on a
// background thread while training goes on, so training stalls only for
// the copy; the next save, or finish(), waits for it. Rank 0, once a
// checkpoint's manifest is written, removes all but the newest Keep
// complete checkpoints and any incomplete one older than the newest.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_PERIODICCHECKPOINTS_H
#define WEFT_RUNTIME_PERIODICCHECKPOINTS_H

#include "runtime/Executor.h"
#include "runtime/checkpoint/Checkpoint.h"

#include <memory>

#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace weft {

/// "step-00000042"
std::string checkpointDirName(int64_t Step);

/// The checkpoints under Root that have a manifest.json, newest first, as
/// (step, path): Root/step-* by their names' steps and Root itself (a --save
/// directory) by its manifest's. Loading verifies them.
std::vector<std::pair<int64_t, std::string>>
listCheckpoints(const std::string &Root);

class PeriodicCheckpoints {
public:
  /// Keep >= 1 complete checkpoints; WaitSeconds bounds rank 0's wait for
  /// the other ranks' files. Verbose: rank 0 prints a line per save (the
  /// copy's time, then the background write's).
  PeriodicCheckpoints(std::string Root, int64_t Keep, double WaitSeconds,
                      bool Verbose = false)
      : Root(std::move(Root)), Keep(Keep), WaitSeconds(WaitSeconds),
        Verbose(Verbose) {}
  ~PeriodicCheckpoints();
  PeriodicCheckpoints(const PeriodicCheckpoints &) = delete;
  PeriodicCheckpoints &operator=(const PeriodicCheckpoints &) = delete;

  /// Collective. Waits for the previous write (returning its error), then
  /// snapshots E at Step and starts writing Root/step-<Step>.
  Status save(const Executor &E, int64_t Step);
  /// Collective: waits for the write in flight.
  Status finish(const Executor &E);
  /// The last step a save was started for (-1: none).
  int64_t lastStep() const { return LastStep; }

private:
  Status join();

  std::string Root;
  int64_t Keep;
  double WaitSeconds;
  bool Verbose;
  std::thread Writer;
  std::shared_ptr<CheckpointSnapshot> Last; // its copies are reused
  Status WriteStatus = Status::success();
  int64_t LastStep = -1;
};

} // namespace weft

#endif // WEFT_RUNTIME_PERIODICCHECKPOINTS_H
