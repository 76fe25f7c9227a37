//===- Passes.td - weft passes ------------------------------------*- tablegen -*-===//
#ifndef WEFT_PASSES_TD
#define WEFT_PASSES_TD

include "mlir/Pass/PassBase.td"

def WeftInferTpRoles : Pass<"weft-infer-tp-roles", "mlir::ModuleOp"> {
  let summary = "Reads each parameter's tensor-parallel role from the graph";
  let description = [{
    Marks the parameters Megatron-style tensor parallelism splits with
    `weft.tp_role` (`#weft.tp_role<kind = "column" | "row" | "vocab", dim,
    blocks>`), from the structure of the forward graph alone, never from
    parameter names (passes/sharding/TpRoles.h has the rules):
    - a matmul of a norm's output by a weight starts a column-parallel
      region (its output features split, with its bias);
    - the region runs through activations, swiglu, rope, a fused QKV split
      (in equal blocks) and attention, and ends at row-parallel matmuls
      (input features split, output all-reduced);
    - any other use of a region's value leaves the region whole;
    - the LM head (a norm's output times a [vocab, d] table, straight into
      the cross-entropy) and the token embedding split over the vocabulary.
    A role already declared on a parameter stands. `--layout megatron`
    (weft-apply-layout) splits each parameter over `tp` by its role.

    ```mlir
    %h = weft.layer_norm %x, %g, %b {eps = 1.0e-05 : f64} : ...
    %w = weft.param "anything" ... : tensor<64x256xf32>
    // becomes: weft.param "anything" {weft.tp_role =
    //            #weft.tp_role<kind = "column", dim = 1>}
    %u = weft.matmul %h, %w : (tensor<2x8x64xf32>, tensor<64x256xf32>) -> ...
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftPadVocab : Pass<"weft-pad-vocab", "mlir::ModuleOp"> {
  let summary = "Pads a vocabulary to a multiple of tp (and dp under ZeRO), as Megatron-LM does";
  let description = [{
    Megatron's layout splits the token embedding and the LM head (the
    parameters weft-infer-tp-roles marked `vocab`, along dim 0) over `tp`,
    which must divide the vocabulary: GPT-2's 50,257 ids divide by no tp.
    ZeRO splits their rows (or each tp shard's) over `dp` as well, which
    must divide them too: weft-compile asks for a multiple of tp x dp, so
    GPT-2's table no longer keeps whole state on every rank under ZeRO.
    Like Megatron-LM's `--make-vocab-size-divisible-by`, this pass pads
    them with rows up to the next multiple of `multiple`, and keeps the
    model exactly the one described:
    - each padded parameter keeps its model rows as `weft.logical_rows`:
      the runtime initialises and checkpoints those rows only (the padding
      is zeros, never saved), so a checkpoint is the unpadded model's;
    - no token id reaches a padding row (the runtime refuses ids >= the
      vocabulary), so the embedding never reads one;
    - the head's logits gain padding columns, which the cross-entropy's
      `classes` keeps outside the softmax: their gradient is 0, and so is
      the padding rows' (AdamW's decay of 0 stays 0).
    Nothing changes where `multiple` divides the vocabulary, where a vocab
    parameter is split along another dim, where the head's logits feed
    anything but a cross-entropy (returned logits), or where the padding
    would leave the last shard no real row; weft-apply-layout then keeps
    such a vocabulary replicated, with its warning.

    ```mlir
    %w = weft.param "transformer.wte.weight" ... : tensor<251x64xf32>
    // multiple=2 -> weft.param ... {weft.logical_rows = 251} : tensor<252x64xf32>
    //               weft.cross_entropy %logits, %t {classes = 251}
    ```
  }];
  let options = [
    Option<"multiple", "multiple", "int64_t", "1",
           "pad the vocabulary to a multiple of this (tp)">,
  ];
}

def WeftApplyLayout : Pass<"weft-apply-layout", "mlir::ModuleOp"> {
  let summary = "Declares the mesh and annotates parameters and inputs";
  let description = [{
    Creates `weft.mesh @mesh` from `mesh` (e.g. `dp=2,tp=2`; the last axis is
    innermost) and annotates the forward program:
    - inputs (`tokens`, `targets`) split along the batch over `dp`;
    - with `layout=megatron`, each parameter split over `tp` by its
      `weft.tp_role` (weft-infer-tp-roles): column-parallel layers along
      their output features, row-parallel ones along their input features,
      the token embedding and LM head along the vocabulary (GPT-2's fused
      QKV in 3 blocks so each rank holds its heads' q, k and v);
    - a layout file (JSON) instead: `{"params": {GLOB: [[axes], ...]},
      "inputs": [[axes], [axes]], "zero": N, "sequence_parallel": B}`;
    - `sequence-parallel`: `weft.shard` of the residual stream along the
      sequence over `tp`, so partitioning turns Megatron's all-reduces into
      reduce-scatter + all-gather;
    - `context-parallel` (with a `cp` axis): `all-gather` (attention
      gathers the keys and values over `cp`), or, as the function's
      `weft.context_parallel`, `all-to-all` (weft-partition moves `cp` from
      attention's sequence to its heads and back, DeepSpeed's Ulysses) or
      `ring` (it passes key and value blocks around the `cp` ranks);
    - `zero` 1-3: storage shardings over `dp` (dim 0) for the optimizer state
      (1), also gradients (2), also parameters (3), as `weft.state_storage`,
      `weft.grad_storage`, `weft.storage` on the `weft.param`s.
    Annotations are `weft.sharding` attributes; propagation fills in the rest.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "named axes and sizes, e.g. dp=2,tp=2">,
    Option<"layout", "layout", "std::string", "\"data\"",
           "data (batch over dp only), megatron, or a layout JSON file">,
    Option<"zero", "zero", "int64_t", "0", "ZeRO stage 0-3">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "split norms/residuals along the sequence over tp">,
    Option<"contextParallel", "context-parallel", "std::string",
           "\"all-gather\"",
           "how attention sees a sequence split over cp: all-gather (the "
           "keys and values), all-to-all (cp moves to the heads) or ring">,
    Option<"pipelineAxis", "pipeline-axis", "std::string", "\"\"",
           "the mesh axis of pipeline stages (weft-cut-stages splits the "
           "layers over it; no tensor may be split over it)">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftPropagateSharding : Pass<"weft-propagate-sharding", "mlir::ModuleOp"> {
  let summary = "Gives every value a sharding, from the annotations and op rules";
  let description = [{
    Starting from the annotated parameters, inputs and `weft.shard`
    constraints, walks the function forwards and backwards until nothing
    changes; at each op its sharding rule (factors) carries known shardings to
    the unknown operands and results. Priority: user annotations, then rules,
    then replicated. Each op gets `weft.shardings` (one per result).
  }];
}

def WeftPartition : Pass<"weft-partition", "mlir::ModuleOp"> {
  let summary = "Rewrites the global program into the per-rank program";
  let description = [{
    Gives every value its local (per-rank) type and inserts the collectives
    that the shardings imply, with the reason recorded on each: a partial sum
    consumed where a replicated value is needed becomes `weft.all_reduce`
    (row-parallel layers, data-parallel gradients, the loss), or
    `weft.reduce_scatter` where the consumer wants it split (sequence
    parallelism, ZeRO-2/3 gradients); a split value consumed whole becomes
    `weft.all_gather` (sequence parallelism, ZeRO-3 parameters, gathered at
    every use); a replicated value consumed split becomes a local
    `weft.slice`. Local attributes follow: per-rank head counts, the global
    row count of the loss, the sequence offset of position embeddings.
    A value whose only change is an axis moving from the end of one dim's
    split to the end of another's becomes one `weft.all_to_all`; under a
    function's `weft.context_parallel = "all-to-all"` attention takes `cp`
    from its sequence onto its heads, so its operands and results move
    through all-to-alls (DeepSpeed's Ulysses).
  }];
}

def WeftFoldCollectives : Pass<"weft-fold-collectives", "mlir::func::FuncOp"> {
  let summary = "Cheaper equivalent collectives: reduce-scatter, fewer all-reduces";
  let description = [{
    Rewrites, where exact:
    - `slice(all_reduce(x))` (the all-reduce used only by the slice, same axes)
      into `reduce_scatter(x)`: each rank receives only its block, (c-1)/c of
      the bytes instead of 2(c-1)/c;
    - `add(all_reduce(a), all_reduce(b))` over the same axes (each all-reduce
      used only by the add) into `all_reduce(add(a, b))`: the sum is linear,
      so one collective does the work of two.

    ```mlir
    %r = weft.all_reduce %x {axes = ["tp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = weft.slice %r {axes = ["tp"], dim = 0} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    // becomes
    %s = weft.reduce_scatter %x {axes = ["tp"], dim = 0} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    ```
  }];
}

def WeftRegatherActivations
    : Pass<"weft-regather-activations", "mlir::func::FuncOp"> {
  let summary = "Gathers a forward activation again in the backward instead of keeping it whole";
  let description = [{
    Under sequence parallelism a column-parallel matmul reads its input
    all-gathered over tp, and its weight gradient reads that gathered input
    again in the backward. Keeping it would hold tp times the bytes of the
    shard from the forward to the backward (Llama 3 405B, tp=8: 4 GiB of
    the 7.5 GiB a micro-batch keeps on stage 0). As Korthikanti et al. 2022
    (section 4.2.2) and Megatron do, the backward's matmuls read a second
    all-gather of the shard, marked `weft.regather`; the forward's gathered
    copy dies in the forward. The same bytes gathered twice: the values are
    the same. An activation's second gather starts before the matmuls right
    ahead of its first reader (the input gradients', which do not read it),
    marked `weft.async`, and completes at that reader: Megatron's
    LinearWithGradAccumulationAndAsyncCommunication overlaps it with the
    input gradient's GEMM the same way. Input gradients between its first
    and last readers that are ready before it (separate q, k and v
    projections: k's and q's after v's weight gradient) move ahead with
    them, as under Megatron's fused QKV GEMM. With no matmul right ahead
    it is made, blocking, right before its first reader.

    Only a gather the forward makes and backward matmuls read moves, and
    one the backward recomputes (`--recompute full`) stays. A parameter's
    (ZeRO-3) moves with `parameters` (`--zero3-gather microbatch`): each
    micro-batch gathers it for its forward and again for its backward, as
    FSDP does after resharding, so the gathered weights are not held from
    the forward to the backward (Llama 3 8B on dp=8, bf16, no
    recomputation: arena 35.6 GB held, 23.8 GB so). Where the readers read
    a cast of the gathered copy (a bf16 program), the cast is made again
    too. A parameter with no other matmul between its last forward read and
    its first backward one (the LM head's, read right before and after the
    loss) keeps its copy: gathering it again would only add a copy at the
    loss, where the arena peaks.

    ```mlir
    %g = weft.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
    %y = weft.matmul %g, %w : ...                       // forward
    %dw = weft.matmul %g, %dy {transpose_a = true} : ... // backward
    // becomes, before %dw:
    %g2 = weft.all_gather %x {axes = ["tp"], dim = 1 : i64, weft.regather} : ...
    %dw = weft.matmul %g2, %dy {transpose_a = true} : ...
    ```
  }];
  let options = [
    Option<"parameters", "parameters", "bool", "false",
           "also gather ZeRO-3 parameters again for the backward">,
  ];
}

def WeftOverlapInputGradientReductions
    : Pass<"weft-overlap-input-gradient-reductions", "mlir::func::FuncOp"> {
  let summary = "Starts each input gradient's tp reduction right after its matmul, asynchronously";
  let description = [{
    Under tensor parallelism a column-parallel matmul's input gradient is a
    partial sum over tp, all-reduced (reduce-scattered along the sequence
    under sequence parallelism) before the norm's gradient reads it.
    Autodiff makes the weight gradient's matmul between the two, and the
    reduction waited for it. This pass moves each all-reduce or
    reduce-scatter of an input gradient in the backward (the matmul that
    makes it, or the adds that join several: Llama's q, k and v) right
    after it, moves the weight gradients' matmuls made in between (read by
    nothing before it) after it, and marks it `weft.async`: it completes at
    its first reader, so it runs under the weight gradients' GEMMs, as
    Megatron's LinearWithGradAccumulationAndAsyncCommunication overlaps it
    (`allreduce_dgrad`, and the reduce-scatter under SP). One with no
    weight gradient to run under stays as it is, and so do a parameter's
    gradient's (weft-bucket-gradients buckets those) and the forward's.

    ```mlir
    %dx = weft.matmul %dy, %w {transpose_b = true} : ...
    %dw = weft.matmul %x, %dy {transpose_a = true} : ...
    %r = weft.all_reduce %dx {axes = ["tp"]} : ...
    // becomes:
    %dx = weft.matmul %dy, %w {transpose_b = true} : ...
    %r = weft.all_reduce %dx {axes = ["tp"], weft.async} : ...
    %dw = weft.matmul %x, %dy {transpose_a = true} : ...
    ```
  }];
}

def WeftCutStages : Pass<"weft-cut-stages", "mlir::ModuleOp"> {
  let summary = "Cuts the training step into pipeline stages";
  let description = [{
    With `stages=N > 1`, splits the partitioned training function into N
    functions, one per pipeline stage along mesh axis `axis`, joined by
    `weft.send` and `weft.recv` (docs/design.md, "Pipeline stages"). An
    interleaved schedule (`interleaved:V`) cuts N*V model chunks instead,
    rank r holding chunks r, r+N, ...: each op of a forward or backward
    fragment then names its local chunk (`weft.chunk`), and a rank's ops
    are ordered by fragment (its chunks' forwards, their backwards in
    reverse).

    Each `weft.param` belongs to the stage of its `weft.layer`: layers are
    cut into contiguous runs that balance the stages' forward FLOPs
    (matmuls and attention; the embeddings count on the first stage, the
    head and loss on the last), or as `boundaries` says ("0-5,6-11"). Every other op follows by dataflow: a
    forward op runs on the latest stage among its operands; a backward op on
    a stage that holds its forward operands (the latest not past its
    gradient operands); gradient stores and AdamW on their parameter's stage.
    Parameters and values made from them alone (casts, ZeRO gathers) are
    copied to each stage that reads them. A value read on another stage is
    sent at the end of its fragment and received at the start of the
    reader's, in the order of the ops that made them. A parameter read on
    another stage than its own (a tied embedding) is a replica there
    (`weft.replica`): its stage trains it and sends its value after the
    optimizer (`weft.send`), the reader receives it before its own
    (`weft.recv_param`).
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1", "pipeline stages (1: none)">,
    Option<"axis", "axis", "std::string", "\"pp\"",
           "the mesh axis of the stages">,
    Option<"boundaries", "boundaries", "std::string", "\"\"",
           "layers per stage, as 0-5,6-11 (empty: balanced by FLOPs)">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved:V or custom:ORDERS "
           "(program/PipelineSchedule.h)">,
  ];
}

def WeftAccumulateGradients
    : Pass<"weft-accumulate-gradients", "mlir::func::FuncOp"> {
  let summary = "Accumulates gradients over micro-batches";
  let description = [{
    With `microbatches=M > 1`, the function is one micro-batch's program and
    the runtime runs its forward and backward M times per step (its
    schedule). Cross-entropies divide by the step's rows (M times theirs);
    every `weft.param_grad` accumulates; a `prologue` fragment clears the
    gradients first; a gradient all-reduce that only feeds its store moves
    after the last micro-batch (the `optimizer` fragment) and reduces the
    accumulated sum once per step; ZeRO-3 parameter gathers move to the
    `prologue` and run once per step (`gather-once=false`: once per
    micro-batch, keeping less memory). `weft.fragment` marks the moved ops and
    the clearing ones; the function gets `weft.microbatches`.

    ```mlir
    // before (dp=2)                       // after (microbatches=4)
    %r = weft.all_reduce %dw {axes=["dp"]}  weft.param_grad "w", %dw {accumulate}
    weft.param_grad "w", %r                 ...
                                            %s = weft.stored_grad "w"
                                            %r = weft.all_reduce %s {axes=["dp"]}
                                            weft.param_grad "w", %r
    ```
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "1",
           "micro-batches per step (1: no accumulation)">,
    Option<"gatherOnce", "gather-once", "bool", "true",
           "ZeRO-3: gather each parameter once per step (per use site), "
           "not once per micro-batch">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftStoreGradientsEarly
    : Pass<"weft-store-gradients-early", "mlir::func::FuncOp"> {
  let summary = "Stores each reduced gradient right after it is made";
  let description = [{
    Autodiff stores every gradient at the end of the backward, so a
    gradient that a collective reduces before its store stays whole in the
    arena until then, all of them at once: Llama 3 8B on dp=8 with ZeRO-3
    in bf16 held 32 GB of f32 gradients for their reduce-scatters. Each
    `weft.param_grad` moves right after the op that makes its gradient,
    with the reduce-scatters and all-reduces that only feed it: the same
    values into the same buffers, sooner. A store or reduction in a
    fragment (`weft-accumulate-gradients`' once-per-step all-reduce) stays,
    and nothing moves into the forward.

    ```mlir
    %dw = weft.matmul %x, %dy {transpose_a = true} : ...
    %dx = weft.matmul %dy, %w {transpose_b = true} : ...   // more backward
    %rs = weft.reduce_scatter %dw {axes = ["dp"], dim = 0 : i64} : ...
    weft.param_grad "w", %rs : ...
    // becomes
    %dw = weft.matmul %x, %dy {transpose_a = true} : ...
    %rs = weft.reduce_scatter %dw {axes = ["dp"], dim = 0 : i64} : ...
    weft.param_grad "w", %rs : ...
    %dx = weft.matmul %dy, %w {transpose_b = true} : ...
    ```
  }];
}

def WeftBucketGradients : Pass<"weft-bucket-gradients", "mlir::func::FuncOp"> {
  let summary = "Groups gradient all-reduces into buckets, as DDP does";
  let description = [{
    Data-parallel gradients are reduced in buckets of about `bucket-bytes`:
    the gradients of consecutive all-reduces over the same axes, each used only
    to store a parameter's gradient, are packed into one flat buffer
    (`weft.pack`), reduced by one all-reduce, and unpacked (`weft.unpack`).
    Fewer, larger messages: per-message latency is paid once per bucket.
    Buckets follow the order backward computes the gradients; each bucket's
    all-reduce starts right after its last gradient is computed and is marked
    `async` (weft-emit-program writes it as all_reduce_start and a wait right
    before the first use of its result). Its result is unpacked and stored
    just before the next bucket begins (the last: where its gradients are
    stored), so it overlaps the backward up to there with one reduction in
    flight; gradients stored as they are made (weft-store-gradients-early)
    would otherwise wait right after each start. `bucket-bytes=0` keeps one
    all-reduce per gradient (each still started early and asynchronous, and
    finished where the next starts).

    A position table's gradient, zero past the sequence on every rank, is
    reduced only over its first rows. With `zero-bucket-bytes` > 0, ZeRO's
    gradient reduce-scatters are bucketed too (a `blocks`-packed buffer: rank
    r's block of every gradient together), and ZeRO-3's parameter gathers of
    one layer at consecutive use sites become one all-gather of their packed
    shards and a blocked unpack, up to about `zero-bucket-bytes` gathered, as
    FSDP gathers a unit. Off by default: the packing copies cost more than
    the collectives they save on CPUs (GPT-2 124M ZeRO-3 dp=2: 18% slower
    steps, a 22% larger arena). Bucketed or not, each ZeRO gradient
    reduce-scatter that only feeds stores (its own, or its unpack's) is
    marked `async` and finished where the next one begins, as the
    all-reduce buckets are.
  }];
  let options = [
    Option<"zeroBucketBytes", "zero-bucket-bytes", "int64_t", "0",
           "ZeRO bucket size in bytes (0: one collective per tensor)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "25 << 20",
           "bucket size in bytes (DDP's default is 25 MiB)">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftPrefetchParams : Pass<"weft-prefetch-params", "mlir::func::FuncOp"> {
  let summary = "Starts ZeRO-3 parameter gathers early, asynchronously";
  let description = [{
    A ZeRO-3 parameter is all-gathered right before each use. This pass moves
    each such gather `distance` ops earlier (never above the parameter) and
    marks it `async`: the runtime starts it there and completes it at its
    first use, so the next layer's parameters arrive while the current layer
    computes. The gathered copy lives `distance` ops longer: the memory the
    prefetch costs.
  }];
  let options = [
    Option<"distance", "distance", "int64_t", "16",
           "how many ops ahead of its use a gather starts">,
  ];
}

def WeftMixedPrecision : Pass<"weft-mixed-precision", "mlir::func::FuncOp"> {
  let summary = "bf16 activations and GEMM inputs over f32 master weights";
  let description = [{
    The standard mixed-precision recipe (Micikevicius et al. 2018; PyTorch
    autocast with bf16, Megatron's bf16 with fp32 main parameters), on the
    forward model, before autodiff. Each f32 `weft.param` gets one bf16 copy
    (`weft.cast`) that its users read; every compute op then stores its
    result in bf16 (kernels compute in f32 and round). The loss is f32:
    `weft.cross_entropy` of bf16 logits computes its softmax and statistics
    in f32 and returns an f32 loss, and its gradient is the bf16 logits'
    gradient, with no f32 copy of the logits (as Megatron's fused
    cross-entropy). Autodiff turns each cast into the
    cast back, so gradients reach the parameters in f32: the gradient
    reductions, AdamW and its moments stay f32.

    Before:
    ```mlir
    %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x8xf32>
    %y = weft.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %l = weft.cross_entropy %y, %t : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
    ```
    After (`dtype=bf16`):
    ```mlir
    %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x8xf32>
    %w16 = weft.cast %w : tensor<4x8xf32> to tensor<4x8xbf16>
    %y = weft.matmul %x, %w16 : (tensor<2x4xbf16>, tensor<4x8xbf16>) -> tensor<2x8xbf16>
    %l = weft.cross_entropy %y, %t : (tensor<2x8xbf16>, tensor<2xi32>) -> tensor<f32>
    ```
    `dtype=f32` leaves the function alone. The model must be f32 and not
    yet differentiated.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", "\"f32\"",
           "the compute type of activations: f32 (no change) or bf16">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftRecompute : Pass<"weft-recompute", "mlir::func::FuncOp"> {
  let summary = "Recomputes activations in the backward instead of keeping them";
  let description = [{
    Runs after weft-autodiff on a builtin model (its params carry
    `weft.layer`). Each forward op belongs to the latest layer among its
    operands'. With `mode=full`, every value a layer computes and its
    backward reads is recomputed right before the first backward op that
    reads one: the layer's forward ops that lead to it are cloned there, from
    the layer's input, and the backward reads the clones. What a later layer
    reads (the layer's output, the next layer's input) is kept, as are the
    embeddings and the head. `mode=selective` recomputes only the attention
    core (Korthikanti et al. 2022): its output. The clones compute exactly
    what the forward did, so gradients are bit-identical; the memory plan
    then frees the forward's values at their last forward use.

    ```mlir
    // forward                       // backward, before (none) / after (full)
    %h = weft.matmul %x, %w          %dh = ... %h ...   |  %h2 = weft.matmul %x, %w
    %y = weft.gelu %h                                   |  %dh = ... %h2 ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none, selective (the attention core) or full (every layer)">,
  ];
}

def WeftAutodiff : Pass<"weft-autodiff", "mlir::func::FuncOp"> {
  let summary = "Appends the backward pass: every parameter's loss gradient";
  let description = [{
    The function must return one scalar, the loss. Walking the body in reverse,
    each op's `VjpOpInterface` builds its operands' gradients from its results';
    gradients of values used more than once are summed with `weft.add`. Each
    `weft.param` gets a `weft.param_grad` holding its gradient (zeros where the
    loss does not depend on it). A `weft.constant` has no gradient: the ops a
    VJP built toward one (a mask's, a select's unpicked -inf) are read by
    nothing and are dropped, with any other gradient op nothing reads.

    Before:
    ```mlir
    %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x8xf32>
    %y = weft.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %l = weft.cross_entropy %y, %t : (tensor<2x8xf32>, tensor<2xi32>) -> tensor<f32>
    return %l : tensor<f32>
    ```
    After (backward appended before the return):
    ```mlir
    %one = weft.fill {value = 1.0} : tensor<f32>
    %dy = weft.cross_entropy_grad %y, %t, %one : ... -> tensor<2x8xf32>
    %dx = weft.matmul %dy, %w {transpose_b = true} : ...
    %dw = weft.matmul %x, %dy {transpose_a = true} : ...
    weft.param_grad "w", %dw : tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftInsertAdamW : Pass<"weft-insert-adamw", "mlir::func::FuncOp"> {
  let summary = "Appends one AdamW update per parameter gradient";
  let description = [{
    After `weft-autodiff`: for each `weft.param_grad`, appends
    `weft.adamw %param` after the last gradient, so every update reads
    finished gradients. Decoupled weight decay applies to tensors of rank >= 2
    (matrices and embeddings), not to biases and norm scales, as nanoGPT and
    Megatron do. The hyper-parameters and the schedule are recorded on the
    function as the `weft.optimizer` dictionary.
  }];
  let options = [
    Option<"lr", "lr", "double", "1e-3", "peak learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.95", "Adam beta2">,
    Option<"eps", "eps", "double", "1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.1",
           "decoupled weight decay (rank >= 2 tensors)">,
    Option<"schedule", "schedule", "std::string", "\"constant\"",
           "learning-rate schedule: constant or cosine (with warmup)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "linear warmup steps (cosine)">,
    Option<"totalSteps", "total-steps", "int64_t", "0",
           "steps over which the cosine decays to min-lr">,
    Option<"minLr", "min-lr", "double", "0.0", "cosine floor">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftFuseTableGrad : Pass<"weft-fuse-table-grad", "mlir::func::FuncOp"> {
  let summary = "Adds a tied embedding's head gradient in its table's scatter";
  let description = [{
    A tied embedding's gradient is `weft.add(head, weft.embedding_grad(dy,
    ids))`: the head's weight gradient plus the table's scatter-add. The
    scatter's kernel zeroed a whole `[V, D]` table for the rows the batch
    touches and the add read both tables again (GPT-2 124M: two 154 MB
    tables). When the embedding_grad's result is the add's operand and
    nothing else's, both become `weft.embedding_grad(dy, ids, head)`: one
    pass writes `head + 0` on the rows no id touches and `head + sum` on the
    others, bit for bit the add's result. It runs after partitioning, where
    a vocabulary split or a data-parallel sum already has its collectives
    around local pieces. Not in bf16 (the add rounds), not across
    fragments or stages.

    Before:
    ```mlir
    %e = weft.embedding_grad %dy, %ids {vocab = 256 : i64}
        : (tensor<2x16x64xf32>, tensor<2x16xi32>) -> tensor<256x64xf32>
    %g = weft.add %head, %e : tensor<256x64xf32>
    ```
    After:
    ```mlir
    %g = weft.embedding_grad %dy, %ids, %head {vocab = 256 : i64}
        : (tensor<2x16x64xf32>, tensor<2x16xi32>, tensor<256x64xf32>)
        -> tensor<256x64xf32>
    ```
  }];
}

def WeftShareLossStats : Pass<"weft-share-loss-stats", "mlir::func::FuncOp"> {
  let summary = "A cross-entropy's gradient reuses its forward's softmax "
                "statistics";
  let description = [{
    A `weft.cross_entropy` and the `weft.cross_entropy_grad` of the same
    logits and targets each find every row's max and sum of exponentials;
    the gradient's kernel passed over a row three times (max, exponentials
    and their sum, scale). Both become the vocab-parallel ops over one
    shard (`vocab_axes = []`, no all-gather): `cross_entropy_stats` keeps
    the forward's statistics, `cross_entropy_from_stats` gives the loss and
    `cross_entropy_stats_grad` the gradient in one pass, `exp(x - M) / S`
    less the target's one-hot, times `dloss / denominator`. The ops keep
    their marks; the denominator is weft-partition's where it set one, else
    the local rows. Runs after partitioning, where a vocabulary split
    already took this form with its all-gather.

    Before:
    ```mlir
    %l = weft.cross_entropy %x, %t : (tensor<2x16x256xf32>, tensor<2x16xi32>)
        -> tensor<f32>
    %g = weft.cross_entropy_grad %x, %t, %d
        : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<f32>)
        -> tensor<2x16x256xf32>
    ```
    After:
    ```mlir
    %s = weft.cross_entropy_stats %x, %t {vocab_axes = []}
        : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<1x2x16x3xf32>
    %l = weft.cross_entropy_from_stats %s {denominator = 32 : i64}
        : (tensor<1x2x16x3xf32>) -> tensor<f32>
    %g = weft.cross_entropy_stats_grad %x, %t, %s, %d
        {denominator = 32 : i64, vocab_axes = []}
        : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<1x2x16x3xf32>,
           tensor<f32>) -> tensor<2x16x256xf32>
    ```
  }];
}

def WeftFuseBias : Pass<"weft-fuse-bias", "mlir::func::FuncOp"> {
  let summary = "Folds a linear layer's bias_add into its matmul";
  let description = [{
    A `weft.bias_add` whose input is a `weft.matmul`'s only use becomes that
    matmul's `bias` operand: the kernel starts the product from the bias
    rows (BLAS's beta = 1, PyTorch's addmm), so the bias costs no pass of its
    own over the output. It runs after partitioning, where a row-parallel
    layer's all-reduce already stands between its matmul and its bias (the
    bias is added once, to the sum), so only what adds the bias to each
    rank's whole product fuses. Not in a bf16 program, whose matmul rounds
    its product to bf16 before the add; not when the two carry different
    fragment or stage marks.

    Before:
    ```mlir
    %m = weft.matmul %x, %w : (tensor<8x64x64xf32>, tensor<64x192xf32>)
        -> tensor<8x64x192xf32>
    %y = weft.bias_add %m, %b : (tensor<8x64x192xf32>, tensor<192xf32>)
        -> tensor<8x64x192xf32>
    ```
    After:
    ```mlir
    %y = weft.matmul %x, %w, %b
        : (tensor<8x64x64xf32>, tensor<64x192xf32>, tensor<192xf32>)
        -> tensor<8x64x192xf32>
    ```
  }];
}

def WeftPlanMemory : Pass<"weft-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Places every temporary tensor in one preallocated arena";
  let description = [{
    Liveness-based best-fit placement in program order: a result is placed
    before its op's operands are released, so no kernel reads and writes the
    same bytes; a value's bytes are reused after its last use. Each op gets
    `weft.offsets` (byte offset per result, 64-byte aligned) and the function
    `weft.arena_bytes` (the peak). Parameters, gradients and Adam moments are
    persistent and not in the arena. Page faults are expensive on the machines
    we run on, so the runtime allocates and touches the arena once.

    A gradient bucket's inputs (an unblocked `weft.pack`) that are computed
    for it alone are written straight into the pack's buffer, where the pack
    would put them (DDP's `gradient_as_bucket_view`): the buffer is placed
    at the first of them, and the pack copies only the rest (an input read
    by another op, or one not at a 64-byte boundary of the flat buffer).
  }];
}

def WeftEmitProgram : Pass<"weft-emit-program", "mlir::ModuleOp"> {
  let summary = "Writes the runtime program file (docs/program-format.md)";
  let description = [{
    Translates the planned training step into the versioned program file the
    runtime executes: parameters with init specs, buffers (inputs, parameters,
    gradients, Adam moments, arena slices), and one instruction per op.
  }];
  let options = [
    Option<"output", "output", "std::string", "\"\"",
           "program file to write">,
  ];
}

def WeftRaiseOnnx : Pass<"weft-raise-onnx", "mlir::func::FuncOp"> {
  let summary = "Rewrites an imported ONNX graph into weft's ops";
  let description = [{
    The ONNX import (frontends/onnx) leaves each node that depends on an
    input or a parameter as a `weft.onnx_node`, with static shapes and the
    constants it folded. This pass recognises the subgraphs torch.onnx.export
    writes for a transformer (linear layers with their row reshapes, layer
    norm, tanh GELU, token and position embeddings, the QKV split, causal
    attention with its head reshapes, residual adds) and rewrites each into
    the weft op that computes exactly that function; what is left,
    weft-lower-onnx-generic lowers onto generic ops. A module without `weft.onnx_node`s
    is left alone.

    Before:
    ```mlir
    %y = weft.onnx_node "Gemm" "node_addmm" (%x, %w, %b)
        {attrs = {alpha = 1.0, beta = 1.0, transA = 0, transB = 0}, opset = 17}
        : (tensor<32x64xf32>, tensor<64x192xf32>, tensor<192xf32>)
        -> tensor<32x192xf32>
    ```
    After:
    ```mlir
    %m = weft.matmul %x, %w : (tensor<32x64xf32>, tensor<64x192xf32>)
        -> tensor<32x192xf32>
    %y = weft.bias_add %m, %b : (tensor<32x192xf32>, tensor<192xf32>)
        -> tensor<32x192xf32>
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

#endif // WEFT_PASSES_TD

def WeftLowerOnnxGeneric : Pass<"weft-lower-onnx-generic", "mlir::func::FuncOp"> {
  let summary = "Lowers what weft-raise-onnx left of an imported graph onto "
                "generic ops";
  let description = [{
    The generic path (docs/design.md decision 20). Each `weft.onnx_node`
    that no fused pattern consumed becomes the generic op computing exactly
    its ONNX function: elementwise functions (Neg, Exp, Log, Sqrt,
    Reciprocal, Tanh, Sigmoid, Relu, Erf, Sin, Cos, Abs), Add, Sub, Mul and Div with
    broadcasting, Pow, ReduceSum and ReduceMean, Softmax over any axis,
    MatMul (with batch dims, broadcast), Gemm, Reshape,
    Flatten, Squeeze, Unsqueeze, Transpose, Expand, Identity and a Cast to
    the same type; LayerNormalization over any axis with its Mean and
    InvStdDev outputs, written out as ONNX's function body computes it;
    Concat, Slice (any step) and Gather by constant indices
    along one axis, as weft.split and weft.concat of the last dim (a slice
    per run of consecutive indices, the runs concatenated; another axis is
    transposed last and back); Equal, Less, LessOrEqual, Greater,
    GreaterOrEqual, And, Or, Not and IsNaN of floats as masks (binary and
    pointwise mask fns: 1 where true, of the operands' float type; a folded
    bool operand becomes a 0/1 constant); Where by such a mask, or by a
    condition the import folded, as weft.select. A finite one-element
    constant operand becomes the op's `scalar` attribute; any other float
    constant stays a `weft.constant`, which the program holds as a buffer
    (kind `constant`, format version 10). Any other node is refused by node
    name, op type and opset. Runs after weft-raise-onnx; a module without
    `weft.onnx_node`s is left alone.

    Before:
    ```mlir
    %y = weft.onnx_node "Div" "/h.0/Div" (%x, %c) {attrs = {}, opset = 17}
        : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
    ```
    After:
    ```mlir
    %y = weft.pointwise %x {fn = "div", scalar = 8.0} : tensor<2x8x64xf32>
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftMaskedLm : Pass<"weft-masked-lm", "mlir::func::FuncOp"> {
  let summary = "Makes the loss a masked-language-model one (BERT's)";
  let description = [{
    An encoder sees every position, the next token too, so next-token
    cross-entropy trains nothing. This pass marks the returned
    `weft.cross_entropy` `masked`: its targets are the tokens hidden from
    the input, -100 elsewhere (PyTorch's `ignore_index`), and the loss is the
    mean over the step's counted targets, BertForMaskedLM's loss. The
    function's `weft.masked_lm` holds how the runtime hides tokens (BERT's
    recipe: `mask-prob` of the positions are chosen; 80% of those become
    `mask-token`, 10% a random token, 10% stay; docs/program-format.md,
    "Masked-LM batches"), so the program says what it trains on.

    With `given-targets` there is no recipe: the loss is masked, and the
    caller gives every step's inputs and targets (`weft-compile --loss
    cross-entropy`: a masked LM's batches masked elsewhere, or a decoder's
    fine-tuning with -100 on its prompts).

    Refused: a `mask-token` outside the vocabulary, a probability outside
    (0, 1], a function whose result is not a cross-entropy of logits.

    Before:
    ```mlir
    %loss = weft.cross_entropy %logits, %targets
        : (tensor<2x8x256xf32>, tensor<2x8xi32>) -> tensor<f32>
    ```
    After (mask-token=4):
    ```mlir
    func.func @forward(...) -> tensor<f32> attributes {weft.masked_lm =
        {mask_prob = 1.500000e-01 : f64, mask_token = 4 : i64, seed = 0 : i64}}
    %loss = weft.cross_entropy %logits, %targets {masked}
        : (tensor<2x8x256xf32>, tensor<2x8xi32>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"maskToken", "mask-token", "int64_t", "-1",
           "the id that replaces a hidden token (BERT's [MASK])">,
    Option<"maskProb", "mask-prob", "double", "0.15",
           "the share of positions whose token is hidden and predicted">,
    Option<"seed", "seed", "int64_t", "0",
           "the seed of the positions chosen (a pure function of it, the "
           "step and the position)">,
    Option<"givenTargets", "given-targets", "bool", "false",
           "no recipe: the caller gives each step's targets (-100 where "
           "nothing is predicted; weft-run --tokens/--targets)">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftPackDocuments : Pass<"weft-pack-documents", "mlir::func::FuncOp"> {
  let summary = "Trains rows that pack documents, each ending with an EOS id";
  let description = [{
    A row of a packed batch holds several documents, each ending with the
    `eos` token. Attention stays inside a document (block-diagonal causal:
    query i reads keys j <= i of its own document) and positions, learned
    and rotary, restart with each document, so a packed row trains exactly
    like its documents one per row. The runtime finds the documents in each
    step's tokens (docs/program-format.md, "Packed documents"); the
    function records the id and whether the targets are given
    (`weft.documents`), and the cross-entropy
    becomes `masked`: the target of a document's EOS, the next document's
    first token, counts for nothing (-100), and the mean is over the step's
    counted targets.

    With `attention-mask` the rows are padded instead: weft-run is given
    each sample's mask (1 a token, 0 padding, Hugging Face's meaning) and a
    row's tokens are one document, its padding another, so left- and
    right-padded rows train exactly like the unpadded sequences; the
    targets are given (-100 at the padding).

    Refused: an `eos` outside the vocabulary, bidirectional attention (an
    encoder's documents would need both directions bounded), a model whose
    attention is not one `weft.attention` (an ONNX graph on the generic
    path), a function whose result is not a cross-entropy.

    ```mlir
    func.func @forward(...) -> tensor<f32>
        attributes {weft.documents = {eos = 3 : i64, given_targets = false}}
    %loss = weft.cross_entropy %logits, %targets {masked}
    ```
  }];
  let options = [
    Option<"eos", "eos", "int64_t", "-1",
           "the token id that ends each document">,
    Option<"attentionMask", "attention-mask", "bool", "false",
           "padded rows instead: the documents are the runs of each "
           "sample's attention mask (1 a token, 0 padding), given targets">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def WeftReturnLogits : Pass<"weft-return-logits", "mlir::func::FuncOp"> {
  let summary = "Makes the training forward an inference one: it returns "
                "the logits";
  let description = [{
    Every frontend builds `@forward(tokens, targets) -> loss`, the loss a
    `weft.cross_entropy` of the logits against the targets. For a
    forward-only program (`weft-compile --forward-only`) this pass returns
    the logits instead, erases the cross-entropy and drops the targets
    argument, so the program reads only tokens and writes the logits. It
    refuses a function whose returned value is not a cross-entropy, or whose
    targets something else reads.

    Before:
    ```mlir
    func.func @forward(%tokens: tensor<2x8xi32>, %targets: tensor<2x8xi32>)
        -> tensor<f32> {
      ...
      %loss = weft.cross_entropy %logits, %targets
          : (tensor<2x8x256xf32>, tensor<2x8xi32>) -> tensor<f32>
      return %loss : tensor<f32>
    }
    ```
    After:
    ```mlir
    func.func @forward(%tokens: tensor<2x8xi32>) -> tensor<2x8x256xf32> {
      ...
      return %logits : tensor<2x8x256xf32>
    }
    ```
  }];
}
