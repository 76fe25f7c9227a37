// RUN: weft-opt %s -split-input-file -weft-plan-memory | FileCheck %s

// A chain of 1 KiB tensors: each result is placed before its operand is freed
// (no kernel reads and writes the same bytes), then the operand's bytes are
// reused, so the arena ping-pongs between two slots. Parameters are not in it.
// CHECK-LABEL: func @chain
// CHECK-SAME:  weft.arena_bytes = 2048 : i64
// CHECK:       weft.param "g" {init = "ones"} : tensor<256xf32>
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 0>}
// CHECK:       weft.silu %{{.*}} {weft.offsets = array<i64: 1024>}
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 0>}
// CHECK:       weft.mul %{{.*}}, %{{.*}} {weft.offsets = array<i64: 1024>}
func.func @chain(%x: tensor<256xf32>) -> tensor<256xf32> {
  %g = weft.param "g" {init = "ones"} : tensor<256xf32>
  %0 = weft.gelu %x : tensor<256xf32>
  %1 = weft.silu %0 : tensor<256xf32>
  %2 = weft.gelu %1 : tensor<256xf32>
  %3 = weft.mul %2, %g : tensor<256xf32>
  return %3 : tensor<256xf32>
}

// -----

// A value with a later use stays live: %0 is read again by the add, so the
// silu and gelu results cannot take its slot. Small tensors round up to 64 B.
// CHECK-LABEL: func @long_lived
// CHECK-SAME:  weft.arena_bytes = 192 : i64
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 0>} : tensor<4xf32>
// CHECK:       weft.silu %{{.*}} {weft.offsets = array<i64: 64>}
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 128>}
// CHECK:       weft.add %{{.*}}, %{{.*}} {weft.offsets = array<i64: 64>}
func.func @long_lived(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = weft.gelu %x : tensor<4xf32>
  %1 = weft.silu %0 : tensor<4xf32>
  %2 = weft.gelu %1 : tensor<4xf32>
  %3 = weft.add %0, %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// Multi-result ops get one offset per result; an unused result is freed at
// once, so the next op reuses it.
// CHECK-LABEL: func @split_unused
// CHECK:       weft.split %{{.*}} {sizes = array<i64: 16, 16>, weft.offsets = array<i64: 0, 64>}
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 64>}
func.func @split_unused(%x: tensor<32xf32>) -> tensor<16xf32> {
  %a, %b = weft.split %x {sizes = array<i64: 16, 16>} : (tensor<32xf32>) -> (tensor<16xf32>, tensor<16xf32>)
  %y = weft.gelu %a : tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

// Best fit: a new value takes the smallest free block that holds it, so a
// small one does not split a hole a later large one needs. After %b and %c
// the holes are [0, 256) and [320, 384); %d (64 B) takes the second and %e
// (256 B) the first. First fit would put %d at 0 and grow the arena to 1024.
// CHECK-LABEL: func @best_fit
// CHECK-SAME:  weft.arena_bytes = 768 : i64
// CHECK:       %[[D:.*]] = weft.gelu %{{.*}} {weft.offsets = array<i64: 320>} : tensor<16xf32>
// CHECK:       %[[E:.*]] = weft.gelu %{{.*}} {weft.offsets = array<i64: 0>} : tensor<64xf32>
func.func @best_fit(%x: tensor<64xf32>, %y: tensor<16xf32>) -> (tensor<64xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %a = weft.gelu %x : tensor<64xf32>
  %k = weft.gelu %y : tensor<16xf32>
  %s = weft.gelu %y : tensor<16xf32>
  %k2 = weft.gelu %y : tensor<16xf32>
  %b = weft.add %k, %s : tensor<16xf32>
  %c = weft.gelu %a : tensor<64xf32>
  %d = weft.gelu %b : tensor<16xf32>
  %e = weft.gelu %c : tensor<64xf32>
  return %e, %d, %k, %k2 : tensor<64xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// An asynchronous all-reduce reads its input until its result is first used,
// so the silu may not take the gelu's bytes (it would without `weft.async`).
// CHECK-LABEL: func @async_all_reduce
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 0>}
// CHECK:       weft.all_reduce %{{.*}} {axes = ["dp"], weft.async, weft.offsets = array<i64: 64>}
// CHECK:       weft.silu %{{.*}} {weft.offsets = array<i64: 128>}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @async_all_reduce(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = weft.gelu %x : tensor<16xf32>
  %1 = weft.all_reduce %0 {axes = ["dp"], weft.async} : (tensor<16xf32>) -> tensor<16xf32>
  %2 = weft.silu %x : tensor<16xf32>
  %3 = weft.add %1, %2 : tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----

// ... and its input's bytes are free once that reader has run, though the
// reader does not name the input: the gelu after the add takes them (it took
// new bytes while an input died only at an op that named it, and an arena of
// 256 bytes here grew with every such collective in a step).
// CHECK-LABEL: func @async_input_freed
// CHECK-SAME:  weft.arena_bytes = 192 : i64
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 0>}
// CHECK:       weft.all_reduce %{{.*}} {axes = ["dp"], weft.async, weft.offsets = array<i64: 64>}
// CHECK:       weft.add %{{.*}}, %{{.*}} {weft.offsets = array<i64: 128>}
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 0>}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @async_input_freed(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = weft.gelu %x : tensor<16xf32>
  %1 = weft.all_reduce %0 {axes = ["dp"], weft.async} : (tensor<16xf32>) -> tensor<16xf32>
  %2 = weft.add %1, %x : tensor<16xf32>
  %3 = weft.gelu %2 : tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----

// A pipeline stage that holds 2 micro-batches at once (stage 0 of 2 under
// 1F1B with 4 micro-batches) splits its arena. What a micro-batch keeps
// from one run to another lies in the per-slot part, [0, weft.slot_bytes),
// which the runtime instances per slot: %a (its forward's value that its
// backward reads), %c (sent after the run) and %g (received before it).
// What a run makes and reads itself, %b, %b2, %d and %e, lies past it in
// one instance that the micro-batches share. Split: 2 x 2048 + 8192 bytes;
// one arena per slot would take 2 x 9216.
// CHECK-LABEL: func @stage
// CHECK-SAME:  weft.arena_bytes = 10240 : i64
// CHECK-SAME:  weft.slot_bytes = 2048 : i64
// CHECK:       %[[A:.*]] = weft.gelu %{{.*}} {weft.fragment = "forward", weft.offsets = array<i64: 0>}
// CHECK-NEXT:  weft.gelu %{{.*}} {weft.fragment = "forward", weft.offsets = array<i64: 2048>}
// CHECK-NEXT:  weft.gelu %{{.*}} {weft.fragment = "forward", weft.offsets = array<i64: 6144>}
// CHECK-NEXT:  %[[C:.*]] = weft.gelu %[[A]] {weft.fragment = "forward", weft.offsets = array<i64: 1024>}
// CHECK:       weft.recv {peer = 1 : i64, weft.fragment = "backward", weft.offsets = array<i64: 1024>}
// CHECK-NEXT:  weft.mul %{{.*}}, %[[A]] {weft.fragment = "backward", weft.offsets = array<i64: 2048>}
// CHECK-NEXT:  weft.gelu %{{.*}} {weft.fragment = "backward", weft.offsets = array<i64: 3072>}
func.func @stage(%x: tensor<256xf32>, %big: tensor<1024xf32>) attributes {weft.microbatches = 4 : i64, weft.num_stages = 2 : i64, weft.pipeline_axis = "pp", weft.pipeline_schedule = #weft.schedule<kind = "1f1b">, weft.stage = 0 : i64} {
  %a = weft.gelu %x {weft.fragment = "forward"} : tensor<256xf32>
  %b = weft.gelu %big {weft.fragment = "forward"} : tensor<1024xf32>
  %b2 = weft.gelu %b {weft.fragment = "forward"} : tensor<1024xf32>
  %c = weft.gelu %a {weft.fragment = "forward"} : tensor<256xf32>
  weft.send %c {peer = 1 : i64, weft.fragment = "forward"} : tensor<256xf32>
  %g = weft.recv {peer = 1 : i64, weft.fragment = "backward"} : tensor<256xf32>
  %d = weft.mul %g, %a {weft.fragment = "backward"} : tensor<256xf32>
  %e = weft.gelu %d {weft.fragment = "backward"} : tensor<256xf32>
  return
}

// -----

// Stage 1 of the same pipeline holds one micro-batch at a time: one arena,
// no split (split, it could only be larger).
// CHECK-LABEL: func @last_stage
// CHECK-SAME:  weft.arena_bytes
// CHECK-NOT:   weft.slot_bytes
func.func @last_stage(%x: tensor<256xf32>, %big: tensor<1024xf32>) attributes {weft.microbatches = 4 : i64, weft.num_stages = 2 : i64, weft.pipeline_axis = "pp", weft.pipeline_schedule = #weft.schedule<kind = "1f1b">, weft.stage = 1 : i64} {
  %a = weft.gelu %x {weft.fragment = "forward"} : tensor<256xf32>
  %b = weft.gelu %big {weft.fragment = "forward"} : tensor<1024xf32>
  %d = weft.mul %b, %b {weft.fragment = "backward"} : tensor<1024xf32>
  %e = weft.mul %a, %a {weft.fragment = "backward"} : tensor<256xf32>
  return
}

// -----

// A gradient made only to be stored (%dw) is written straight into its
// parameter's grad buffer by weft-emit-program, so it takes no arena bytes:
// the arena holds %h alone. A gradient added to the stored one
// ({accumulate}, %dv) is made in the arena.
// CHECK-LABEL: func @direct_gradient
// CHECK-SAME:  weft.arena_bytes = 2048 : i64
// CHECK:       weft.gelu %{{.*}} {weft.offsets = array<i64: 0>}
// CHECK:       weft.matmul %{{.*}} {transpose_a = true, weft.offsets = array<i64: 0>}
// CHECK:       weft.matmul %{{.*}} {transpose_a = true, weft.offsets = array<i64: 1024>}
func.func @direct_gradient(%x: tensor<16x16xf32>, %dy: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %h = weft.gelu %x : tensor<16x16xf32>
  %dw = weft.matmul %h, %dy {transpose_a = true} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  weft.param_grad "w", %dw : tensor<16x16xf32>
  %dv = weft.matmul %h, %dy {transpose_a = true} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  weft.param_grad "v", %dv {accumulate} : tensor<16x16xf32>
  return %h : tensor<16x16xf32>
}

// -----

// A gradient bucket (weft-bucket-gradients) whose gradients are made for it
// alone: each is written into the pack's buffer where the pack would copy
// it (DDP's gradient_as_bucket_view), so the pack copies nothing. The
// buffer [0, 1088) is placed at the first of them: %a at 0, %b at 256, and
// the pack at 0. %c is read by the silu too, and %d starts 1 KiB + 4 B in,
// not at a 64-byte boundary: each keeps bytes of its own, and the pack
// copies them.
// CHECK-LABEL: func @bucket_in_place
// CHECK-SAME:  weft.arena_bytes = 1280 : i64
// CHECK:       %[[A:.*]] = weft.gelu %arg0 {weft.offsets = array<i64: 0>} : tensor<64xf32>
// CHECK:       %[[B:.*]] = weft.gelu %arg1 {weft.offsets = array<i64: 256>} : tensor<192xf32>
// CHECK:       %[[C:.*]] = weft.gelu %arg2 {weft.offsets = array<i64: 1088>} : tensor<1xf32>
// CHECK:       weft.silu %[[C]] {weft.offsets = array<i64: 1152>}
// CHECK:       %[[D:.*]] = weft.gelu %arg3 {weft.offsets = array<i64: 1216>} : tensor<4xf32>
// CHECK:       weft.pack %[[A]], %[[B]], %[[C]], %[[D]] {weft.offsets = array<i64: 0>}
func.func @bucket_in_place(%x: tensor<64xf32>, %y: tensor<192xf32>, %z: tensor<1xf32>, %w: tensor<4xf32>) -> (tensor<261xf32>, tensor<1xf32>) {
  %a = weft.gelu %x : tensor<64xf32>
  %b = weft.gelu %y : tensor<192xf32>
  %c = weft.gelu %z : tensor<1xf32>
  %s = weft.silu %c : tensor<1xf32>
  %d = weft.gelu %w : tensor<4xf32>
  %p = weft.pack %a, %b, %c, %d : (tensor<64xf32>, tensor<192xf32>, tensor<1xf32>, tensor<4xf32>) -> tensor<261xf32>
  return %p, %s : tensor<261xf32>, tensor<1xf32>
}
