//===- Hardware.h - a cluster's compute, memory and links -------*- C++ -*-===//
//
// What the cost model needs to know about a machine: peak FLOP/s of the
// compute dtype, memory per device, HBM bandwidth, and two link tiers (inside
// a node, across nodes), each with latency and per-device bandwidth. GEMM
// efficiency is a function of shape (see gemmEfficiency). Presets and JSON
// files produce one; JSON errors name the missing or mistyped field.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PLANNER_HARDWARE_H
#define WEFT_PLANNER_HARDWARE_H

#include <string>
#include <vector>

namespace weft::cost {

/// One link tier. `bandwidthGBps` is per device per direction (NVLink: per
/// GPU; network: the node's NIC bandwidth divided by its devices);
/// `efficiency` is the fraction a ring collective reaches (nccl-tests bus
/// bandwidth over the nominal figure).
struct LinkTier {
  double bandwidthGBps = 0;
  double latencyUs = 0;
  double efficiency = 1;
  double bytesPerSecond() const { return bandwidthGBps * 1e9 * efficiency; }
  double latencySeconds() const { return latencyUs * 1e-6; }
};

/// GEMM efficiency (fraction of peak) as a function of the GEMM's smallest
/// dimension d: `max * d / (d + halfDim)`. It rises with d and reaches half of
/// `max` at d = halfDim: small or thin GEMMs (tensor parallelism cutting the
/// hidden size, small micro-batches) run further from peak.
struct GemmEfficiency {
  double max = 1;
  double halfDim = 0;
};

struct Hardware {
  std::string name;
  std::string computeDtype = "bf16"; // "bf16" or "f32": bytes per activation
  int gpusPerNode = 1;
  double peakTflops = 0; // of the compute dtype, dense
  double memoryGB = 0;   // per device, 1e9 bytes
  double hbmGBps = 0;    // memory-bound ops (norms, elementwise, optimizer)
  LinkTier intraNode, interNode;
  GemmEfficiency gemm;
  /// Fraction of peak the fused attention kernel (FlashAttention's kind:
  /// scores never leave the chip) reaches, forward and backward; 0: the
  /// GEMM curve at the head dim (JSON's optional "attention_efficiency").
  double attentionEfficiency = 0;
  /// How a group across nodes runs its collectives: false, one ring over the
  /// inter-node tier (NCCL's rings); true, hierarchically (weft's MPI
  /// communicator on CPUs: within the node, across, within). JSON's optional
  /// "collectives": "ring" (default) or "hierarchical".
  bool hierarchical = false;
  std::string measured; // what --calibrate measured, if anything

  double peakFlops() const { return peakTflops * 1e12; }
  double memoryBytes() const { return memoryGB * 1e9; }
  int bytesPerElement() const { return computeDtype == "f32" ? 4 : 2; }
  /// Fraction of peak a GEMM whose smallest dimension is `minDim` reaches.
  double gemmEfficiency(double minDim) const;
};

/// The outcome of loading a description: `error` is set when it failed.
struct HardwareResult {
  Hardware hardware;
  std::string error;
  bool ok() const { return error.empty(); }
};

/// a100-80g, h100-80g, h200-141g, local.
HardwareResult lookupHardwarePreset(const std::string &name);
std::vector<std::string> hardwarePresetNames();
/// A JSON description (see docs/planner.md); every field is required.
HardwareResult parseHardwareText(const std::string &text,
                                 const std::string &source);
/// A preset name, or a path to a JSON file.
HardwareResult resolveHardware(const std::string &nameOrPath);
/// The JSON form of a description (what --calibrate writes).
std::string hardwareToJson(const Hardware &hw);

} // namespace weft::cost

#endif // WEFT_PLANNER_HARDWARE_H
