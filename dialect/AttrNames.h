//===- AttrNames.h - the names of the attributes passes exchange -*- C++
//-*-===//
//
// One place for the discardable `weft.*` attributes that frontends and passes
// write and later passes read; WeftAttrVerify.cpp verifies each of them and
// refuses any other `weft.*` name (a misspelt one would otherwise be ignored).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_DIALECT_ATTRNAMES_H
#define WEFT_DIALECT_ATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace weft::attrname {

// Function attributes.
/// The model's name (a string), for the program file.
inline constexpr llvm::StringLiteral kModel = "weft.model";
/// The optimizer's hyper-parameters (a dictionary), by weft-insert-adamw.
inline constexpr llvm::StringLiteral kOptimizer = "weft.optimizer";
/// The activation arena's size in bytes (an integer), by weft-plan-memory.
inline constexpr llvm::StringLiteral kArenaBytes = "weft.arena_bytes";
/// The part of a pipeline stage's arena instanced per micro-batch in flight
/// (an integer, at most the arena's size), by weft-plan-memory: the values
/// a micro-batch keeps between its runs lie below it, the rest (the
/// step's values and each run's scratch) past it, once.
inline constexpr llvm::StringLiteral kSlotBytes = "weft.slot_bytes";
/// The mesh the function's shardings and collectives refer to (a symbol
/// naming a weft.mesh), by weft-apply-layout.
inline constexpr llvm::StringLiteral kMesh = "weft.mesh";
/// Micro-batches per step (a positive integer), by
/// weft-accumulate-gradients: the function computes one micro-batch.
inline constexpr llvm::StringLiteral kMicrobatches = "weft.microbatches";
/// How a masked-language-model program hides tokens (a dictionary of
/// mask_token, mask_prob and seed), by weft-masked-lm.
inline constexpr llvm::StringLiteral kMaskedLm = "weft.masked_lm";
/// On a function training packed documents: {eos, given_targets}, the token
/// id that ends each one and whether the targets are the caller's
/// (weft-pack-documents); attention, positions and the loss's targets
/// follow the documents the runtime finds in each step's tokens.
inline constexpr llvm::StringLiteral kDocuments = "weft.documents";
/// Load-balanced context parallelism (an even integer 2N, by
/// weft-apply-layout): every sequence is held as 2N equal chunks in the
/// order 0, 2N-1, 1, 2N-2, ..., so that rank i of the N along cp holds
/// chunks i and 2N-1-i and causal attention's work is even. A position is
/// that of its chunk in the sequence; the runtime stores each step's
/// tokens in this order, and rope, positions, attention and dropout read
/// the positions through it.
inline constexpr llvm::StringLiteral kSeqChunks = "weft.seq_chunks";
/// How context parallelism's attention sees the sequence (by
/// weft-apply-layout, on a function with a cp axis): "all-to-all" moves cp
/// from the sequence to the heads around attention (DeepSpeed's Ulysses);
/// "ring" passes key and value blocks around the cp ranks, merged by an
/// online softmax. Absent: attention all-gathers the keys and values.
inline constexpr llvm::StringLiteral kContextParallel = "weft.context_parallel";
/// The vocabulary (the token embedding table's rows, a positive integer) of
/// a forward-only function, by weft-return-logits: the program's bound on
/// token ids, whatever the function returns.
inline constexpr llvm::StringLiteral kVocab = "weft.vocab";
/// On a training function whose loss reads labels or float targets, not
/// token ids (a classifier's or a regression's), by the ONNX import: the
/// token embedding table's rows (a positive integer), the program's bound
/// on token ids; a cross-entropy's classes bound the labels (program
/// `classes`).
inline constexpr llvm::StringLiteral kLabels = "weft.labels";

/// On an op: the program fragment it belongs to ("prologue" or
/// "optimizer", by weft-accumulate-gradients; every op of a pipeline stage's
/// function, by weft-cut-stages, which marks "weight" the weight gradients
/// of a split backward); unmarked ops fall in forward, backward or
/// optimizer by position (weft-emit-program).
inline constexpr llvm::StringLiteral kFragment = "weft.fragment";
/// On an op of a pipeline stage holding several model chunks (interleaved
/// schedules): the stage's local chunk whose forward or backward fragment
/// it belongs to (absent: 0), by weft-cut-stages.
inline constexpr llvm::StringLiteral kChunk = "weft.chunk";
/// On a weft.param: the model layer it belongs to (-1: the embeddings,
/// numLayers: the final norm and head), set by the frontend;
/// weft-cut-stages places each param's stage by it, and every op by
/// dataflow from the params.
inline constexpr llvm::StringLiteral kLayer = "weft.layer";
/// On a weft.param of a pipeline stage: a copy of a parameter another stage
/// trains, read here and received updated once per step (weft-cut-stages).
inline constexpr llvm::StringLiteral kReplica = "weft.replica";
/// On a stage's function (weft-cut-stages): its index, the stage count, the
/// mesh axis they lie on, and the schedule (a #weft.schedule).
inline constexpr llvm::StringLiteral kStage = "weft.stage";
inline constexpr llvm::StringLiteral kNumStages = "weft.num_stages";
inline constexpr llvm::StringLiteral kPipelineAxis = "weft.pipeline_axis";
inline constexpr llvm::StringLiteral kPipelineSchedule =
    "weft.pipeline_schedule";
/// On a stage's function: the model layers it holds, as "0-8" (its chunks'
/// separated by commas: "0-1,4-5").
inline constexpr llvm::StringLiteral kStageLayers = "weft.stage_layers";
/// On a weft.constant the ONNX import computed from the graph's
/// attention_mask input: the constant is its value when every key is a
/// token, this (a dense attribute of the constant's type) its value when
/// every key is padding, and each element follows its own row's and key's
/// mask value (frontends/onnx/PaddingMask.h). weft-raise-onnx reads it
/// into an attention's key_padding; any other use is refused.
inline constexpr llvm::StringLiteral kIfPadding = "weft.if_padding";
/// On a weft.constant of zeros [batch, seq] the ONNX import puts where the
/// graph's token_type_ids input indexes a table (a unit attribute): the
/// ids are the step's, not these; weft-raise-onnx makes the lookup a
/// position_embedding with token_types, and refuses any other use.
inline constexpr llvm::StringLiteral kTokenTypes = "weft.token_types";

// Names a forward-only program gives its tensors (format version 8).
/// On a function argument: the program input it is (a non-empty string;
/// a float tensor the caller gives by name, `weft-run --input NAME=FILE`),
/// by a frontend (the ONNX import of a graph of float inputs). Arguments
/// without it are the token ids and targets, by position.
inline constexpr llvm::StringLiteral kInput = "weft.input";
/// On a function result: the program output it is (a non-empty string),
/// written by `weft-run --output NAME=FILE`. Without it: the logits or an
/// encoder's hidden states.
inline constexpr llvm::StringLiteral kOutput = "weft.output";

// Shardings (#weft.sharding), by weft-apply-layout and weft-propagate-sharding.
/// On a param or a function argument: how its value is laid out.
inline constexpr llvm::StringLiteral kSharding = "weft.sharding";
/// On a collective (all_reduce, all_gather, reduce_scatter): a unit
/// attribute, by weft-bucket-gradients and weft-prefetch-params: the
/// collective starts where it stands and is awaited before its result's
/// first use (the program's *_start and wait), so its input stays live
/// until then (weft-plan-memory).
inline constexpr llvm::StringLiteral kAsync = "weft.async";
/// On an all-gather (a unit attribute, by weft-regather-activations): it
/// gathers again, for the backward, a forward activation whose gathered
/// copy the forward does not keep.
inline constexpr llvm::StringLiteral kRegather = "weft.regather";
/// On a weft.adamw: the mesh axes its parameter's optimizer state is split
/// over (a list of axis names of the mesh in scope), by weft-partition;
/// the update gathers the parameter over them (ZeRO).
inline constexpr llvm::StringLiteral kShardAxes = "weft.shard_axes";
/// On a weft.param: its tensor-parallel role (a #weft.tp_role), by
/// weft-infer-tp-roles from the graph's structure, or by a frontend or a
/// user; weft-apply-layout's megatron layout splits by it.
inline constexpr llvm::StringLiteral kTpRole = "weft.tp_role";
/// On an op: one sharding per result.
inline constexpr llvm::StringLiteral kShardings = "weft.shardings";
/// On a param: how its stored value, gradient and Adam state are laid out
/// (ZeRO), as the layout asks and, after weft-partition, as stored.
inline constexpr llvm::StringLiteral kStorage = "weft.storage";
inline constexpr llvm::StringLiteral kGradStorage = "weft.grad_storage";
inline constexpr llvm::StringLiteral kStateStorage = "weft.state_storage";
inline constexpr llvm::StringLiteral kStorageSharding = "weft.storage_sharding";
inline constexpr llvm::StringLiteral kGradStorageSharding =
    "weft.grad_storage_sharding";
inline constexpr llvm::StringLiteral kStateStorageSharding =
    "weft.state_storage_sharding";
/// On a param after weft-partition: its global shape (dense i64 array).
inline constexpr llvm::StringLiteral kGlobalShape = "weft.global_shape";
/// On a param: the rows (dim 0) it has in the model and its checkpoints;
/// the rows past them are padding weft-pad-vocab added so that tp divides
/// a vocabulary (zeros, which no lookup reads and no loss counts).
inline constexpr llvm::StringLiteral kLogicalRows = "weft.logical_rows";

/// On an op after weft-plan-memory: each result's arena offset in bytes
/// (dense i64 array, one per result).
inline constexpr llvm::StringLiteral kOffsets = "weft.offsets";

} // namespace weft::attrname

#endif // WEFT_DIALECT_ATTRNAMES_H
