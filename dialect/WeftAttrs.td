//===- WeftAttrs.td - the sharding attribute ---------------------*- tablegen -*-===//
#ifndef WEFT_ATTRS_TD
#define WEFT_ATTRS_TD

include "dialect/WeftDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Weft_ShardingAttr : AttrDef<Weft_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a tensor is laid out over a device mesh";
  let description = [{
    Per tensor dimension, the ordered mesh axes it is split over (`[]`:
    replicated along that dim); `partial`, the axes over which each rank holds a
    pending partial sum; `blocks`, per dim (empty: all 1), how many equal blocks
    the dim holds, each split separately (GPT-2's fused QKV weight is split with
    3 blocks so that each tensor-parallel rank holds a slice of q, k and v).
    DTensor's Shard/Replicate/Partial and GSPMD's tiles + partial, in one
    attribute:

    ```mlir
    #weft.sharding<dims = [["dp"], [], ["tp"]]>
    #weft.sharding<dims = [[], []], partial = ["tp"]>
    #weft.sharding<dims = [[], ["tp"]], blocks = [1, 3]>
    ```
  }];
  let parameters = (ins
    "::mlir::ArrayAttr":$dims,
    DefaultValuedParameter<"::mlir::ArrayAttr",
        "::mlir::ArrayAttr::get($_ctxt, {})">:$partial,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$blocks
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// The axes of dim d, as strings.
    ::llvm::SmallVector<::llvm::StringRef> axesOf(int64_t d) const;
    /// Blocks of dim d (1 when absent).
    int64_t blocksOf(int64_t d) const;
    /// The partial-sum axes, as strings.
    ::llvm::SmallVector<::llvm::StringRef> partialAxes() const;
    bool isReplicated() const;
    /// A sharding of `rank` dims, all replicated.
    static ShardingAttr replicated(::mlir::MLIRContext *ctx, int64_t rank);
    /// Build from per-dim axes, partial axes and blocks.
    static ShardingAttr get(::mlir::MLIRContext *ctx,
        ::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>> dims,
        ::llvm::ArrayRef<::llvm::StringRef> partial,
        ::llvm::ArrayRef<int64_t> blocks);
  }];
}

def Weft_TpRoleAttr : AttrDef<Weft_Dialect, "TpRole"> {
  let mnemonic = "tp_role";
  let summary = "how tensor parallelism splits a parameter (Megatron's roles)";
  let description = [{
    A parameter's role in a tensor-parallel layer, read from the graph's
    structure by `weft-infer-tp-roles` (or written by a frontend or a user):
    `column` (a linear layer whose output features are split: q, k, v, an
    MLP's up projection, and their biases), `row` (one whose input features
    are split and whose output is summed: attention's output projection, an
    MLP's down projection), `vocab` (the token embedding and the LM head,
    split over the vocabulary) or `replicated` (whole on every rank, never
    inferred over). `dim` is the parameter's dim that the role splits;
    `blocks` how many equal blocks that dim holds, each split separately
    (GPT-2's fused QKV: 3). `--layout megatron` splits each parameter over
    `tp` by its role.

    ```mlir
    %w = weft.param "h.0.attn.c_attn.weight" {weft.tp_role =
        #weft.tp_role<kind = "column", dim = 1, blocks = 3>} : tensor<64x192xf32>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"column, row, vocab or replicated">:$kind,
    DefaultValuedParameter<"int64_t", "0">:$dim,
    DefaultValuedParameter<"int64_t", "1">:$blocks
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether the role splits the parameter (not `replicated`).
    bool splits() const { return getKind() != "replicated"; }
  }];
}

def Weft_PipelineScheduleAttr : AttrDef<Weft_Dialect, "PipelineSchedule"> {
  let mnemonic = "schedule";
  let summary = "a pipeline schedule: its kind, chunks, and a user's runs";
  let description = [{
    What weft-cut-stages writes on each stage function (`weft.pipeline_schedule`)
    and emission and `--explain` read: `kind` is `gpipe`, `1f1b`,
    `interleaved` (with `virtual_stages` >= 2 model chunks per stage),
    `zb-h1` (backwards split into input and weight gradients) or `custom`
    (a user's order: `runs`, each stage's runs separated by `|`, "F0.1" for
    micro-batch 0's forward of chunk 1, "W0" its weight gradients). The
    schedule library (program/PipelineSchedule.h) verifies it.

    ```mlir
    #weft.schedule<kind = "1f1b">
    #weft.schedule<kind = "interleaved", virtual_stages = 2>
    #weft.schedule<kind = "custom", runs = "F0 F1 B0 B1|F0 B0 F1 B1">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"gpipe, 1f1b, interleaved, zb-h1 or custom">:$kind,
    DefaultValuedParameter<"int64_t", "1">:$virtual_stages,
    StringRefParameter<"a custom schedule's runs", "\"\"">:$runs
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The compact spelling the schedule library reads ("interleaved:2",
    /// "custom:F0 B0|...").
    std::string spec() const;
    /// The attribute of a compact spelling (one parsePipelineSchedule
    /// reads), or null.
    static PipelineScheduleAttr fromSpec(::mlir::MLIRContext *ctx,
                                         ::llvm::StringRef spec);
  }];
}

#endif // WEFT_ATTRS_TD
