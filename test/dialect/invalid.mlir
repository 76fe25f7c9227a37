// Each verifier diagnostic of the weft dialect, one case per split.
// RUN: weft-opt %s -split-input-file -verify-diagnostics

func.func @matmul_contracting_mismatch(%a: tensor<8x64xf32>, %b: tensor<32x16xf32>) {
  // expected-error @+2 {{contracting dims differ: a [8, 64] (transpose_a=false) gives K=64, b [32, 16] (transpose_b=false) gives K=32}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.matmul %a, %b : (tensor<8x64xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// A fused bias (weft-fuse-bias): one per output column, never on a weight
// gradient's product (transpose_a).
func.func @matmul_bias_length(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<5xf32>) {
  // expected-error @+2 {{bias is [5], expected [6]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.matmul %x, %w, %b : (tensor<4x8xf32>, tensor<8x6xf32>, tensor<5xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @matmul_bias_transpose_a(%x: tensor<4x8xf32>, %dy: tensor<4x6xf32>, %b: tensor<6xf32>) {
  // expected-error @+2 {{a bias needs transpose_a=false (a weight gradient has none)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.matmul %x, %dy, %b {transpose_a = true} : (tensor<4x8xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<8x6xf32>
  return
}

// -----

// bf16 keeps its bias_add: the product is rounded to bf16 before the add.
func.func @matmul_bias_bf16(%x: tensor<4x8xbf16>, %w: tensor<8x6xbf16>, %b: tensor<6xbf16>) {
  // expected-error @+2 {{a bias needs f32 or f64, got bf16 (a bf16 product is rounded before its bias_add)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.matmul %x, %w, %b : (tensor<4x8xbf16>, tensor<8x6xbf16>, tensor<6xbf16>) -> tensor<4x6xbf16>
  return
}

// -----

// An embedding_grad's base (weft-fuse-table-grad): the table's type, not bf16.
func.func @embedding_grad_base_shape(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>, %h: tensor<31x8xf32>) {
  // expected-error @+2 {{base is 'tensor<31x8xf32>', expected 'tensor<32x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = weft.embedding_grad %dy, %ids, %h {vocab = 32 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<31x8xf32>) -> tensor<32x8xf32>
  return
}

// -----

func.func @embedding_grad_base_bf16(%dy: tensor<2x4x8xbf16>, %ids: tensor<2x4xi32>, %h: tensor<32x8xbf16>) {
  // expected-error @+2 {{a base needs f32 or f64, got bf16}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = weft.embedding_grad %dy, %ids, %h {vocab = 32 : i64} : (tensor<2x4x8xbf16>, tensor<2x4xi32>, tensor<32x8xbf16>) -> tensor<32x8xbf16>
  return
}

// -----

func.func @matmul_wrong_result(%a: tensor<8x64xf32>, %b: tensor<64x16xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<8x16xf32>' are incompatible with return type(s) of operation 'tensor<8x17xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.matmul %a, %b : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x17xf32>
  return
}

// -----

func.func @attention_gqa_indivisible(%q: tensor<2x8x96xf32>, %k: tensor<2x8x96xf32>) {
  // expected-error @+2 {{num_heads=6 is not divisible by num_kv_heads=4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.attention %q, %k, %k {num_heads = 6, num_kv_heads = 4} : (tensor<2x8x96xf32>, tensor<2x8x96xf32>, tensor<2x8x96xf32>) -> tensor<2x8x96xf32>
  return
}

// -----

func.func @attention_heads_do_not_divide(%q: tensor<2x8x64xf32>) {
  // expected-error @+2 {{num_heads=5 does not divide q's features=64}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.attention %q, %q, %q {num_heads = 5, num_kv_heads = 5} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_kv_width(%q: tensor<2x8x64xf32>, %k: tensor<2x8x48xf32>) {
  // expected-error @+2 {{k must have num_kv_heads*head_dim=2*16=32 features, got 48}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.attention %q, %k, %k {num_heads = 4, num_kv_heads = 2} : (tensor<2x8x64xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_odd_head_dim(%x: tensor<2x8x12xf32>) {
  // expected-error @+2 {{head_dim=3 must be even to rotate pairs}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.rope %x {num_heads = 4, theta = 10000.0} : (tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  return
}

// -----

// A RoPE frequency table has one entry per rotated pair (head_dim / 2).
func.func @rope_table_size(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{inv_freq has 3 entries, expected head_dim/2=2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.rope %x {num_heads = 4, theta = 10000.0, inv_freq = array<f64: 1.0, 0.5, 0.25>} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @rope_table_value(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{inv_freq[1]=-5.000000e-01 must be finite and positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.rope %x {num_heads = 4, theta = 10000.0, inv_freq = array<f64: 1.0, -0.5>} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @layer_norm_gamma(%x: tensor<2x8x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+2 {{gamma must have shape [64] to match the last dim of x, got [32]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.layer_norm %x, %g, %g {eps = 1.0e-5} : (tensor<2x8x64xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @split_sizes(%x: tensor<2x8x192xf32>) {
  // expected-error @+2 {{sizes sum to 190 but the last dim of x is 192}}
  // expected-error @+1 {{failed to infer returned types}}
  %y:2 = weft.split %x {sizes = array<i64: 95, 95>} : (tensor<2x8x192xf32>) -> (tensor<2x8x95xf32>, tensor<2x8x95xf32>)
  return
}

// -----

func.func @mse_shapes(%p: tensor<2x1xf32>, %y: tensor<2xf32>) {
  // expected-error @+2 {{pred [2, 1] of 'f32' and target [2] of 'f32' must have one shape and float type}}
  // expected-error @+1 {{failed to infer returned types}}
  %l = weft.mse_loss %p, %y : (tensor<2x1xf32>, tensor<2xf32>) -> tensor<f32>
  return
}

// -----

// A padded vocabulary's classes (weft-pad-vocab) are at most the columns.
func.func @cross_entropy_classes(%l: tensor<2x8x256xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+2 {{classes=257 exceeds the logits' 256 columns}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.cross_entropy %l, %t {classes = 257} : (tensor<2x8x256xf32>, tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_stats_classes(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+2 {{classes must be >= 1, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = weft.cross_entropy_stats %l, %t {vocab_axes = ["tp"], classes = 0} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<1x2x4x3xf32>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<2x8x256xf32>, %t: tensor<2x7xi32>) {
  // expected-error @+2 {{logits [2, 8, 256] must be targets [2, 7] plus a vocab dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.cross_entropy %l, %t : (tensor<2x8x256xf32>, tensor<2x7xi32>) -> tensor<f32>
  return
}

// -----

func.func @position_table_too_short(%x: tensor<2x8x64xf32>, %p: tensor<4x64xf32>) {
  // expected-error @+2 {{seq=8 exceeds the table's positions=4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.position_embedding %x, %p : (tensor<2x8x64xf32>, tensor<4x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_float_ids(%t: tensor<256x64xf32>, %ids: tensor<2x8xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer values}}
  %y = weft.embedding %t, %ids : (tensor<256x64xf32>, tensor<2x8xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @param_bad_init() {
  // expected-error @+1 {{init must be normal, zeros, ones or loaded, got 'uniform'}}
  %w = weft.param "w" {init = "uniform"} : tensor<4x4xf32>
  return
}

// -----

func.func @param_normal_needs_std() {
  // expected-error @+1 {{init normal needs std > 0, got 0}}
  %w = weft.param "w" {init = "normal"} : tensor<4x4xf32>
  return
}

// -----

func.func @adamw_of_non_param(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{updates a parameter: operand 0 must be a weft.param}}
  weft.adamw %x {weight_decay = true} : tensor<4x4xf32>
  return
}

// -----

// expected-note @+1 {{prior use here}}
func.func @elementwise_type_mismatch(%a: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{use of value '%b' expects different type than prior uses}}
  %y = weft.add %a, %b : tensor<4xf32>
  return
}

// -----

weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
func.func @all_gather_wrong_size(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result dim 1 is 16, expected 32 (group size 4)}}
  %y = weft.all_gather %x {axes = ["tp"], dim = 1} : (tensor<4x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @attention_block_lse(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>) {
  // expected-error @+1 {{lse must be [B, H, Sq] = [2, 2, 4]}}
  %o, %l = weft.attention_block %q, %k, %k {num_heads = 2, num_kv_heads = 1, ring_step = 0, seq_axes = ["cp"]} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x2xf32>)
  return
}

// -----

weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @all_to_all_same_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{split_dim 1 and concat_dim 1 must be two different dims of rank 2}}
  %y = weft.all_to_all %x {axes = ["cp"], split_dim = 1, concat_dim = 1} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @all_to_all_wrong_size(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result dim 0 is 4, expected 8 (group size 2)}}
  %y = weft.all_to_all %x {axes = ["cp"], split_dim = 1, concat_dim = 0} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 3>}
func.func @reduce_scatter_indivisible(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{group size 3 does not divide dim 0 of size 4}}
  %y = weft.reduce_scatter %x {axes = ["dp"], dim = 0} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  return
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @unknown_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{unknown mesh axis 'tp'}}
  %y = weft.all_reduce %x {axes = ["tp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @no_mesh(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{has no mesh: its function names none (weft.mesh = @name) and its module has not exactly one weft.mesh}}
  %y = weft.all_reduce %x {axes = ["dp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// expected-error @+1 {{axis 'dp' appears twice}}
weft.mesh @mesh {axes = ["dp", "dp"], shape = array<i64: 2, 2>}

// -----

// weft.act names an activation of transformers' ACT2FN that weft implements.
func.func @act_unknown_kind(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'weft.act' op unknown activation 'gelu_10' (expected one of gelu, gelu_python}}
  %y = weft.act %x {kind = "gelu_10"} : tensor<2x8xf32>
  return
}

// -----

func.func @cast_to_itself(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{casts 'f32' to itself}}
  %y = weft.cast %x : tensor<4xf32> to tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @cast_changes_shape(%x: tensor<4xf32>) -> tensor<2x2xbf16> {
  // expected-error @+1 {{changes the shape 'tensor<4xf32>' to 'tensor<2x2xbf16>'; a cast only changes the element type}}
  %y = weft.cast %x : tensor<4xf32> to tensor<2x2xbf16>
  return %y : tensor<2x2xbf16>
}

// -----

func.func @pack_blocks_not_dividing(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'weft.pack' op piece 0 has 3 elements, not a multiple of blocks=2}}
  %p = weft.pack %a {blocks = 2} : (tensor<3xf32>) -> tensor<3xf32>
  return %p : tensor<3xf32>
}

// -----

func.func @unpack_blocks_zero(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'weft.unpack' op blocks must be at least 1, got 0}}
  %p = weft.unpack %a {blocks = 0} : (tensor<4xf32>) -> tensor<4xf32>
  return %p : tensor<4xf32>
}

// -----

func.func @layer_norm_nan_eps(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{eps must be finite and >= 0, got}}
  %y = weft.layer_norm %x, %g, %g {eps = 0x7FF8000000000000 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @rms_norm_negative_eps(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{eps must be finite and >= 0, got -1}}
  %y = weft.rms_norm %x, %g {eps = -1.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// add_row's row must be one of the table's.
func.func @add_row_out_of_range(%x: tensor<2x8xf32>, %t: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{row 2 is outside the table's 2 rows}}
  %y = weft.add_row %x, %t {row = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// The table's width is the features'.
func.func @add_row_width(%x: tensor<2x8xf32>, %t: tensor<2x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{table 'tensor<2x4xf32>' must be [rows, 8] of 'tensor<2x8xf32>''s element type}}
  %y = weft.add_row %x, %t {row = 0 : i64} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @row_grad_out_of_range(%v: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{places a vector at row 3 of 2 rows}}
  %t = weft.row_grad %v {row = 3 : i64, rows = 2 : i64} : (tensor<8xf32>) -> tensor<2x8xf32>
  return %t : tensor<2x8xf32>
}

// -----

// A parameter's shape is known at compile time: the runtime allocates it.
func.func @param_dynamic_shape() {
  // expected-error @+1 {{parameter 'w' needs a static shape}}
  %w = weft.param "w" {init = "zeros"} : tensor<?x4xf32>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<256xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+2 {{table must be [vocab, dim], got [256]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.embedding %t, %ids : (tensor<256xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @position_embedding_rank(%x: tensor<8x64xf32>, %p: tensor<16x64xf32>) {
  // expected-error @+2 {{expects x [batch, seq, dim] and table [positions, dim]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.position_embedding %x, %p : (tensor<8x64xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @position_embedding_width(%x: tensor<2x8x64xf32>, %p: tensor<16x32xf32>) {
  // expected-error @+2 {{table dim 32 differs from x dim 64}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.position_embedding %x, %p : (tensor<2x8x64xf32>, tensor<16x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @position_embedding_element(%x: tensor<2x8x64xf32>, %p: tensor<16x64xf64>) {
  // expected-error @+2 {{operands mix element types 'f32' and 'f64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.position_embedding %x, %p : (tensor<2x8x64xf32>, tensor<16x64xf64>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<64xf32>, %b: tensor<64x16xf32>) {
  // expected-error @+2 {{operands must have rank >= 2, got [64] and [64, 16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.matmul %a, %b : (tensor<64xf32>, tensor<64x16xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @split_empty_slice(%x: tensor<2x8x192xf32>) {
  // expected-error @+2 {{sizes[0]=0 must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y:2 = weft.split %x {sizes = array<i64: 0, 192>} : (tensor<2x8x192xf32>) -> (tensor<2x8x0xf32>, tensor<2x8x192xf32>)
  return
}

// -----

func.func @concat_nothing() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.concat : () -> tensor<2x8xf32>
  return
}

// -----

func.func @concat_leading_dims(%a: tensor<2x8x4xf32>, %b: tensor<2x7x4xf32>) {
  // expected-error @+2 {{input 1 has type 'tensor<2x7x4xf32>', leading dims must match input 0's 'tensor<2x8x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.concat %a, %b : (tensor<2x8x4xf32>, tensor<2x7x4xf32>) -> tensor<2x8x8xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<8x16xf32>) {
  // expected-error @+2 {{x must be [batch, seq, heads*head_dim], got [8, 16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.rope %x {num_heads = 4, theta = 10000.0} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @rope_heads_do_not_divide(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{num_heads=3 does not divide x's features=16}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.rope %x {num_heads = 3, theta = 10000.0} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// A rope's scale (yarn's attention factor) multiplies every element.
func.func @rope_scale(%x: tensor<2x8x16xf32>) {
  // expected-error @+2 {{scale=0.000000e+00 must be finite and positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.rope %x {num_heads = 4, theta = 10000.0, scale = 0.0} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<8x64xf32>) {
  // expected-error @+2 {{q, k and v must be [batch, seq, features]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.attention %q, %q, %q {num_heads = 4, num_kv_heads = 4} : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @attention_zero_heads(%q: tensor<2x8x64xf32>) {
  // expected-error @+2 {{num_heads=0 and num_kv_heads=4 must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.attention %q, %q, %q {num_heads = 0, num_kv_heads = 4} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_seq(%q: tensor<2x8x64xf32>, %k: tensor<2x4x64xf32>) {
  // A block of queries may read a longer sequence of keys (context
  // parallelism), never a shorter one.
  // expected-error @+2 {{k has shape [2, 4, 64] but q has [2, 8, 64]: batch must agree, and q's seq divide k's and v's}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.attention %q, %k, %k {num_heads = 4, num_kv_heads = 4} : (tensor<2x8x64xf32>, tensor<2x4x64xf32>, tensor<2x4x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_grad_dy(%dy: tensor<2x8x32xf32>, %q: tensor<2x8x64xf32>) {
  // expected-error @+2 {{dy must have q's type}}
  // expected-error @+1 {{failed to infer returned types}}
  %g:3 = weft.attention_grad %dy, %q, %q, %q {num_heads = 4, num_kv_heads = 4} : (tensor<2x8x32xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>)
  return
}

// -----

func.func @embedding_grad_ids(%dy: tensor<2x8x64xf32>, %ids: tensor<2x7xi32>) {
  // expected-error @+2 {{dy [2, 8, 64] must be ids [2, 7] plus a dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = weft.embedding_grad %dy, %ids {vocab = 256} : (tensor<2x8x64xf32>, tensor<2x7xi32>) -> tensor<256x64xf32>
  return
}

// -----

func.func @position_embedding_grad_positions(%dy: tensor<2x8x64xf32>) {
  // expected-error @+2 {{dy must be [batch, seq, dim] with seq <= positions=4}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = weft.position_embedding_grad %dy {positions = 4} : (tensor<2x8x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @swiglu_grad_types(%dy: tensor<2x8xf32>, %gate: tensor<2x4xf32>) {
  // expected-error @+2 {{dy, gate and up must have one type}}
  // expected-error @+1 {{failed to infer returned types}}
  %g:2 = weft.swiglu_grad %dy, %gate, %dy : (tensor<2x8xf32>, tensor<2x4xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}

// -----

// The vocab-parallel cross-entropy ops (weft-partition makes them per rank),
// well formed: K = 2 shards of statistics for targets [2, 4].
func.func @cross_entropy_stats_ok(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %d: tensor<f32>) {
  %s = weft.cross_entropy_stats %l, %t {vocab_axes = ["tp"]} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<1x2x4x3xf32>
  %all = weft.fill {value = 0.0} : tensor<2x2x4x3xf32>
  %loss = weft.cross_entropy_from_stats %all {denominator = 8} : (tensor<2x2x4x3xf32>) -> tensor<f32>
  %g = weft.cross_entropy_stats_grad %l, %t, %all, %d {vocab_axes = ["tp"], denominator = 8} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x2x4x3xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  return
}

// -----

func.func @cross_entropy_from_stats_shape(%s: tensor<2x8x2xf32>) {
  // expected-error @+2 {{stats [2, 8, 2] must be [K, rows..., 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %loss = weft.cross_entropy_from_stats %s {denominator = 8} : (tensor<2x8x2xf32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_from_stats_denominator(%s: tensor<2x8x3xf32>) {
  // expected-error @+2 {{denominator must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %loss = weft.cross_entropy_from_stats %s {denominator = 0} : (tensor<2x8x3xf32>) -> tensor<f32>
  return
}

// -----

// A negative one too (the attribute's getter is unsigned: -1 verified).
func.func @cross_entropy_from_stats_negative(%s: tensor<2x8x3xf32>) {
  // expected-error @+2 {{denominator must be positive, got -1}}
  // expected-error @+1 {{failed to infer returned types}}
  %loss = weft.cross_entropy_from_stats %s {denominator = -1} : (tensor<2x8x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_stats_grad_stats(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %s: tensor<2x4x2x3xf32>, %d: tensor<f32>) {
  // expected-error @+2 {{stats [2, 4, 2, 3] must be [K] + the targets' shape [2, 4] + [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = weft.cross_entropy_stats_grad %l, %t, %s, %d {vocab_axes = ["tp"], denominator = 8} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4x2x3xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  return
}

// -----

func.func @cross_entropy_stats_grad_denominator(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %s: tensor<2x2x4x3xf32>, %d: tensor<f32>) {
  // expected-error @+2 {{denominator must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = weft.cross_entropy_stats_grad %l, %t, %s, %d {vocab_axes = ["tp"], denominator = 0} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x2x4x3xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  return
}

// -----

func.func @cross_entropy_stats_grad_negative(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %s: tensor<2x2x4x3xf32>, %d: tensor<f32>) {
  // expected-error @+2 {{denominator must be positive, got -5}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = weft.cross_entropy_stats_grad %l, %t, %s, %d {vocab_axes = ["tp"], denominator = -5} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x2x4x3xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  return
}

// -----

// expected-error @+1 {{has 2 axes but 1 sizes}}
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2>}

// -----

// expected-error @+1 {{axis 'tp' has size 0, expected >= 1}}
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 0>}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @no_axes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{needs at least one mesh axis}}
  %y = weft.all_reduce %x {axes = []} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @all_gather_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %y = weft.all_gather %x {axes = ["dp"], dim = 2} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// A slice keeps the operand's rank.
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @slice_rank(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 0 is out of range for rank 2}}
  %y = weft.slice %x {axes = ["dp"], dim = 0} : (tensor<4x8xf32>) -> tensor<2x8x1xf32>
  return
}

// -----

weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @all_reduce_type(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result type must equal the operand type}}
  %y = weft.all_reduce %x {axes = ["dp"]} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

// pack and unpack, well formed: 4 + 6 elements, 2 blocks.
func.func @pack_ok(%a: tensor<2x2xf32>, %b: tensor<6xf32>) {
  %p = weft.pack %a, %b {blocks = 2} : (tensor<2x2xf32>, tensor<6xf32>) -> tensor<10xf32>
  %u:2 = weft.unpack %p {blocks = 2} : (tensor<10xf32>) -> (tensor<2x2xf32>, tensor<6xf32>)
  return
}

// -----

func.func @pack_not_flat(%a: tensor<4xf32>) {
  // expected-error @+1 {{'weft.pack' op packed buffer must be 1-D, got 'tensor<2x2xf32>'}}
  %p = weft.pack %a : (tensor<4xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @pack_element(%a: tensor<4xf64>) {
  // expected-error @+1 {{'weft.pack' op mixes element types 'f64' and 'f32'}}
  %p = weft.pack %a : (tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

func.func @unpack_count(%p: tensor<8xf32>) {
  // expected-error @+1 {{'weft.unpack' op packed buffer has 8 elements, the pieces 6}}
  %u:2 = weft.unpack %p : (tensor<8xf32>) -> (tensor<2xf32>, tensor<4xf32>)
  return
}

// -----

// ODS-generated checks (operand, result and attribute constraints, traits).
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @all_reduce_no_axes_attr(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{requires attribute 'axes'}}
  %y = weft.all_reduce %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @param_integer() {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit float or 64-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %w = weft.param "w" {init = "zeros"} : tensor<4xi32>
  return
}

// -----

// A loss gradient's dloss is a scalar (0-D).
func.func @cross_entropy_grad_dloss(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %d: tensor<2xf32>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 32-bit float or 64-bit float or bfloat16 type values, but got 'tensor<2xf32>'}}
  %g = weft.cross_entropy_grad %l, %t, %d : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

// The custom syntax gives an elementwise op one type; the generic one can
// write two.
func.func @gelu_types(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "weft.gelu"(%x) : (tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

// Collective axes are mesh axis names (strings).
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @all_reduce_axes_not_strings(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{attribute 'axes' failed to satisfy constraint: string array attribute}}
  %y = weft.all_reduce %x {axes = [1]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Dropout: 0 < p < 1 (0 is no op, 1 would drop everything), and dim_axes
// holds one list of axis names per dim.
func.func @dropout_p_one(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'weft.dropout' op p = 1.000000e+00, expected 0 < p < 1}}
  %y = weft.dropout %x {p = 1.0 : f64, site = 0 : i64} : tensor<2x8xf32>
  return
}

// -----

func.func @dropout_dim_axes_rank(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'weft.dropout' op dim_axes has 1 entries, expected 2 (one per dim of 'tensor<2x8xf32>')}}
  %y = weft.dropout %x {p = 0.1 : f64, site = 0 : i64, dim_axes = [["dp"]]} : tensor<2x8xf32>
  return
}

// -----

func.func @attention_dropout_without_site(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'weft.attention' op has dropout but no dropout_site}}
  %y = weft.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, dropout = 0.1 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

// A step accumulator starts from zero each step: a zero weft.fill.
func.func @accumulate_into_nonzero(%x: tensor<4x8xf32>) {
  %acc = weft.fill {value = 1.0} : tensor<4x8xf32>
  // expected-error @+1 {{'weft.accumulate' op accumulates into a value that is not a zero weft.fill}}
  weft.accumulate %acc, %x : tensor<4x8xf32>
  return
}
