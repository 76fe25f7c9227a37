//===- TrainingFlags.h - the training flags, checked once -------*- C++ -*-===//
//
// The flags a user writes for the training pipeline, as written (weft-compile's
// command line, weft-opt's `weft-training-pipeline` options, weft-plan's
// shared ones), and the one function that checks them and maps them onto
// TrainingPipelineOptions: a bad value gets the same message from every
// tool, and no tool parses a mesh or a schedule on its own.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_TRAININGFLAGS_H
#define WEFT_PASSES_TRAININGFLAGS_H

#include "passes/Passes.h"

#include <set>
#include <string>

namespace weft {

struct TrainingFlags {
  // AdamW and its schedule.
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
  std::string schedule = "constant";
  int64_t warmupSteps = 0, totalSteps = 0;
  double minLr = 0.0;
  // The layout.
  std::string mesh; // empty: one rank
  std::string layout = "data";
  int64_t zero = 0;
  bool sequenceParallel = false;
  /// How attention sees a sequence split over cp: all-gather or all-to-all.
  std::string contextParallel = "all-gather";
  double bucketMb = 25.0, zeroBucketMb = 0.0;
  int64_t prefetchOps = 16;
  int64_t microbatches = 1;
  std::string zero3Gather = "step";
  std::string dtype = "f32";
  std::string recompute = "none";
  // Pipelines: --stages, --pipeline-schedule (a name or a .json file's
  // compact spec, already read), --virtual-stages.
  std::string stages, pipelineSchedule = "1f1b";
  int64_t virtualStages = 1;
  // What the program computes.
  bool forwardOnly = false;
  std::string loss = "next-token";
  int64_t classes = 0;
  int64_t maskToken = -1;
  double maskProb = 0.15;
  int64_t maskSeed = 0;
  /// --documents: the id ending each document of a packed row (-1: none).
  int64_t documents = -1;
  /// --attention-mask: padded rows, each sample's mask given to weft-run.
  bool attentionMask = false;
  std::string output;
  /// The flags the user gave (by name, without dashes): a flag about
  /// something not asked for is refused, not ignored.
  std::set<std::string> given;
  /// The model is a model.onnx (--loss mse, --classes need one), and its
  /// name as the user gave it, for messages (empty: "the model").
  bool onnxModel = false;
  std::string model;
};

/// "" when --loss and --classes are valid for this model, else the
/// message (weft-compile, weft-opt and weft-plan share it).
std::string checkLossFlags(const TrainingFlags &f);

/// Checks every flag and, when all are valid, fills `out`; returns "" or
/// the message naming the flag, its value and what is accepted.
std::string buildTrainingOptions(const TrainingFlags &f,
                                 TrainingPipelineOptions &out);

} // namespace weft

#endif // WEFT_PASSES_TRAININGFLAGS_H
