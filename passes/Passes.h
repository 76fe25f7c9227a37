//===- Passes.h - weft passes and pipelines ---------------------*- C++ -*-===//
#ifndef WEFT_PASSES_PASSES_H
#define WEFT_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <optional>
#include <string>

namespace weft {
#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Everything that selects the passes of the training pipeline: the one
/// options struct weft-compile fills from its flags and weft-opt's
/// `weft-training-pipeline` from its pipeline options.
struct TrainingPipelineOptions {
  WeftInsertAdamWOptions optimizer;
  /// An empty mesh: one rank (no layout, propagation or partition passes).
  WeftApplyLayoutOptions layout;
  int64_t bucketBytes = 25 * 1048576; // data-parallel gradient buckets
  int64_t zeroBucketBytes = 0;        // ZeRO gather/reduce-scatter buckets
  int64_t prefetchOps = 16;           // ZeRO-3 gathers, ops ahead
  /// Micro-batches per step whose gradients accumulate; the forward model
  /// is built for one micro-batch (weft-accumulate-gradients).
  int64_t microbatches = 1;
  /// With micro-batches, ZeRO-3 gathers each parameter once per step (false:
  /// once per micro-batch).
  bool gatherParamsOnce = true;
  /// Activations' compute dtype: f32, or bf16 over f32 master weights
  /// (weft-mixed-precision).
  std::string computeDtype = "f32";
  /// Activation recomputation (weft-recompute): none, selective or full.
  std::string recompute = "none";
  /// Pipeline stages (weft-cut-stages): its options; stages > 1 cuts them
  /// along mesh axis `axis`.
  WeftCutStagesOptions pipeline;
  /// A forward-only program (weft-return-logits): no autodiff, optimizer
  /// or micro-batches; it returns the logits.
  bool forwardOnly = false;
  /// A masked loss (weft-masked-lm) instead of next-token cross-entropy:
  /// with its masking recipe, or on given targets (masking.givenTargets).
  bool maskedLm = false;
  WeftMaskedLmOptions masking;
  /// Rows pack documents ending with this id (weft-pack-documents); -1:
  /// one sequence per row.
  int64_t documents = -1;
  /// Padded rows: the documents are the runs of each sample's attention
  /// mask (weft-pack-documents attention-mask=true).
  bool attentionMask = false;
  std::string output; // emit the program here, if set
};

/// The stages of the pipeline in order, as --emit-mlir names them; a stage
/// of a one-rank pipeline may add no pass.
extern const char *const kTrainingStages[];
extern const int kNumTrainingStages;

/// Adds the passes that turn an imported ONNX graph into weft's ops: the
/// raise onto fused ops, then the generic path for what is left (no-ops on
/// other modules). weft-compile's "forward" stage and weft-plan share it.
void addOnnxLowering(mlir::OpPassManager &pm);

/// Adds the passes of stage `stage` (an index into kTrainingStages).
void addTrainingStage(mlir::OpPassManager &pm, int stage,
                      const TrainingPipelineOptions &options);

/// The whole lowering of a forward model to a runtime program: every stage
/// in order, then emission when `output` is set. weft-compile runs exactly
/// this (in two pass managers when --emit-mlir prints a stage between).
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Registers every pass and the `weft-training-pipeline` for weft-opt.
void registerWeftPassesAndPipelines();

/// weft's bound on a tensor's dimensions and element count (the runtime's
/// MaxNumElements): past it, byte sizes and arena offsets could overflow
/// int64.
constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

/// Emits an error naming the first tensor value (result or block argument)
/// under `root` that has a dynamic dimension, a dimension past 2^48 or more
/// than 2^48 elements, and fails. weft-compile calls it on its input and
/// weft-plan-memory on its function, so size arithmetic cannot overflow.
mlir::LogicalResult checkTensorSizes(mlir::Operation *root);

/// Bytes of a static tensor type within kMaxTensorElements; std::nullopt for
/// any other type.
std::optional<int64_t> tensorBytes(mlir::Type type);
} // namespace weft

#endif // WEFT_PASSES_PASSES_H
