//===- WeftGenericOps.td - ops of graphs no fused op covers -*- tablegen -*-===//
//
// The generic path (issue 13, docs/design.md decision 20): what
// weft-raise-onnx leaves of an imported graph is lowered onto these ops by
// weft-lower-onnx-generic. Each has a shape rule (its verifier or inferred
// type), a factor sharding rule and a VJP, so any graph built of them
// differentiates and shards like the fused ops; the kernels are plain loops,
// not the fused ops' fast ones. Broadcasting is NumPy's (and ONNX's): shapes
// align at the right, and a dim of 1 stretches.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_GENERIC_OPS_TD
#define WEFT_GENERIC_OPS_TD

// A generic op whose result type is written, not inferred (reshape,
// broadcast, reduce): weft-partition gives the result its local shape, which
// no attribute would still describe.
class Weft_GenericShapedOp<string mnemonic>
    : Weft_Op<mnemonic, [Pure,
          DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>,
          DeclareOpInterfaceMethods<Weft_VjpOpInterface>]> {
  let arguments = (ins Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
}

def Weft_PointwiseOp : Weft_ElementwiseForwardOp<"pointwise"> {
  let summary = "y = fn(x), or fn(x, scalar), elementwise";
  let description = [{
    `fn` is one of neg, exp, log, sqrt, reciprocal, tanh, sigmoid, relu,
    erf, sin, cos and abs, the masks not (1 where x is 0) and isnan (no
    gradient), or, with `scalar` c: add (x + c), sub (x - c), rsub (c - x), mul
    (x * c), div (x / c), rdiv (c / x) and pow (x ^ c). An ONNX Add, Mul,
    Div or Pow with a finite one-element constant operand lowers here, the
    constant becoming the attribute (no buffer, no broadcast).

    ```mlir
    %y = weft.pointwise %x {fn = "pow", scalar = 2.0} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$x, StrAttr:$fn,
                   OptionalAttr<F64Attr>:$scalar);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_PointwiseGradOp : Weft_ElementwiseOp<"pointwise_grad"> {
  let summary = "dx = dy * fn'(x) for weft.pointwise of the same fn and scalar";
  let description = [{
    Derivatives as PyTorch's autograd takes them where the function has a
    kink: relu'(0) = 0.
  }];
  let arguments = (ins Weft_FloatTensor:$x, Weft_FloatTensor:$dy,
                   StrAttr:$fn, OptionalAttr<F64Attr>:$scalar);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_BinaryOp : Weft_ForwardOp<"binary"> {
  let summary = "y = lhs fn rhs with broadcasting (fn: add, sub, mul, div, "
                "pow, or a mask: eq, lt, le, gt, ge, and, or)";
  let description = [{
    A mask fn computes 1 where true and 0 where false (`and` and `or` read
    a nonzero operand as true): ONNX's comparisons and boolean logic, whose
    bool tensors the generic path holds as float masks. A mask has no
    gradient.

    ```mlir
    %y = weft.binary %x, %s {fn = "div"}
        : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$lhs, Weft_FloatTensor:$rhs,
                   StrAttr:$fn);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_BinaryGradOp : Weft_ComputeOp<"binary_grad"> {
  let summary = "the gradient of weft.binary's operand `operand`, summed over "
                "the dims it was broadcast along";
  let description = [{
    `dy` has the broadcast shape; the result has the shape of operand
    `operand` (0: lhs, 1: rhs). Its broadcast dims are summed, so a split
    one leaves a partial sum (its factor is absent from the result).
  }];
  let arguments = (ins Weft_FloatTensor:$lhs, Weft_FloatTensor:$rhs,
                   Weft_FloatTensor:$dy, StrAttr:$fn, I64Attr:$operand);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_SelectOp : Weft_ForwardOp<"select"> {
  let summary = "y = cond != 0 ? a : b, with broadcasting (ONNX Where)";
  let description = [{
    The condition is a float tensor read as a mask: an element that is not
    0 (NaN included) picks `a`, 0 picks `b`. ONNX's boolean condition is
    folded at import and arrives as a constant of 0s and 1s. The unpicked
    operand is never read, so `Where(mask, scores, -inf)` is exact where a
    blend `mask * a + (1 - mask) * b` would make NaNs. The condition has no
    gradient.

    ```mlir
    %y = weft.select %mask, %scores, %ninf
        : (tensor<8x8xf32>, tensor<2x4x8x8xf32>, tensor<f32>)
          -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$cond, Weft_FloatTensor:$a,
                   Weft_FloatTensor:$b);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_SelectGradOp : Weft_Op<"select_grad", [Pure,
    DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>]> {
  let summary = "the gradient of weft.select's operand `operand`: dy where "
                "it was picked, summed over the dims it was broadcast along";
  let description = [{
    `operand` 0 is `a` (dy where cond != 0), 1 is `b` (dy where cond is 0).
    The result has that operand's shape, which broadcasts to dy's; a split
    stretched dim leaves a partial sum (its factor is absent from the
    result).

    ```mlir
    %da = weft.select_grad %mask, %dy {operand = 0 : i64}
        : (tensor<8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$cond, Weft_FloatTensor:$dy,
                   I64Attr:$operand);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_BroadcastOp : Weft_GenericShapedOp<"broadcast"> {
  let summary = "x stretched to the result's shape (ONNX Expand)";
  let description = [{
    ```mlir
    %y = weft.broadcast %x : tensor<8x1xf32> to tensor<2x8x64xf32>
    ```
  }];
}

def Weft_ReduceOp : Weft_GenericShapedOp<"reduce"> {
  let summary = "x summed into the result's shape, which broadcasts to x's";
  let description = [{
    The adjoint of weft.broadcast: every element of x adds into the result
    element it would be broadcast from. A mean is this sum divided by the
    count (weft.pointwise div), so a split reduced dim leaves a partial sum
    and the divisor stays the global count.

    ```mlir
    %s = weft.reduce %x : tensor<2x8x64xf32> to tensor<2x8x1xf32>
    ```
  }];
}

def Weft_ReshapeOp : Weft_GenericShapedOp<"reshape"> {
  let summary = "the same elements, row-major, in the result's shape";
  let description = [{
    Dims equal at the front and at the back keep their factors (they may be
    split); the dims between are pinned (never split).

    ```mlir
    %h = weft.reshape %x : tensor<2x8x64xf32> to tensor<2x8x4x16xf32>
    ```
  }];
}

def Weft_TransposeOp : Weft_ForwardOp<"transpose"> {
  let summary = "y's dim i is x's dim perm[i]";
  let description = [{
    ```mlir
    %t = weft.transpose %x {perm = array<i64: 0, 2, 1, 3>}
        : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_SoftmaxOp : Weft_ElementwiseForwardOp<"softmax"> {
  let summary = "softmax over the last dim";
  let arguments = (ins Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_SoftmaxGradOp : Weft_ElementwiseOp<"softmax_grad"> {
  let summary = "dx = y * (dy - sum(dy * y)) over the last dim (y: softmax)";
  let arguments = (ins Weft_FloatTensor:$y, Weft_FloatTensor:$dy);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_BatchMatmulOp : Weft_ForwardOp<"batch_matmul"> {
  let summary = "a matrix product per batch index: [b..., m, k] x [b..., k, n]";
  let description = [{
    Both operands have the same batch dims; the flags transpose the last two
    dims of an operand (scores q k^T: `transpose_b`).

    ```mlir
    %s = weft.batch_matmul %q, %k {transpose_b = true}
        : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$a, Weft_FloatTensor:$b,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Weft_FloatTensor:$result);
}

#endif // WEFT_GENERIC_OPS_TD
