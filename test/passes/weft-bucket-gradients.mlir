// RUN: weft-opt %s -split-input-file -weft-bucket-gradients="bucket-bytes=200 zero-bucket-bytes=200" | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-bucket-gradients="bucket-bytes=0" | FileCheck %s --check-prefix=OFF

// Backward computes the gradients of d, c, b, a in that order. Buckets of at
// most 200 bytes follow that order: {d, c, b} (192 bytes) and {a}. Each
// bucket's all-reduce starts, asynchronously, right after its last gradient
// exists, so it overlaps the rest of backward; the stores stay at the end.
// The loss all-reduce is not a gradient and is left alone.
// CHECK-LABEL: func @step
// CHECK:      %[[GD:.*]] = weft.gelu %arg3
// CHECK-NEXT: %[[GC:.*]] = weft.gelu %arg2
// CHECK-NEXT: %[[GB:.*]] = weft.gelu %arg1
// CHECK-NEXT: %[[P:.*]] = weft.pack %[[GD]], %[[GC]], %[[GB]] : (tensor<16xf32>, tensor<16xf32>, tensor<4x4xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[R:.*]] = weft.all_reduce %[[P]] {axes = ["dp"], reason = "gradient bucket of 3 tensors (192 bytes)", weft.async}
// CHECK-NEXT: %[[GA:.*]] = weft.gelu %arg0
// CHECK-NEXT: %[[RA:.*]] = weft.all_reduce %[[GA]] {axes = ["dp"], weft.async}
// CHECK:      weft.all_reduce %arg4 {axes = ["dp"]}
// CHECK:      weft.param_grad "a", %[[RA]]
// CHECK-NEXT: %[[U:.*]]:3 = weft.unpack %[[R]]
// CHECK-NEXT: weft.param_grad "d", %[[U]]#0
// CHECK-NEXT: weft.param_grad "c", %[[U]]#1
// CHECK-NEXT: weft.param_grad "b", %[[U]]#2
// OFF-NOT:    weft.pack
// OFF-COUNT-4: weft.async
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @step(%xa: tensor<16xf32>, %xb: tensor<4x4xf32>, %xc: tensor<16xf32>, %xd: tensor<16xf32>, %l: tensor<f32>) -> tensor<f32> {
  %gd = weft.gelu %xd : tensor<16xf32>
  %gc = weft.gelu %xc : tensor<16xf32>
  %gb = weft.gelu %xb : tensor<4x4xf32>
  %ga = weft.gelu %xa : tensor<16xf32>
  %loss = weft.all_reduce %l {axes = ["dp"]} : (tensor<f32>) -> tensor<f32>
  %a = weft.param "a" {init = "zeros"} : tensor<16xf32>
  %b = weft.param "b" {init = "zeros"} : tensor<4x4xf32>
  %c = weft.param "c" {init = "zeros"} : tensor<16xf32>
  %d = weft.param "d" {init = "zeros"} : tensor<16xf32>
  %ra = weft.all_reduce %ga {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "a", %ra : tensor<16xf32>
  %rb = weft.all_reduce %gb {axes = ["dp"]} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  weft.param_grad "b", %rb : tensor<4x4xf32>
  %rc = weft.all_reduce %gc {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "c", %rc : tensor<16xf32>
  %rd = weft.all_reduce %gd {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "d", %rd : tensor<16xf32>
  return %loss : tensor<f32>
}

// -----

// Gradients stored as they are made (weft-store-gradients-early): a
// reduction is read where the next one begins, not at its stores right after
// its start, so it overlaps the backward up to there. Buckets {d, c, b} and
// {a}: the first is unpacked and stored just before the second starts; the
// last where its gradient is stored.
// CHECK-LABEL: func @stored_early
// CHECK:      %[[GD:.*]] = weft.gelu %arg3
// CHECK-NEXT: %[[GC:.*]] = weft.gelu %arg2
// CHECK-NEXT: %[[GB:.*]] = weft.gelu %arg1
// CHECK-NEXT: %[[P:.*]] = weft.pack %[[GD]], %[[GC]], %[[GB]]
// CHECK-NEXT: %[[R:.*]] = weft.all_reduce %[[P]] {axes = ["dp"], reason = "gradient bucket of 3 tensors (192 bytes)", weft.async}
// CHECK-NEXT: %[[GA:.*]] = weft.gelu %arg0
// CHECK-NEXT: %[[U:.*]]:3 = weft.unpack %[[R]]
// CHECK-NEXT: weft.param_grad "d", %[[U]]#0
// CHECK-NEXT: weft.param_grad "c", %[[U]]#1
// CHECK-NEXT: weft.param_grad "b", %[[U]]#2
// CHECK-NEXT: %[[RA:.*]] = weft.all_reduce %[[GA]] {axes = ["dp"], weft.async}
// CHECK-NEXT: weft.param_grad "a", %[[RA]]
// Without buckets, each all-reduce is read where the next one starts.
// OFF-LABEL: func @stored_early
// OFF:      %[[RD:.*]] = weft.all_reduce %{{.*}} {axes = ["dp"], weft.async}
// OFF-NEXT: %[[GC:.*]] = weft.gelu %arg2
// OFF-NEXT: weft.param_grad "d", %[[RD]]
// OFF-NEXT: weft.all_reduce %[[GC]] {axes = ["dp"], weft.async}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @stored_early(%xa: tensor<16xf32>, %xb: tensor<16xf32>, %xc: tensor<16xf32>, %xd: tensor<16xf32>) {
  %gd = weft.gelu %xd : tensor<16xf32>
  %rd = weft.all_reduce %gd {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "d", %rd : tensor<16xf32>
  %gc = weft.gelu %xc : tensor<16xf32>
  %rc = weft.all_reduce %gc {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "c", %rc : tensor<16xf32>
  %gb = weft.gelu %xb : tensor<16xf32>
  %rb = weft.all_reduce %gb {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "b", %rb : tensor<16xf32>
  %ga = weft.gelu %xa : tensor<16xf32>
  %ra = weft.all_reduce %ga {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "a", %ra : tensor<16xf32>
  return
}

// -----

// The negative case: a stored gradient read before the next reduction
// begins keeps its store where it is, so the read sees it.
// OFF-LABEL: func @read_before_the_next
// OFF:      %[[RD:.*]] = weft.all_reduce %{{.*}} {axes = ["dp"], weft.async}
// OFF-NEXT: weft.param_grad "d", %[[RD]]
// OFF-NEXT: weft.stored_grad "d"
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @read_before_the_next(%xc: tensor<16xf32>, %xd: tensor<16xf32>) -> tensor<16xf32> {
  %gd = weft.gelu %xd : tensor<16xf32>
  %rd = weft.all_reduce %gd {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "d", %rd : tensor<16xf32>
  %sd = weft.stored_grad "d" : tensor<16xf32>
  %gc = weft.gelu %xc : tensor<16xf32>
  %rc = weft.all_reduce %gc {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "c", %rc : tensor<16xf32>
  return %sd : tensor<16xf32>
}

// -----

// Nor past another addition to the same gradient: the sum would round in
// another order.
// OFF-LABEL: func @added_before_the_next
// OFF:      %[[RD:.*]] = weft.all_reduce %{{.*}} {axes = ["dp"], weft.async}
// OFF-NEXT: weft.param_grad "d", %[[RD]]
// OFF-NEXT: weft.param_grad "d", %arg0 {accumulate}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @added_before_the_next(%xc: tensor<16xf32>, %xd: tensor<16xf32>) {
  %gd = weft.gelu %xd : tensor<16xf32>
  %rd = weft.all_reduce %gd {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "d", %rd : tensor<16xf32>
  weft.param_grad "d", %xc {accumulate} : tensor<16xf32>
  %gc = weft.gelu %xc : tensor<16xf32>
  %rc = weft.all_reduce %gc {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "c", %rc : tensor<16xf32>
  return
}

// -----

// A position table's gradient is zero past the sequence on every rank: only
// its first rows are reduced (3 of 8 here; under sequence parallelism the
// local 2 positions times the tp shards, 4), and packed back with zeros
// before the store. With micro-batches the reduction of the stored sum in
// the optimizer fragment is trimmed the same way and stays in that
// fragment.
// CHECK-LABEL: func @position_rows
// CHECK:      %[[G:.*]] = weft.position_embedding_grad %arg0
// CHECK-NEXT: %[[F:.*]] = weft.pack %[[G]] : (tensor<8x4xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[U:.*]]:2 = weft.unpack %[[F]] : (tensor<32xf32>) -> (tensor<3x4xf32>, tensor<5x4xf32>)
// CHECK-NEXT: %[[R:.*]] = weft.all_reduce %[[U]]#0 {axes = ["dp"], reason = "gradient rows 0..3 of 8 (the rest are zero)", weft.async} : (tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK:      %[[Z:.*]] = weft.fill {value = 0.000000e+00 : f64} : tensor<5x4xf32>
// CHECK-NEXT: %[[J:.*]] = weft.pack %[[R]], %[[Z]] : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[W:.*]] = weft.unpack %[[J]] : (tensor<32xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: weft.param_grad "wpe", %[[W]]
// CHECK:      weft.all_reduce %{{.*}} {axes = ["tp"], reason = "gradient rows 0..4 of 8 (the rest are zero)", weft.async} : (tensor<4x4xf32>) -> tensor<4x4xf32>
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @position_rows(%dy: tensor<2x3x4xf32>, %dys: tensor<2x2x4xf32>) {
  %wpe = weft.param "wpe" {init = "zeros"} : tensor<8x4xf32>
  %g = weft.position_embedding_grad %dy {positions = 8} : (tensor<2x3x4xf32>) -> tensor<8x4xf32>
  %r = weft.all_reduce %g {axes = ["dp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  weft.param_grad "wpe", %r : tensor<8x4xf32>
  %wps = weft.param "wps" {init = "zeros"} : tensor<8x4xf32>
  %gs = weft.position_embedding_grad %dys {positions = 8, seq_axes = ["tp"]} : (tensor<2x2x4xf32>) -> tensor<8x4xf32>
  %rs = weft.all_reduce %gs {axes = ["tp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  weft.param_grad "wps", %rs : tensor<8x4xf32>
  return
}

// -----

// CHECK-LABEL: func @position_rows_accumulated
// CHECK:      weft.param_grad "wpe", %{{.*}} {accumulate}
// CHECK:      weft.stored_grad "wpe" {weft.fragment = "optimizer"}
// CHECK-NEXT: weft.pack %{{.*}} {weft.fragment = "optimizer"}
// CHECK-NEXT: weft.unpack %{{.*}} {weft.fragment = "optimizer"}
// CHECK-NEXT: weft.all_reduce %{{.*}} {axes = ["dp"], reason = "gradient rows 0..3 of 8 (the rest are zero)", weft.async, weft.fragment = "optimizer"}
// CHECK-NEXT: weft.fill {value = 0.000000e+00 : f64, weft.fragment = "optimizer"}
// CHECK-NEXT: weft.pack %{{.*}} {weft.fragment = "optimizer"}
// CHECK-NEXT: weft.unpack %{{.*}} {weft.fragment = "optimizer"}
// CHECK-NEXT: weft.param_grad "wpe", %{{.*}} {weft.fragment = "optimizer"}
// Negative: a stored gradient that is not (only) a position table's keeps
// its whole reduction.
// CHECK:      weft.all_reduce %{{.*}} {axes = ["dp"], weft.async, weft.fragment = "optimizer"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @position_rows_accumulated(%dy: tensor<2x3x4xf32>, %x: tensor<8x4xf32>) {
  %wpe = weft.param "wpe" {init = "zeros"} : tensor<8x4xf32>
  %g = weft.position_embedding_grad %dy {positions = 8} : (tensor<2x3x4xf32>) -> tensor<8x4xf32>
  weft.param_grad "wpe", %g {accumulate} : tensor<8x4xf32>
  %other = weft.param "other" {init = "zeros"} : tensor<8x4xf32>
  weft.param_grad "other", %x {accumulate} : tensor<8x4xf32>
  %s = weft.stored_grad "wpe" {weft.fragment = "optimizer"} : tensor<8x4xf32>
  %r = weft.all_reduce %s {axes = ["dp"], weft.fragment = "optimizer"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  weft.param_grad "wpe", %r {weft.fragment = "optimizer"} : tensor<8x4xf32>
  %so = weft.stored_grad "other" {weft.fragment = "optimizer"} : tensor<8x4xf32>
  %ro = weft.all_reduce %so {axes = ["dp"], weft.fragment = "optimizer"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  weft.param_grad "other", %ro {weft.fragment = "optimizer"} : tensor<8x4xf32>
  return
}

// -----

// ZeRO buckets (zero-bucket-bytes > 0; off by default: on CPUs the packing
// copies cost more than the collectives they save).
// ZeRO-3, as FSDP: a layer's parameters gathered at consecutive use sites
// are gathered together (shards packed, one all-gather, an unpack with
// blocks = 2: rank r's shards arrive in block r) at the first use; the
// parameters move up to dominate the pack. A gather of another layer starts
// another bucket. Consecutive dim-0 reduce-scatters of gradients go in one
// blocked pack (rank r's block of every gradient together), one
// reduce-scatter and an unpack of the rank's shards.
// CHECK-LABEL: func @zero3
// CHECK:      %[[A:.*]] = weft.param "a"
// CHECK-NEXT: %[[B:.*]] = weft.param "b"
// CHECK-NEXT: %[[P:.*]] = weft.pack %[[A]], %[[B]] : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<10xf32>
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[P]] {axes = ["dp"], dim = 0 : i64, reason = "ZeRO-3 gather of 2 parameters of layer 0 (80 bytes)"} : (tensor<10xf32>) -> tensor<20xf32>
// CHECK-NEXT: %[[U:.*]]:2 = weft.unpack %[[G]] {blocks = 2 : i64} : (tensor<20xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
// CHECK-NEXT: weft.matmul %arg0, %[[U]]#0
// CHECK:      weft.bias_add %{{.*}}, %[[U]]#1
// CHECK:      weft.all_gather %{{.*}} {axes = ["dp"], dim = 0 : i64} : (tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK:      %[[GDA:.*]] = weft.gelu %arg1
// CHECK-NEXT: %[[GDB:.*]] = weft.gelu %arg2
// CHECK-NEXT: %[[RP:.*]] = weft.pack %[[GDA]], %[[GDB]] {blocks = 2 : i64} : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<20xf32>
// CHECK-NEXT: %[[R:.*]] = weft.reduce_scatter %[[RP]] {axes = ["dp"], dim = 0 : i64, reason = "ZeRO gradient bucket of 2 tensors (80 bytes)", weft.async} : (tensor<20xf32>) -> tensor<10xf32>
// CHECK-NEXT: %[[RU:.*]]:2 = weft.unpack %[[R]] : (tensor<10xf32>) -> (tensor<2x4xf32>, tensor<2xf32>)
// CHECK:      weft.param_grad "a", %[[RU]]#0
// CHECK:      weft.param_grad "b", %[[RU]]#1
// Unbucketed (OFF), each gradient's reduce-scatter still starts
// asynchronously and is finished (stored) where the next one begins.
// OFF-LABEL:  func @zero3
// OFF-NOT:    weft.pack
// OFF:        %[[RA:.*]] = weft.reduce_scatter %{{.*}} {axes = ["dp"], dim = 0 : i64, weft.async}
// OFF-NEXT:   weft.param_grad "a", %[[RA]]
// OFF-NEXT:   %[[RB:.*]] = weft.reduce_scatter %{{.*}} {axes = ["dp"], dim = 0 : i64, weft.async}
// OFF-NEXT:   weft.param_grad "b", %[[RB]]
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @zero3(%x: tensor<2x4xf32>, %da: tensor<4x4xf32>, %db: tensor<4xf32>) -> tensor<2x4xf32> {
  %a = weft.param "a" {init = "zeros", weft.layer = 0 : i64} : tensor<2x4xf32>
  %ga = weft.all_gather %a {axes = ["dp"], dim = 0} : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %y = weft.matmul %x, %ga : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %b = weft.param "b" {init = "zeros", weft.layer = 0 : i64} : tensor<2xf32>
  %gb = weft.all_gather %b {axes = ["dp"], dim = 0} : (tensor<2xf32>) -> tensor<4xf32>
  %z = weft.bias_add %y, %gb : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %c = weft.param "c" {init = "zeros", weft.layer = 1 : i64} : tensor<2x4xf32>
  %gc = weft.all_gather %c {axes = ["dp"], dim = 0} : (tensor<2x4xf32>) -> tensor<4x4xf32>
  %w = weft.matmul %z, %gc : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gda = weft.gelu %da : tensor<4x4xf32>
  %gdb = weft.gelu %db : tensor<4xf32>
  %ra = weft.reduce_scatter %gda {axes = ["dp"], dim = 0} : (tensor<4x4xf32>) -> tensor<2x4xf32>
  weft.param_grad "a", %ra : tensor<2x4xf32>
  %rb = weft.reduce_scatter %gdb {axes = ["dp"], dim = 0} : (tensor<4xf32>) -> tensor<2xf32>
  weft.param_grad "b", %rb : tensor<2xf32>
  return %w : tensor<2x4xf32>
}
