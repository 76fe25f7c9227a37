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

#endif // WEFT_ATTRS_TD
