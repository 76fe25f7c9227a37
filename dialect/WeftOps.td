//===- WeftOps.td - weft ops -------------------------------------*- tablegen -*-===//
//
// Shapes: `[..., N]` means any leading dims ("rows" are their product).
// Result types are inferred (InferTypeOpAdaptor), so the shape rules live in one
// place, WeftOps.cpp, and a mismatching result type is a verifier error.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_OPS_TD
#define WEFT_OPS_TD

include "dialect/WeftDialect.td"
include "dialect/WeftAttrs.td"
include "dialect/WeftInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// bf16 is a storage type of mixed-precision programs (weft-mixed-precision):
// kernels compute in f32 on it; parameters and optimizer state stay f32.
def Weft_FloatTensor : RankedTensorOf<[F32, F64, BF16]>;
def Weft_IdTensor : RankedTensorOf<[I32]>;
def Weft_Scalar : 0DTensorOf<[F32, F64, BF16]>;

// A pure op whose result types follow from its operands and attributes.
class Weft_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Weft_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
          DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>])> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

// An elementwise op: operands and result share one type.
class Weft_ElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Weft_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
          DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>])> {
  let assemblyFormat = "operands attr-dict `:` type($result)";
}

// A forward op: computes and knows its vector-Jacobian product.
class Weft_ForwardOp<string mnemonic, list<Trait> traits = []>
    : Weft_ComputeOp<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<Weft_VjpOpInterface>])>;
class Weft_ElementwiseForwardOp<string mnemonic>
    : Weft_ElementwiseOp<mnemonic,
          [DeclareOpInterfaceMethods<Weft_VjpOpInterface>]>;

//===----------------------------------------------------------------------===//
// Parameters and optimizer state
//===----------------------------------------------------------------------===//

def Weft_ParamOp : Weft_Op<"param", [Pure]> {
  let summary = "a named, trainable parameter";
  let description = [{
    A model parameter, named by its Hugging Face checkpoint name. `init` is
    `normal` (with `std`), `zeros` or `ones`; the runtime draws element i from
    (seed, name, i) only, so every layout starts from the same global weights.
    `loaded`: the values are the model file's (an ONNX import), and a run
    must load them.

    ```mlir
    %w = weft.param "transformer.wte.weight" {init = "normal", std = 2.0e-02}
        : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$init,
                   DefaultValuedAttr<F64Attr, "0.0">:$std);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Weft_ParamGradOp : Weft_Op<"param_grad", [MemoryEffects<[MemWrite]>]> {
  let summary = "the loss gradient of a parameter, stored in its grad buffer";
  let description = [{
    Stores `grad` as the parameter's gradient. With `accumulate` it is added
    to the stored one instead: micro-batches' gradients summed before one
    optimizer step (weft-accumulate-gradients).

    ```mlir
    weft.param_grad "lm_head.weight", %dw {accumulate} : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Weft_FloatTensor:$grad,
                   UnitAttr:$accumulate);
  let assemblyFormat = "$name `,` $grad attr-dict `:` type($grad)";
}

def Weft_StoredGradOp : Weft_Op<"stored_grad", [MemoryEffects<[MemRead]>]> {
  let summary = "the gradient weft.param_grad stored for a parameter";
  let description = [{
    Reads a parameter's grad buffer, as accumulated over the step's
    micro-batches: weft-accumulate-gradients reduces it once per step
    (all-reduce) where each micro-batch would otherwise reduce its own.

    ```mlir
    %g = weft.stored_grad "lm_head.weight" : tensor<64x256xf32>
    %r = weft.all_reduce %g {axes = ["dp"]} : tensor<64x256xf32>
    weft.param_grad "lm_head.weight", %r : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Weft_AdamWOp : Weft_Op<"adamw", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "one AdamW update of a parameter, in place";
  let description = [{
    Updates `param` (a `weft.param`) and its Adam moments in place from the
    gradient that `weft.param_grad` stored for it, as PyTorch's
    `torch.optim.AdamW`. Reading the stored gradient (not an SSA value) lets
    the memory plan free each gradient temporary as soon as it is stored. Hyper-parameters and the learning-rate
    schedule live in the enclosing function's `weft.optimizer` dictionary;
    `weight_decay` says whether decoupled weight decay applies to this tensor.
  }];
  let arguments = (ins Weft_FloatTensor:$param, BoolAttr:$weight_decay);
  let assemblyFormat = "$param attr-dict `:` type($param)";
  let hasVerifier = 1;
}

def Weft_FillOp : Weft_Op<"fill", [Pure]> {
  let summary = "a tensor with every element equal to `value`";
  let arguments = (ins F64Attr:$value);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Pipeline transfers (weft-cut-stages)
//===----------------------------------------------------------------------===//

def Weft_SendOp : Weft_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "sends a value to another pipeline stage";
  let description = [{
    Sends `x` to the ranks of stage `peer` that share this rank's other mesh
    coordinates. weft-cut-stages puts the sends of a fragment at its end and
    the receives at its start; weft-emit-program turns them into the
    schedule's send and recv actions, one per micro-batch, and a stage's
    k-th send to a peer meets that peer's k-th receive from it. A send
    marked `once` (of a `weft.accumulate` sum, last in the optimizer
    fragment, so that the memory plan keeps the sum through it) is one
    action per step, right before the optimizer's run, after the barrier
    that ends the pipeline; the peer receives it before its own optimizer.

    ```mlir
    weft.send %h {peer = 1 : i64} : tensor<2x8x64xf32>
    %h = weft.recv {peer = 0 : i64} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, I64Attr:$peer, UnitAttr:$once);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Weft_AccumulateOp : Weft_Op<"accumulate",
    [MemoryEffects<[MemRead, MemWrite]>, AllTypesMatch<["acc", "x"]>]> {
  let summary = "adds a value into a step accumulator, in place";
  let description = [{
    Adds `x` into the storage of `acc`, a zero `weft.fill` of the prologue,
    so that `acc` holds the sum over the step's micro-batches of what `x`
    was in each. weft-cut-stages sums a tied embedding's head gradient this
    way on the stage that holds the replica, and sends the sum once per
    step (`weft.send` with `once`) instead of once per micro-batch.

    ```mlir
    %acc = weft.fill {value = 0.0 : f64, weft.fragment = "prologue"} : tensor<256x64xf32>
    weft.accumulate %acc, %dw {weft.fragment = "backward"} : tensor<256x64xf32>
    weft.send %acc {peer = 0 : i64, once, weft.fragment = "optimizer"} : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$acc, Weft_FloatTensor:$x);
  let assemblyFormat = "$acc `,` $x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Weft_RecvOp : Weft_Op<"recv", [MemoryEffects<[MemRead]>]> {
  let summary = "receives a value from another pipeline stage";
  let arguments = (ins I64Attr:$peer);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Weft_RecvParamOp : Weft_Op<"recv_param", [MemoryEffects<[MemWrite]>]> {
  let summary = "receives a parameter's value into its storage";
  let description = [{
    A stage that reads a parameter another stage trains (a tied embedding)
    holds a copy of its value (a `weft.param` marked `weft.replica`) and
    receives it, updated, once per step: the owning stage sends it after its
    optimizer (`weft.send` of the `weft.param`).

    ```mlir
    weft.recv_param "transformer.wte.weight" {peer = 0 : i64}
    ```
  }];
  let arguments = (ins StrAttr:$name, I64Attr:$peer);
  let assemblyFormat = "$name attr-dict";
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def Weft_EmbeddingOp : Weft_ForwardOp<"embedding",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "token embedding lookup: y[r] = table[ids[r]]";
  let arguments = (ins Weft_FloatTensor:$table, Weft_IdTensor:$ids);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_PositionEmbeddingOp : Weft_ForwardOp<"position_embedding",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "learned positions: y[b,s] = x[b,s] + table[s]";
  let description = [{
    With `token_types` the row is each position's token type instead:
    y[b,s] = x[b,s] + table[t[b,s]], t the step's token_type_ids (an
    imported graph's input, given by weft-run --token-type-ids): BERT's
    segment embedding.
  }];
  let arguments = (ins Weft_FloatTensor:$x, Weft_FloatTensor:$table,
                   UnitAttr:$token_types);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_AddRowOp : Weft_ForwardOp<"add_row"> {
  let summary = "one row of a table added everywhere: y[l..., n] = x[l..., n] "
                "+ table[row, n]";
  let description = [{
    A lookup by a constant index: BERT's token-type embedding, whose ids
    are all 0 when the model is called without them. The table keeps its
    other rows (they take no gradient; AdamW's decay still applies).
  }];
  let arguments = (ins Weft_FloatTensor:$x, Weft_FloatTensor:$table,
                   I64Attr:$row);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_MatmulOp : Weft_ForwardOp<"matmul"> {
  let summary = "matrix product over flattened leading (batch) dims";
  let description = [{
    `a` is viewed as the matrix `[rows(a), last(a)]`, `b` likewise; the result is
    `op(a) x op(b)` where `op` transposes when the flag is set. Without
    `transpose_a` the result keeps a's leading (batch) dims: a linear layer
    `[B, S, K] x [K, N] -> [B, S, N]`. With `transpose_a` the batch dims are
    contracted: `[B, S, K]^T x [B, S, N] -> [K, N]` (a weight gradient).

    ```mlir
    %y = weft.matmul %x, %w {transpose_b = true}
        : (tensor<8x64x64xf32>, tensor<192x64xf32>) -> tensor<8x64x192xf32>
    ```

    An optional third operand `bias` (`[N]`, the result's last dim) is added
    to every row of the product, as PyTorch's addmm: weft-fuse-bias folds a
    `weft.bias_add` into the matmul that makes its input, after autodiff and
    partitioning, so no other pass sees it. Not with `transpose_a`.

    ```mlir
    %y = weft.matmul %x, %w, %b
        : (tensor<8x64x64xf32>, tensor<64x192xf32>, tensor<192xf32>)
        -> tensor<8x64x192xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$a, Weft_FloatTensor:$b,
                   Optional<Weft_FloatTensor>:$bias,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Weft_FloatTensor:$result);
  let builders = [
    // Without a bias: every pass but weft-fuse-bias builds this form.
    OpBuilder<(ins "::mlir::Value":$a, "::mlir::Value":$b,
                   "bool":$transpose_a, "bool":$transpose_b), [{
      build($_builder, $_state, a, b, ::mlir::Value(), transpose_a,
            transpose_b);
    }]>];
}

def Weft_BiasAddOp : Weft_ForwardOp<"bias_add"> {
  let summary = "y[r, n] = x[r, n] + bias[n]";
  let arguments = (ins Weft_FloatTensor:$x, Weft_FloatTensor:$bias);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_AddOp : Weft_ElementwiseForwardOp<"add"> {
  let summary = "elementwise sum (residual connections, gradient accumulation)";
  let arguments = (ins Weft_FloatTensor:$lhs, Weft_FloatTensor:$rhs);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_MulOp : Weft_ElementwiseForwardOp<"mul"> {
  let summary = "elementwise product";
  let arguments = (ins Weft_FloatTensor:$lhs, Weft_FloatTensor:$rhs);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_SplitOp : Weft_ForwardOp<"split",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "consecutive slices of the last dim (GPT-2's fused QKV)";
  let arguments = (ins Weft_FloatTensor:$x, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Weft_FloatTensor>:$results);
}

def Weft_ConcatOp : Weft_ForwardOp<"concat"> {
  let summary = "concatenation along the last dim; the inverse of split";
  let arguments = (ins Variadic<Weft_FloatTensor>:$inputs);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_LayerNormOp : Weft_ForwardOp<"layer_norm"> {
  let summary = "y = (x - mean) / sqrt(var + eps) * gamma + beta, per row";
  let arguments = (ins Weft_FloatTensor:$x, Weft_FloatTensor:$gamma,
                   Weft_FloatTensor:$beta, F64Attr:$eps);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_RmsNormOp : Weft_ForwardOp<"rms_norm"> {
  let summary = "y = x / sqrt(mean(x^2) + eps) * gamma, per row";
  let arguments = (ins Weft_FloatTensor:$x, Weft_FloatTensor:$gamma,
                   F64Attr:$eps);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_CastOp : Weft_Op<"cast", [Pure,
    DeclareOpInterfaceMethods<Weft_ShardingRuleOpInterface>,
    DeclareOpInterfaceMethods<Weft_VjpOpInterface>]> {
  let summary = "x converted to another float type (to bf16: round to nearest even)";
  let description = [{
    The one op that changes a tensor's element type. weft-mixed-precision
    casts each f32 parameter to a bf16 copy; the gradient of a cast is the
    cast back (so parameter gradients arrive in f32).

    ```mlir
    %w16 = weft.cast %w : tensor<64x256xf32> to tensor<64x256xbf16>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `to` type($result)";
  let hasVerifier = 1;
}

def Weft_GeluOp : Weft_ElementwiseForwardOp<"gelu"> {
  let summary = "GELU, tanh approximation (GPT-2)";
  let arguments = (ins Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_DropoutOp : Weft_ElementwiseOp<"dropout", [
    DeclareOpInterfaceMethods<Weft_VjpOpInterface>,
    DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "inverted dropout with a mask keyed by global coordinates";
  let description = [{
    `y = x * keep / (1 - p)`, where element e keeps when the Philox-4x32 draw
    of (seed, step, `site`, e's index in the global tensor) is at least
    `p * 2^32` (program/Dropout.h). `site` numbers the model's dropout
    points (the frontend's), so recomputation, pipeline stages and every
    layout draw exactly one rank's mask. The gradient is the same op on
    `dy`. After weft-partition, `dim_axes` lists per dim the mesh axes it is
    split over, from which the runtime learns the rank's global offsets.

    ```mlir
    %y = weft.dropout %x {p = 1.000000e-01 : f64, site = 3 : i64}
        : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$x, F64Attr:$p, I64Attr:$site,
                   OptionalAttr<ArrayAttr>:$dim_axes);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_ActOp : Weft_ElementwiseForwardOp<"act"> {
  let summary = "an activation of transformers' ACT2FN, by name";
  let description = [{
    `kind` names the activation as a config's hidden_act or
    activation_function does (program/Activation.h: gelu, gelu_fast,
    quick_gelu, relu, relu2, relu6, leaky_relu, silu, sigmoid, tanh,
    linear, ...). The models use weft.gelu and weft.swiglu for their default
    activations and this op for the others.

    ```mlir
    %y = weft.act %x {kind = "gelu"} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$x, StrAttr:$kind);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_SiluOp : Weft_ElementwiseForwardOp<"silu"> {
  let summary = "x * sigmoid(x)";
  let arguments = (ins Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_SwigluOp : Weft_ElementwiseForwardOp<"swiglu"> {
  let summary = "silu(gate) * up (Llama's MLP)";
  let arguments = (ins Weft_FloatTensor:$gate, Weft_FloatTensor:$up);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_RopeOp : Weft_ForwardOp<"rope",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "rotary position embedding, HF Llama rotate_half convention";
  let description = [{
    Rotates each head's `(i, i + hd/2)` pairs by `s * f_i` for the token at
    sequence position s, and multiplies by `scale`. The frequencies are
    `f_i = theta^(-2i/hd)`, or `inv_freq[i]` when given: the frontend
    computes RoPE scaling (linear, dynamic, llama3, yarn) into that table as
    transformers does, and yarn's attention factor into `scale`. `inverse`
    rotates backwards (still multiplying by `scale`); since the rotation is
    orthogonal, the inverse is the VJP.

    ```mlir
    %q2 = weft.rope %q {num_heads = 4 : i64, theta = 5.0e+05 : f64,
                        inv_freq = array<f64: 1.0, 0.1, ...>, scale = 1.0 : f64}
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$x, I64Attr:$num_heads, F64Attr:$theta,
                   DefaultValuedAttr<BoolAttr, "false">:$inverse,
                   OptionalAttr<DenseF64ArrayAttr>:$inv_freq,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_AttentionOp : Weft_ForwardOp<"attention",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "causal or bidirectional multi-head / grouped-query "
                "self-attention";
  let description = [{
    `q: [B, S, H*hd]`, `k, v: [B, S, Hkv*hd]` -> `[B, S, H*hd]`; softmax of
    `scale * q k^T` with a causal mask, `scale` being 1/sqrt(hd) unless
    given (GPT-2's scale_attn_weights=false gives 1, its
    scale_attn_by_inverse_layer_idx a further 1/(layer_idx + 1)). Query head
    h reads key/value head `h / (H / Hkv)`; `H == Hkv` is multi-head
    attention. With `bidirectional` there is no mask: every query reads
    every key (an encoder's attention, BERT's). With `dropout` p, the
    probabilities [B, H, S, S] drop as weft.dropout's elements do, keyed by
    `dropout_site` and their global (sample, head, query, key); `dim_axes`
    (after weft-partition) gives q's dims' mesh axes. With `window` W
    (causal only; Mistral's sliding window) query i reads keys j with
    i - W < j <= i. With `key_padding` (an imported graph's attention_mask
    input) each row's padding is no key: the runtime reads the row's run of
    tokens [F, E) from the step's attention mask, and every query reads
    keys in it only (a causal query i keys F..i; one before F, itself).
  }];
  let arguments = (ins Weft_FloatTensor:$q, Weft_FloatTensor:$k,
                   Weft_FloatTensor:$v, I64Attr:$num_heads,
                   I64Attr:$num_kv_heads, OptionalAttr<F64Attr>:$scale,
                   UnitAttr:$bidirectional, OptionalAttr<F64Attr>:$dropout,
                   OptionalAttr<I64Attr>:$dropout_site,
                   OptionalAttr<ArrayAttr>:$dim_axes,
                   OptionalAttr<I64Attr>:$window, UnitAttr:$key_padding);
  let hasVerifier = 1;
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_CrossEntropyOp : Weft_ForwardOp<"cross_entropy",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>,
     DeclareOpInterfaceMethods<Weft_SplitReductionOpInterface>]> {
  let summary = "mean softmax cross-entropy of logits against target ids";
  let description = [{
    The mean over the rows of `-log softmax(logits)[target]`. With `masked`
    (a masked-language-model loss, `weft-masked-lm`) a target of -100
    counts for nothing, as PyTorch's `ignore_index`, and the mean is over
    the step's counted targets: a number the runtime learns from each
    step's batch, not a constant of the program. With `classes` only
    the first `classes` columns are classes: the rest are a vocabulary's
    padding (weft-pad-vocab), outside the softmax.
  }];
  let arguments = (ins Weft_FloatTensor:$logits, Weft_IdTensor:$targets,
                   UnitAttr:$masked, OptionalAttr<I64Attr>:$classes);
  let results = (outs Weft_Scalar:$loss);
}

def Weft_MseLossOp : Weft_ForwardOp<"mse_loss",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "mean squared error of a prediction against float targets";
  let description = [{
    The mean over every element of `(pred - target)^2`: PyTorch's
    `MSELoss()`, a regression head's loss (Hugging Face's
    `num_labels=1`). `pred` and `target` have one shape and one float type
    (weft-mixed-precision computes it on an f32 copy of a bf16 `pred`).
    Split over ranks, each sums its elements and divides by all of them
    (`denominator`, set by weft-partition): a partial sum.
  }];
  let arguments = (ins Weft_FloatTensor:$pred, Weft_FloatTensor:$target);
  let results = (outs Weft_Scalar:$loss);
}

//===----------------------------------------------------------------------===//
// Backward ops (built by the VJPs above)
//===----------------------------------------------------------------------===//

def Weft_EmbeddingGradOp : Weft_ComputeOp<"embedding_grad",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "scatter-add of dy rows into a zeroed table gradient";
  let description = [{
    `dtable[v] = sum of dy[r] over the rows r whose id is v`, in row order
    from 0. With the optional `base` (`[vocab, D]`, the result's type):
    `dtable = base + that sum`, as a `weft.add` of the two would compute it,
    bit for bit. weft-fuse-table-grad folds a tied embedding's two
    gradients (the head's weight gradient and the table's) into it after
    partitioning, where each rank's pieces are already local.

    ```mlir
    %g = weft.embedding_grad %dy, %ids, %head {vocab = 256 : i64}
        : (tensor<2x16x64xf32>, tensor<2x16xi32>, tensor<256x64xf32>)
        -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$dy, Weft_IdTensor:$ids,
                   Optional<Weft_FloatTensor>:$base, I64Attr:$vocab);
  let results = (outs Weft_FloatTensor:$dtable);
  let builders = [
    // Without a base: every pass but weft-fuse-table-grad builds this form.
    OpBuilder<(ins "::mlir::Value":$dy, "::mlir::Value":$ids,
                   "int64_t":$vocab), [{
      build($_builder, $_state, dy, ids, ::mlir::Value(), vocab);
    }]>];
}

def Weft_PositionEmbeddingGradOp
    : Weft_ComputeOp<"position_embedding_grad",
          [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "dtable[s] = sum over the batch of dy[b, s]; 0 past seq";
  let description = [{
    With `token_types`, dtable[r] sums dy[b, s] over the positions whose
    token type t[b, s] is r.
  }];
  let arguments = (ins Weft_FloatTensor:$dy, I64Attr:$positions,
                   UnitAttr:$token_types);
  let results = (outs Weft_FloatTensor:$dtable);
}

def Weft_ReduceRowsOp : Weft_ComputeOp<"reduce_rows"> {
  let summary = "y[n] = sum over rows r of x[r, n] (bias gradients)";
  let arguments = (ins Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_RowGradOp : Weft_ComputeOp<"row_grad"> {
  let summary = "dtable[rows, n]: v[n] at `row`, zeros elsewhere "
                "(add_row's table gradient)";
  let arguments = (ins Weft_FloatTensor:$v, I64Attr:$row, I64Attr:$rows);
  let results = (outs Weft_FloatTensor:$dtable);
  let hasVerifier = 1;
}

def Weft_LayerNormGradOp : Weft_ComputeOp<"layer_norm_grad"> {
  let summary = "dx, dgamma, dbeta of layer_norm";
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$x,
                   Weft_FloatTensor:$gamma, F64Attr:$eps);
  let results = (outs Weft_FloatTensor:$dx, Weft_FloatTensor:$dgamma,
                 Weft_FloatTensor:$dbeta);
}

def Weft_RmsNormGradOp : Weft_ComputeOp<"rms_norm_grad"> {
  let summary = "dx, dgamma of rms_norm";
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$x,
                   Weft_FloatTensor:$gamma, F64Attr:$eps);
  let results = (outs Weft_FloatTensor:$dx, Weft_FloatTensor:$dgamma);
}

def Weft_GeluGradOp : Weft_ElementwiseOp<"gelu_grad"> {
  let summary = "dx = dy * gelu'(x)";
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_ActGradOp : Weft_ElementwiseOp<"act_grad"> {
  let summary = "dx = dy * act'(x) for weft.act of the same kind";
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$x,
                   StrAttr:$kind);
  let results = (outs Weft_FloatTensor:$result);
  let hasVerifier = 1;
}

def Weft_SiluGradOp : Weft_ElementwiseOp<"silu_grad"> {
  let summary = "dx = dy * silu'(x)";
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$x);
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_SwigluGradOp : Weft_ComputeOp<"swiglu_grad"> {
  let summary = "dgate, dup of swiglu";
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$gate,
                   Weft_FloatTensor:$up);
  let results = (outs Weft_FloatTensor:$dgate, Weft_FloatTensor:$dup);
}

def Weft_AttentionGradOp : Weft_ComputeOp<"attention_grad",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "dq, dk, dv of attention (recomputes the softmax)";
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$q,
                   Weft_FloatTensor:$k, Weft_FloatTensor:$v,
                   I64Attr:$num_heads, I64Attr:$num_kv_heads,
                   OptionalAttr<F64Attr>:$scale, UnitAttr:$bidirectional,
                   OptionalAttr<F64Attr>:$dropout,
                   OptionalAttr<I64Attr>:$dropout_site,
                   OptionalAttr<ArrayAttr>:$dim_axes,
                   OptionalAttr<I64Attr>:$window, UnitAttr:$key_padding);
  let hasVerifier = 1;
  let results = (outs Weft_FloatTensor:$dq, Weft_FloatTensor:$dk,
                 Weft_FloatTensor:$dv);
}

def Weft_CrossEntropyGradOp : Weft_ComputeOp<"cross_entropy_grad",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>,
     DeclareOpInterfaceMethods<Weft_SplitReductionOpInterface>]> {
  let summary = "dlogits = (softmax(logits) - onehot(targets)) * dloss / rows";
  let description = [{
    With `classes`, as cross_entropy's: the padding columns past it get a
    zero gradient.
  }];
  let arguments = (ins Weft_FloatTensor:$logits, Weft_IdTensor:$targets,
                   Weft_Scalar:$dloss, UnitAttr:$masked,
                   OptionalAttr<I64Attr>:$classes);
  let results = (outs Weft_FloatTensor:$dlogits);
}

def Weft_MseLossGradOp : Weft_ComputeOp<"mse_loss_grad",
    [DeclareOpInterfaceMethods<Weft_LocalizeOpInterface>]> {
  let summary = "dpred = 2 (pred - target) * dloss / elements";
  let arguments = (ins Weft_FloatTensor:$pred, Weft_FloatTensor:$target,
                   Weft_Scalar:$dloss);
  let results = (outs Weft_FloatTensor:$dpred);
}

//===----------------------------------------------------------------------===//
// Ring attention (made by weft-partition, per rank)
//===----------------------------------------------------------------------===//

def Weft_AttentionBlockOp : Weft_Op<"attention_block", [Pure]> {
  let summary = "one ring step of context-parallel attention";
  let description = [{
    `q: [B, Sq, H*hd]` is this rank's block of the sequence (split over
    `seq_axes`), `k, v: [B, Sk, Hkv*hd]` the block that reaches it on ring
    step `ring_step`: shard `(r - ring_step) mod c`'s, r this rank's shard
    index and c the ranks of `seq_axes`. `o: [B, Sq, H*hd]` is the
    attention of the queries over this block's keys alone and
    `lse: [B, H, Sq]` the log of its softmax denominator (-inf for a query
    that sees none of them); `weft.softmax_merge` combines blocks. Every
    position is global (a load-balanced sequence's through
    `weft.seq_chunks`), so the causal mask and a sliding `window` compare
    global positions; `scale`, `bidirectional` and `dropout` are
    attention's (its mask keyed by the global (sample, head, query, key),
    `dim_axes` placing q's dims), the dropped probabilities of the block
    multiplying v while the denominator counts them all. Packed documents
    and `key_padding` bound a query's keys as attention's do (the runtime's
    positions and token spans, at `dim_axes`' global rows).
  }];
  let arguments = (ins Weft_FloatTensor:$q, Weft_FloatTensor:$k,
                   Weft_FloatTensor:$v, I64Attr:$num_heads,
                   I64Attr:$num_kv_heads, OptionalAttr<F64Attr>:$scale,
                   UnitAttr:$bidirectional, OptionalAttr<I64Attr>:$window,
                   UnitAttr:$key_padding,
                   StrArrayAttr:$seq_axes, I64Attr:$ring_step,
                   OptionalAttr<F64Attr>:$dropout,
                   OptionalAttr<I64Attr>:$dropout_site,
                   OptionalAttr<ArrayAttr>:$dim_axes);
  let results = (outs Weft_FloatTensor:$o, Weft_FloatTensor:$lse);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_SoftmaxMergeOp : Weft_Op<"softmax_merge", [Pure]> {
  let summary = "combines two blocks' attention by their log-sum-exps";
  let description = [{
    `lse = log(exp(lse1) + exp(lse2))`, `o = o1 exp(lse1 - lse) + o2
    exp(lse2 - lse)` per query and head (`o: [B, S, H*hd]`,
    `lse: [B, H, S]`): the online softmax of ring attention. A side whose
    lse is -inf (no visible key) adds nothing.
  }];
  let arguments = (ins Weft_FloatTensor:$o1, Weft_FloatTensor:$lse1,
                   Weft_FloatTensor:$o2, Weft_FloatTensor:$lse2,
                   I64Attr:$num_heads);
  let results = (outs Weft_FloatTensor:$o, Weft_FloatTensor:$lse);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_AttentionBlockGradOp : Weft_Op<"attention_block_grad", [Pure]> {
  let summary = "one ring step of context-parallel attention's gradient";
  let description = [{
    `dy, q, o: [B, Sq, H*hd]`, `k, v: [B, Sk, Hkv*hd]` (ring step
    `ring_step`'s block, as `weft.attention_block`), `lse: [B, H, Sq]` the
    whole rows' log-sum-exp: with `P = exp(scale q k^T - lse)` over the
    block's visible keys and `D = rowsum(dy * o)`, `dv = P^T dy`,
    `dS = P * (dy v^T - D)`, `dq = scale dS k` (this block's share) and
    `dk = scale dS^T q` (this rank's queries' share of the block's keys).
    With `dropout` (mask M as `weft.attention_block`'s), `dv = (P M)^T dy`
    and `dS = P * ((dy v^T) M - D)`.
  }];
  let arguments = (ins Weft_FloatTensor:$dy, Weft_FloatTensor:$q,
                   Weft_FloatTensor:$k, Weft_FloatTensor:$v,
                   Weft_FloatTensor:$o, Weft_FloatTensor:$lse,
                   I64Attr:$num_heads, I64Attr:$num_kv_heads,
                   OptionalAttr<F64Attr>:$scale, UnitAttr:$bidirectional,
                   OptionalAttr<I64Attr>:$window, UnitAttr:$key_padding,
                   StrArrayAttr:$seq_axes,
                   I64Attr:$ring_step, OptionalAttr<F64Attr>:$dropout,
                   OptionalAttr<I64Attr>:$dropout_site,
                   OptionalAttr<ArrayAttr>:$dim_axes);
  let results = (outs Weft_FloatTensor:$dq, Weft_FloatTensor:$dk,
                 Weft_FloatTensor:$dv);
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Vocab-parallel cross-entropy (made by weft-partition, per rank)
//===----------------------------------------------------------------------===//

// Ops that only weft-partition creates, on local (per-rank) types: they have
// no sharding rule and no VJP.
class Weft_LocalOp<string mnemonic>
    : Weft_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
}

def Weft_CrossEntropyStatsOp : Weft_LocalOp<"cross_entropy_stats"> {
  let summary = "per-row softmax statistics of this rank's vocab shard";
  let description = [{
    `logits [l..., Vs]` hold the vocab ids `[first, first + Vs)`, where `first`
    is this rank's shard index over `vocab_axes` times `Vs`. The result
    `[1, l..., 3]` holds, per row, the shard's max `m`, `sum exp(x - m)`, and
    the target's logit when the target falls in the shard (else 0). An
    all_gather along dim 0 over `vocab_axes` hands every rank every shard's
    statistics: a cross-entropy over a vocab split across ranks then costs one
    small collective, not a gather of the logits. With `masked`, a row
    whose target is -100 has the statistics (0, 0, 0): a sum of
    exponentials of 0, which no counted row has, marks it for
    cross_entropy_from_stats. With `classes` the global columns from
    `classes` on are padding and count for nothing (weft-pad-vocab leaves
    every shard at least one class).
  }];
  let arguments = (ins Weft_FloatTensor:$logits, Weft_IdTensor:$targets,
                   StrArrayAttr:$vocab_axes, UnitAttr:$masked,
                   OptionalAttr<I64Attr>:$classes);
  let results = (outs Weft_FloatTensor:$stats);
}

def Weft_CrossEntropyFromStatsOp : Weft_LocalOp<"cross_entropy_from_stats"> {
  let summary = "the loss from every shard's statistics";
  let description = [{
    `stats [K, l..., 3]` (K shards): per row `M = max_k m_k`, the loss is
    `M + log sum_k s_k exp(m_k - M) - sum_k t_k`; the result is the sum over
    rows divided by `denominator` (the global row count), so rows split over
    other axes leave a partial sum. With `masked`, rows marked ignored add
    nothing and the divisor is the step's counted targets.
  }];
  let arguments = (ins Weft_FloatTensor:$stats, I64Attr:$denominator,
                   UnitAttr:$masked);
  let results = (outs Weft_Scalar:$loss);
}

def Weft_CrossEntropyStatsGradOp : Weft_LocalOp<"cross_entropy_stats_grad"> {
  let summary = "dlogits of this rank's vocab shard, from every shard's stats";
  let description = [{
    `dlogits = (exp(x - M) / S - onehot(target - first)) * dloss / denominator`
    with `M` and `S` the row's global max and sum of exponentials, merged from
    `stats` as in cross_entropy_from_stats. With `masked`, a row whose
    target is -100 gets a zero gradient and the divisor is the step's
    counted targets. With `classes` the padding columns get zero.
  }];
  let arguments = (ins Weft_FloatTensor:$logits, Weft_IdTensor:$targets,
                   Weft_FloatTensor:$stats, Weft_Scalar:$dloss,
                   StrArrayAttr:$vocab_axes, I64Attr:$denominator,
                   UnitAttr:$masked, OptionalAttr<I64Attr>:$classes);
  let results = (outs Weft_FloatTensor:$dlogits);
}

//===----------------------------------------------------------------------===//
// Meshes, sharding constraints and collectives
//===----------------------------------------------------------------------===//

def Weft_MeshOp : Weft_Op<"mesh", [Symbol]> {
  let summary = "a named device mesh: axis names and sizes";
  let description = [{
    ```mlir
    weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
    ```
    Rank r has coordinates r in row-major order over the axes: the last axis is
    innermost, so ranks differing only in it are neighbours.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                   DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Size of a named axis, or -1 when the mesh has no such axis.
    int64_t axisSize(::llvm::StringRef axis);
    int64_t numRanks();
  }];
}

def Weft_ShardOp : Weft_Op<"shard", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Weft_VjpOpInterface>]> {
  let summary = "a sharding constraint on a value (identity on data)";
  let description = [{
    Pins the sharding of its result, as JAX's `with_sharding_constraint`:
    propagation treats it as a user annotation and partitioning reshards the
    operand into it. Sequence parallelism is a `weft.shard` of the residual
    stream over `tp` along the sequence. Its VJP constrains the gradient the
    same way, so backward follows the forward layout.
  }];
  let arguments = (ins Weft_FloatTensor:$x, Weft_ShardingAttr:$sharding);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($result)";
}

// All collectives share this base: a group (the ranks that differ only on
// `axes`), strict shape verifiers against the module's mesh.
class Weft_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Weft_Op<mnemonic, traits> {
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat =
      "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_AllReduceOp : Weft_CollectiveOp<"all_reduce"> {
  let summary = "sum over the group; every rank gets the total";
  let description = [{
    ```
    before:  rank0: a   rank1: b        after:  rank0: a+b   rank1: a+b
    ```
    Row-parallel layers and data-parallel gradients end in one.
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes,
                   OptionalAttr<StrAttr>:$reason);
}

def Weft_AllGatherOp : Weft_CollectiveOp<"all_gather"> {
  let summary = "concatenate the group's blocks along `dim`";
  let description = [{
    ```
    before:  rank0: [a]   rank1: [b]    after:  rank0: [a b]   rank1: [a b]
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$dim,
                   OptionalAttr<StrAttr>:$reason);
}

def Weft_ReduceScatterOp : Weft_CollectiveOp<"reduce_scatter"> {
  let summary = "sum over the group, each rank keeps its block of `dim`";
  let description = [{
    ```
    before:  rank0: [a0 a1]   rank1: [b0 b1]
    after:   rank0: [a0+b0]   rank1: [a1+b1]
    ```
    The transpose of all_gather; sequence parallelism and ZeRO use it where
    Megatron TP and plain DP use an all_reduce.
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$dim,
                   OptionalAttr<StrAttr>:$reason);
}

def Weft_RingShiftOp : Weft_CollectiveOp<"ring_shift"> {
  let summary = "each rank's block to the next shard of `axes`, in a ring";
  let description = [{
    ```
    before:  rank0: a   rank1: b   rank2: c
    after:   rank0: c   rank1: a   rank2: b
    ```
    Shard r sends x to shard (r + 1) mod c and receives shard (r - 1) mod
    c's: ring attention passes key and value blocks (and their gradients)
    around the context-parallel ranks. Started asynchronously, it overlaps
    the attention of the block before.
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes,
                   OptionalAttr<StrAttr>:$reason);
}

def Weft_AllToAllOp : Weft_CollectiveOp<"all_to_all"> {
  let summary = "each rank sends block j of `split_dim` to rank j and "
                "joins what it receives along `concat_dim`";
  let description = [{
    ```
    before:  rank0: [a0 a1]      rank1: [b0 b1]       (split_dim blocks)
    after:   rank0: [a0; b0]     rank1: [a1; b1]      (along concat_dim)
    ```
    The result is `slice(all_gather(x, concat_dim), split_dim)` with
    (n-1)/n of the bytes of the gather: an axis moves from one dim to
    another. Context parallelism's all-to-all (DeepSpeed's Ulysses) moves
    `cp` from attention's sequence to its heads and back.
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes,
                   I64Attr:$split_dim, I64Attr:$concat_dim,
                   OptionalAttr<StrAttr>:$reason);
}

def Weft_SliceOp : Weft_CollectiveOp<"slice", [Pure]> {
  let summary = "keep this rank's block of `dim` (no communication)";
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$dim,
                   OptionalAttr<StrAttr>:$reason);
}

def Weft_PackOp : Weft_Op<"pack", [Pure]> {
  let summary = "flattens and concatenates tensors into one buffer";
  let description = [{
    The inputs' elements, each in row-major order, one after the other: a
    gradient bucket's single message. With `blocks = n`, each input is n
    equal blocks of elements and the buffer holds block 0 of every input,
    then block 1 of every input, ...: the layout of a bucketed
    reduce-scatter over n ranks, rank r receiving every input's block r.
  }];
  let arguments = (ins Variadic<Weft_FloatTensor>:$inputs,
                   DefaultValuedAttr<I64Attr, "1">:$blocks);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_UnpackOp : Weft_Op<"unpack", [Pure]> {
  let summary = "splits a packed buffer back into tensors (inverse of pack)";
  let description = [{
    With `blocks = n` the inverse of pack's blocked layout: a bucketed
    all-gather over n ranks leaves rank r's shards of every tensor in block
    r, and each tensor is its n shards joined.
  }];
  let arguments = (ins Weft_FloatTensor:$packed,
                   DefaultValuedAttr<I64Attr, "1">:$blocks);
  let results = (outs Variadic<Weft_FloatTensor>:$results);
  let assemblyFormat = "$packed attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Imported graphs (frontends/onnx), before weft-raise-onnx
//===----------------------------------------------------------------------===//

def Weft_ConstantOp : Weft_Op<"constant", [Pure, ConstantLike,
    InferTypeOpAdaptor]> {
  let summary = "a tensor known at import (an ONNX value folded there)";
  let description = [{
    The import folds every ONNX value that depends on no input or parameter
    (shapes, position ids, the causal mask); what the raised graph still reads
    of them is a constant. A float constant the generic path reads as a
    tensor stays to the end: it is never split (weft-propagate-sharding
    keeps it replicated), has no gradient, and the program holds it as a
    buffer of kind `constant` (docs/program-format.md, version 10).

    ```mlir
    %c = weft.constant dense<5.000000e-01> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Weft_OnnxNodeOp : Weft_Op<"onnx_node", [Pure]> {
  let summary = "an ONNX node that weft-raise-onnx has not yet rewritten";
  let description = [{
    One node of an imported ONNX graph, kept as it was: its op type, node
    name, the model's opset and the node's attributes. Its result types are
    the import's static shapes. weft-raise-onnx rewrites the subgraphs it
    recognises (linear layers, layer norm, GELU, embeddings, attention) into
    weft's ops; weft-lower-onnx-generic lowers what it leaves onto the
    generic ops, or refuses the node by name.

    ```mlir
    %y = weft.onnx_node "Tanh" "node_tanh" (%x) {opset = 17 : i64, attrs = {}}
        : (tensor<2x16x256xf32>) -> tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrAttr:$op_type,
                   StrAttr:$node, I64Attr:$opset, DictionaryAttr:$attrs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat =
      "$op_type $node `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)";
}

include "dialect/WeftGenericOps.td"

#endif // WEFT_OPS_TD
