// The dialect verifies the sharding attributes the passes exchange:
// weft.sharding on params and function arguments, weft.shardings (one per
// result) on ops. Each case below was accepted before, and weft-partition
// then crashed on it (a non-sharding element) or failed later elsewhere (an
// axis the mesh lacks). The first case is well formed.
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

// expected-error @+1 {{argument 0's weft.sharding names mesh axis 'dp' but the module has no weft.mesh}}
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
