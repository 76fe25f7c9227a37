//===- WeftInterfaces.td - op interfaces of weft ----------------*- tablegen -*-===//
#ifndef WEFT_INTERFACES_TD
#define WEFT_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Weft_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    An op that knows its vector-Jacobian product. Given the gradient of the loss
    with respect to each result (a null Value where a result does not reach the
    loss), `buildVjp` builds, at the builder's insertion point, ops computing the
    gradient with respect to each operand, and appends one Value per operand to
    `operandGrads` (null for operands without a gradient, e.g. token ids).
  }];
  let methods = [
    InterfaceMethod<
      "Builds the gradients of the operands from those of the results.",
      "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def Weft_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    An op that states how its operand and result dims relate (factors), so that
    sharding propagation and partitioning can treat it generically. See
    dialect/ShardingRule.h.
  }];
  let methods = [
    InterfaceMethod<"The op's factors and their dims.",
      "::weft::ShardingRule", "getShardingRule", (ins)>
  ];
}

def Weft_LocalizeOpInterface : OpInterface<"LocalizeOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    An op whose attributes describe the problem it computes (head counts,
    split sizes, a mean's denominator, the vocab or sequence range it holds).
    After weft-partition gives it local operand and result types, `localize`
    rewrites those attributes for this rank's shard of each factor, so the
    partitioner stays generic: a new op states its rule and its localization
    here, not in Partition.cpp.
  }];
  let methods = [
    InterfaceMethod<
      "Rewrites the op's attributes for the local shards of its factors.",
      "void", "localize",
      (ins "const ::weft::ShardingRule &":$rule,
           "const ::weft::FactorSplit &":$split)>
  ];
}

def Weft_SplitReductionOpInterface : OpInterface<"SplitReductionOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    An op that reduces over a factor and can still run when that factor is
    split, without gathering its operand (Megatron's vocab-parallel
    cross-entropy: local softmax statistics, one small all-gather, a local
    finish). weft-partition reshards the other operands as the rule asks and
    lets the op rewrite itself; a new op of this kind states its rewrite
    here, not in Partition.cpp.
  }];
  let methods = [
    InterfaceMethod<
      "The factor of its rule whose split the op handles itself.",
      "int64_t", "splitReductionFactor",
      (ins "const ::weft::ShardingRule &":$rule)>,
    InterfaceMethod<
      "Builds, at the builder's point and on the local operands, ops "
      "computing the op's result when that factor is split over `axes` "
      "(`shards` ranks); returns the value that replaces the result. "
      "`shared` holds values that ops rewritten earlier built alike (a "
      "cross-entropy's gathered statistics serve its gradient).",
      "::mlir::FailureOr<::mlir::Value>", "buildSplitReduction",
      (ins "::mlir::OpBuilder &":$b, "const ::weft::ShardingRule &":$rule,
           "::llvm::ArrayRef<::llvm::StringRef>":$axes, "int64_t":$shards,
           "::weft::SharedValues &":$shared)>
  ];
}

#endif // WEFT_INTERFACES_TD
