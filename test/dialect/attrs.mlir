// The dialect verifies the attributes the passes exchange (their names are in
// dialect/AttrNames.h): weft.sharding on params and function arguments,
// weft.shardings (one per result) on ops, storage layouts, global shapes,
// arena offsets, the arena size, the model name and the optimizer. Each bad
// case below was accepted before; weft-partition then crashed on a
// non-sharding element, an axis the mesh lacks failed later elsewhere, and a
// misspelt name was ignored. The first case is well formed.
// RUN: weft-opt %s -split-input-file -verify-diagnostics

weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @fine(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<dims = [["dp"], []]>}) -> tensor<4x8xf32> {
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [["dp"], ["tp"]]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @not_a_sharding(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] must be a #weft.sharding, got "dp"}}
  %y = weft.gelu %x {weft.shardings = ["dp"]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @one_per_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings must list one #weft.sharding per result (1), got []}}
  %y = weft.gelu %x {weft.shardings = []} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @rank(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] has 3 dims for a 'tensor<4x8xf32>'}}
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [["dp"], [], []]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @unknown_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] names axis 'tp', which mesh @mesh does not have}}
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [[], ["tp"]]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @axis_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] names mesh axis 'dp' twice}}
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [["dp"], []], partial = ["dp"]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @blocks(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] has 1 blocks for 2 dims}}
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [["dp"], []], blocks = [3]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{argument 0's weft.sharding names mesh axis 'dp' but no mesh is in scope}}
func.func @no_mesh(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<dims = [["dp"], []]>}) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @param() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.sharding has 1 dims for a 'tensor<4x8xf32>'}}
  %w = weft.param "w" {init = "zeros", weft.sharding = #weft.sharding<dims = [["dp"]]>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @misspelt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{has unknown attribute 'weft.sharding_typo' (weft's are declared in dialect/AttrNames.h; a misspelt one would be ignored)}}
  %y = weft.gelu %x {weft.sharding_typo = 1} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @storage_on_an_op(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.storage belongs on a weft.param}}
  %y = weft.gelu %x {weft.storage = #weft.sharding<dims = [["dp"], []]>} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @storage_axis() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.state_storage names axis 'tp', which mesh @mesh does not have}}
  %w = weft.param "w" {init = "zeros", weft.state_storage = #weft.sharding<dims = [["tp"]]>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

// An asynchronous collective (weft.async, by weft-bucket-gradients and
// weft-prefetch-params) is a unit attribute on a collective; the axes an
// AdamW's state is split over (weft.shard_axes, by weft-partition) are the
// mesh's. The well-formed ones verify.
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @async_ok(%x: tensor<16xf32>) -> tensor<16xf32> attributes {weft.mesh = @mesh} {
  %y = weft.all_reduce %x {axes = ["dp"], weft.async} : (tensor<16xf32>) -> tensor<16xf32>
  %w = weft.param "w" {init = "zeros"} : tensor<4x4xf32>
  weft.adamw %w {weight_decay = true, weft.shard_axes = ["dp"]} : tensor<4x4xf32>
  return %y : tensor<16xf32>
}

// -----

func.func @async_on_compute(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{weft.async belongs on an all_reduce, all_gather, reduce_scatter or ring_shift}}
  %y = weft.gelu %x {weft.async} : tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @async_bool(%x: tensor<16xf32>) -> tensor<16xf32> attributes {weft.mesh = @mesh} {
  // expected-error @+1 {{weft.async must be a unit attribute, got true}}
  %y = weft.all_reduce %x {axes = ["dp"], weft.async = true} : (tensor<16xf32>) -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @shard_axes_unknown() attributes {weft.mesh = @mesh} {
  %w = weft.param "w" {init = "zeros"} : tensor<4x4xf32>
  // expected-error @+1 {{weft.shard_axes names axis 'tp', which the mesh in scope does not have}}
  weft.adamw %w {weight_decay = true, weft.shard_axes = ["tp"]} : tensor<4x4xf32>
  return
}

// -----

func.func @shard_axes_type() {
  %w = weft.param "w" {init = "zeros"} : tensor<4x4xf32>
  // expected-error @+1 {{weft.shard_axes must be a list of mesh axis names, got 3 : i64}}
  weft.adamw %w {weight_decay = true, weft.shard_axes = 3} : tensor<4x4xf32>
  return
}

// -----

func.func @shard_axes_not_adamw(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{weft.shard_axes belongs on a weft.adamw}}
  %y = weft.gelu %x {weft.shard_axes = ["dp"]} : tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

// A stage function's schedule is a #weft.schedule, verified by the
// schedule library: a kind it knows, chunks only when interleaved, runs
// only (and always) when custom, and runs it can read.
func.func @schedule_ok() attributes {weft.pipeline_schedule = #weft.schedule<kind = "custom", runs = "F0 F1 B0 B1|F0 B0 F1 B1">} {
  return
}

// -----

// expected-error @+1 {{schedule kind must be gpipe, 1f1b, interleaved, zb-h1 or custom, got 'zigzag'}}
func.func @schedule_kind() attributes {weft.pipeline_schedule = #weft.schedule<kind = "zigzag">} {
  return
}

// -----

// expected-error @+1 {{schedule 'interleaved' with virtual_stages 1: interleaved needs 2 or more, the others 1}}
func.func @schedule_chunks() attributes {weft.pipeline_schedule = #weft.schedule<kind = "interleaved">} {
  return
}

// -----

// expected-error @+1 {{schedule 'custom' needs its runs}}
func.func @schedule_runs() attributes {weft.pipeline_schedule = #weft.schedule<kind = "custom">} {
  return
}

// -----

// expected-error @+1 {{schedule: malformed pipeline run 'X9'}}
func.func @schedule_bad_run() attributes {weft.pipeline_schedule = #weft.schedule<kind = "custom", runs = "F0 X9">} {
  return
}

// -----

// expected-error @+1 {{weft.pipeline_schedule must be a function's #weft.schedule, got "1f1b"}}
func.func @schedule_string() attributes {weft.pipeline_schedule = "1f1b"} {
  return
}

// -----

// A tensor-parallel role (weft-infer-tp-roles) splits a dim the parameter
// has, in blocks that divide it, and names a known kind; it belongs on a
// weft.param. The well-formed one verifies.
func.func @tp_role_ok() -> tensor<8x12xf32> {
  %w = weft.param "w" {init = "zeros", weft.tp_role = #weft.tp_role<kind = "column", dim = 1, blocks = 3>} : tensor<8x12xf32>
  return %w : tensor<8x12xf32>
}

// -----

func.func @tp_role_dim() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.tp_role splits dim 2 of a 'tensor<4x8xf32>' of rank 2}}
  %w = weft.param "w" {init = "zeros", weft.tp_role = #weft.tp_role<kind = "row", dim = 2>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @tp_role_blocks() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.tp_role has 3 blocks, which do not divide dim 1 (size 8)}}
  %w = weft.param "w" {init = "zeros", weft.tp_role = #weft.tp_role<kind = "column", dim = 1, blocks = 3>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @tp_role_kind() -> tensor<4x8xf32> {
  // expected-error @+1 {{tp_role kind must be column, row, vocab or replicated, got 'diagonal'}}
  %w = weft.param "w" {init = "zeros", weft.tp_role = #weft.tp_role<kind = "diagonal">} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @tp_role_not_param(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.tp_role belongs on a weft.param}}
  %y = weft.gelu %x {weft.tp_role = #weft.tp_role<kind = "row">} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @tp_role_type() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.tp_role must be a #weft.tp_role, got "row"}}
  %w = weft.param "w" {init = "zeros", weft.tp_role = "row"} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

// A padded vocabulary's model rows: at least 1, at most the stored rows
// (the global shape's, after weft-partition).
func.func @logical_rows() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.logical_rows is 5, not in [1, 4] (the stored rows)}}
  %w = weft.param "w" {init = "zeros", weft.logical_rows = 5} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @logical_rows_sharded() -> tensor<4x8xf32> {
  // Stored as [8, 8] over two ranks: 7 model rows are fine.
  %w = weft.param "w" {init = "zeros", weft.logical_rows = 7, weft.global_shape = array<i64: 8, 8>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @global_shape() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.global_shape must be a weft.param's global shape, one size per dim, got array<i64: 8>}}
  %w = weft.param "w" {init = "zeros", weft.global_shape = array<i64: 8>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @offsets(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.offsets must hold one arena offset per result (1), got array<i64: 0, 64>}}
  %y = weft.gelu %x {weft.offsets = array<i64: 0, 64>} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{weft.arena_bytes must be a non-negative integer, got -1 : i64}}
func.func @arena(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.arena_bytes = -1 : i64} {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{weft.model must be a string, got 5 : i64}}
func.func @model(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.model = 5 : i64} {
  return %x : tensor<4x8xf32>
}

// -----

// Two meshes (a pipeline's stages will each have one): a function names its
// mesh by symbol, and its shardings and collectives are checked against it.
weft.mesh @stage0 {axes = ["dp"], shape = array<i64: 2>}
weft.mesh @stage1 {axes = ["tp"], shape = array<i64: 2>}
func.func @on_stage1(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<dims = [[], ["tp"]]>}) -> tensor<4x8xf32> attributes {weft.mesh = @stage1} {
  %y = weft.all_reduce %x {axes = ["tp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @on_stage0(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.mesh = @stage0} {
  // expected-error @+1 {{unknown mesh axis 'tp'}}
  %y = weft.all_reduce %x {axes = ["tp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @stage0 {axes = ["dp"], shape = array<i64: 2>}
weft.mesh @stage1 {axes = ["tp"], shape = array<i64: 2>}
// With two meshes a function must name one.
func.func @unnamed(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{has no mesh: its function names none}}
  %y = weft.all_reduce %x {axes = ["dp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @not_a_mesh(%x: tensor<4xf32>) -> tensor<4xf32> attributes {weft.mesh = @not_a_mesh} {
  return %x : tensor<4xf32>
}
// expected-error @-3 {{names @not_a_mesh, which is not a weft.mesh}}

// -----

// weft.layer: any op's layer, -1 (before the first layer) or more; a
// parameter's is set by the frontend, others by the planner and autodiff.
func.func @layers(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %w = weft.param "w" {init = "ones", weft.layer = -1} : tensor<16x8xf32>
  %x = weft.embedding %w, %t {weft.layer = 0} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @bad_layer(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %w = weft.param "w" {init = "ones"} : tensor<16x8xf32>
  // expected-error @+1 {{weft.layer must be the op's layer (an integer >= -1), got -2}}
  %x = weft.embedding %w, %t {weft.layer = -2} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

// A forward-only function's named tensors (format version 8): weft.input
// names a float argument, weft.output a result.
func.func @named(%x: tensor<2x3xf32> {weft.input = "x"}) -> (tensor<2x3xf32> {weft.output = "y"}) {
  %y = weft.pointwise %x {fn = "exp"} : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Token ids are found by position, not named.
// expected-error @+1 {{argument 0's weft.input must name a float tensor argument (a non-empty string), got "ids" on 'tensor<2x4xi32>'}}
func.func @named_ids(%t: tensor<2x4xi32> {weft.input = "ids"}) -> tensor<2x4xi32> {
  return %t : tensor<2x4xi32>
}

// -----

// expected-error @+1 {{result 0's weft.output must be a non-empty string, got ""}}
func.func @empty_output(%x: tensor<2x3xf32> {weft.input = "x"}) -> (tensor<2x3xf32> {weft.output = ""}) {
  %y = weft.pointwise %x {fn = "exp"} : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Function-level and op-level attributes the pipeline passes write, all well
// formed: the positive case for the negatives below.
weft.mesh @mesh {axes = ["dp", "pp"], shape = array<i64: 2, 2>}
func.func @stage_ok(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.mesh = @mesh, weft.microbatches = 4 : i64, weft.vocab = 256 : i64, weft.labels = 2 : i64, weft.masked_lm = {mask_token = 103 : i64, mask_prob = 1.5e-01 : f64, seed = 0 : i64}, weft.stage = 0 : i64, weft.num_stages = 2 : i64, weft.pipeline_axis = "pp", weft.pipeline_schedule = #weft.schedule<kind = "1f1b">, weft.stage_layers = "0-1", weft.optimizer = {lr = 1.0e-03 : f64}} {
  %w = weft.param "w" {init = "zeros", weft.replica, weft.global_shape = array<i64: 4, 8>} : tensor<4x8xf32>
  %y = weft.add %x, %w {weft.fragment = "forward", weft.chunk = 1 : i64} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A sharding's blocks count equal blocks of a dim: at least one each.
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @block_count(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] has a block count 0 < 1}}
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [["dp"], []], blocks = [1, 0]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Only a ranked tensor is sharded.
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
// expected-error @+1 {{argument 0's weft.sharding shards a 'f32', not a ranked tensor}}
func.func @scalar_arg(%x: f32 {weft.sharding = #weft.sharding<dims = []>}) -> f32 {
  return %x : f32
}

// -----

// Each dim of a sharding is a list of axis names.
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @dim_not_a_list(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] dim 1 must be a list of axis names}}
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [["dp"], "tp"]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @partial_not_a_name(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.shardings[0] partial holds 1 : i64, not an axis name}}
  %y = weft.gelu %x {weft.shardings = [#weft.sharding<dims = [[], []], partial = [1]>]} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// weft.sharding describes an op's single result; a function has none.
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
// expected-error @+1 {{weft.sharding needs an op of one result, this one has 0}}
func.func @sharding_on_a_function() attributes {weft.sharding = #weft.sharding<dims = []>} {
  return
}

// -----

func.func @global_shape_size() -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.global_shape has a size 0 < 1}}
  %w = weft.param "w" {init = "zeros", weft.global_shape = array<i64: 0, 8>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{weft.microbatches must be a function's micro-batch count, 1 to 2^20, got 0 : i64}}
func.func @microbatches(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.microbatches = 0 : i64} {
  return %x : tensor<4x8xf32>
}

// -----

// Context parallelism's attention is all-gather (no attribute), all-to-all
// or ring.
// expected-error @+1 {{weft.context_parallel must be a function's "all-to-all" or "ring", got "ulysses"}}
func.func @context_parallel(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.context_parallel = "ulysses"} {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{weft.vocab must be a function's vocabulary, 1 to 2^31-1, got 2147483648 : i64}}
func.func @vocab(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.vocab = 2147483648 : i64} {
  return %x : tensor<4x8xf32>
}

// -----

// weft.labels (a classifier's label count) is checked as weft.vocab is, and
// only on a function.
func.func @labels_on_an_op(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.labels must be a function's vocabulary, 1 to 2^31-1, got 2 : i64}}
  %y = weft.gelu %x {weft.labels = 2 : i64} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A masking probability of 0 masks nothing.
// expected-error @+1 {{weft.masked_lm must be a function's {mask_token (0 to 2^31-1), mask_prob (in (0, 1]), seed (>= 0)}}
func.func @masked_lm(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.masked_lm = {mask_token = 103 : i64, mask_prob = 0.0 : f64, seed = 0 : i64}} {
  return %x : tensor<4x8xf32>
}

// -----

// A function names its mesh by symbol, not by string.
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
// expected-error @+1 {{weft.mesh must be a function's mesh, a symbol, got "mesh"}}
func.func @mesh_string(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.mesh = "mesh"} {
  return %x : tensor<4x8xf32>
}

// -----

func.func @fragment(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.fragment must be "prologue", "forward", "backward", "weight" or "optimizer", got "middle"}}
  %y = weft.gelu %x {weft.fragment = "middle"} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A model chunk belongs to a forward or backward op, not a weight-gradient one.
func.func @chunk(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.chunk must be the model chunk (0 to 1023) of an op in a forward or backward fragment, got 1 : i64}}
  %y = weft.gelu %x {weft.fragment = "weight", weft.chunk = 1 : i64} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @replica_on_an_op(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{weft.replica must be a unit attribute on a weft.param, got unit}}
  %y = weft.gelu %x {weft.replica} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{weft.stage must be a function's stage index or count (0 to 2^20), got -1 : i64}}
func.func @stage(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.stage = -1 : i64} {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{weft.pipeline_schedule must be a function's #weft.schedule, got 1 : i64}}
func.func @schedule(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.pipeline_schedule = 1 : i64} {
  return %x : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{weft.optimizer must be a dictionary, got "adamw"}}
func.func @optimizer(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {weft.optimizer = "adamw"} {
  return %x : tensor<4x8xf32>
}

// -----

func.func @tp_role_negative_dim() -> tensor<4x8xf32> {
  // expected-error @+1 {{tp_role dim must be >= 0, got -1}}
  %w = weft.param "w" {init = "zeros", weft.tp_role = #weft.tp_role<kind = "row", dim = -1>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}

// -----

func.func @tp_role_zero_blocks() -> tensor<4x8xf32> {
  // expected-error @+1 {{tp_role blocks must be >= 1, got 0}}
  %w = weft.param "w" {init = "zeros", weft.tp_role = #weft.tp_role<kind = "column", dim = 1, blocks = 0>} : tensor<4x8xf32>
  return %w : tensor<4x8xf32>
}
