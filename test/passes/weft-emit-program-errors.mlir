// weft-emit-program refuses to write what the runtime would refuse: the op
// table and the loader's checks are the format library's (program/), the
// same code weft-run loads programs with.
// RUN: weft-opt %s -split-input-file -weft-autodiff -weft-insert-adamw -weft-plan-memory -weft-emit-program="output=%t.weft" -verify-diagnostics -o /dev/null

// An op with no runtime instruction (a sharding constraint that
// weft-partition would have removed).
func.func @unlowered(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<16x8xf32>
  %x = weft.embedding %w, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{has no runtime instruction (the program format's op table, program/Program.h, lacks 'shard')}}
  %y = weft.shard %x {sharding = #weft.sharding<dims = [[], [], []]>} : tensor<2x4x8xf32>
  %logits = weft.matmul %y, %w {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A program the loader refuses: a mean over 7 rows where the step has 8.
// expected-error @+1 {{the program fails the format's checks (a compiler bug; please report it): instructions[2] (cross_entropy) has denominator 7, expected 8 (batch 2 x seq 4 rows)}}
func.func @wrong_mean(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<16x8xf32>
  %x = weft.embedding %w, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %x, %w {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets {denominator = 7 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A send once per step (a weft.accumulate sum's) is scheduled before the
// optimizer's run; in a per-micro-batch fragment it would mean nothing.
func.func @once_in_forward(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<16x8xf32>
  %x = weft.embedding %w, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'weft.send' op is marked once in fragment 'forward': a send once per step belongs to the optimizer fragment}}
  weft.send %x {peer = 1 : i64, once} : tensor<2x4x8xf32>
  %logits = weft.matmul %x, %w {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
