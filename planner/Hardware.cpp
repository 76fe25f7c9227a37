//===- Hardware.cpp - presets and JSON cluster descriptions ---------------===//
//
// Plain C++ (nlohmann-json; its exceptions stay inside this file).
//
//===----------------------------------------------------------------------===//
#include "planner/Hardware.h"
#include "program/JsonDepth.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

namespace weft::cost {

double Hardware::gemmEfficiency(double minDim) const {
  if (minDim <= 0)
    return gemm.max;
  return gemm.max * minDim / (minDim + gemm.halfDim);
}

namespace {

Hardware make(const std::string &name, int gpusPerNode, double tflops,
              double memoryGB, double hbmGBps, LinkTier intra, LinkTier inter,
              GemmEfficiency gemm) {
  Hardware hw;
  hw.name = name;
  hw.gpusPerNode = gpusPerNode;
  hw.peakTflops = tflops;
  hw.memoryGB = memoryGB;
  hw.hbmGBps = hbmGBps;
  hw.intraNode = intra;
  hw.interNode = inter;
  hw.gemm = gemm;
  return hw;
}

// Link figures: NVLink per GPU per direction; the network tier is the node's
// NICs divided by its 8 GPUs (one NIC per GPU on DGX). Efficiency 0.8 is about
// what nccl-tests reports as ring bus bandwidth over the nominal figure.
// GEMM efficiency constants are calibrated against Narayanan et al. 2021
// Table 1 (test/bench/plan_megatron.py, docs/planner.md).
const std::map<std::string, Hardware> &presets() {
  static const std::map<std::string, Hardware> table = [] {
    std::map<std::string, Hardware> t;
    t["a100-80g"] = make("a100-80g", 8, 312, 80, 2039, {300, 3, 0.8},
                         {8 * 200 / 8.0 / 8, 10, 0.8}, {0.72, 160});
    t["h100-80g"] = make("h100-80g", 8, 989, 80, 3350, {450, 3, 0.8},
                         {8 * 400 / 8.0 / 8, 10, 0.8}, {0.68, 320});
    t["h200-141g"] = make("h200-141g", 8, 989, 141, 4800, {450, 3, 0.8},
                          {8 * 400 / 8.0 / 8, 10, 0.8}, {0.68, 320});
    // FlashAttention's published reach: FlashAttention-2 "50-73% of the
    // theoretical maximum" on A100 (Dao 2023; the low end: the backward is
    // slower), and "only 35% utilization" on H100 (Shah et al. 2024, the
    // FlashAttention-3 paper), the kernel the PyTorch stacks ran.
    t["a100-80g"].attentionEfficiency = 0.5;
    t["h100-80g"].attentionEfficiency = 0.35;
    t["h200-141g"].attentionEfficiency = 0.35;
    // This machine (docs: ../shared/ENVIRONMENT.md): two ranks on 2 cores,
    // f32 OpenBLAS ~185 GFLOP/s on 2 threads, 24 GiB, memcpy ~15 GB/s, Open
    // MPI all-reduce ~3.3 GB/s bus bandwidth. `--calibrate` re-measures.
    Hardware local = make("local", 2, 0.185, 24 * 1.073741824, 15, {3.3, 20, 1},
                          {3.3, 20, 1}, {1.0, 64});
    local.computeDtype = "f32";
    t["local"] = local;
    return t;
  }();
  return table;
}

// Reads required fields; the first missing or mistyped one is the error.
struct Reader {
  std::string source;
  std::string error;

  const nlohmann::json *field(const nlohmann::json &j, const std::string &path,
                              const char *key) {
    if (!error.empty())
      return nullptr;
    auto it = j.find(key);
    std::string full = path.empty() ? key : path + "." + key;
    if (it == j.end()) {
      error = source + ": missing field '" + full + "'";
      return nullptr;
    }
    return &*it;
  }
  double number(const nlohmann::json &j, const std::string &path,
                const char *key) {
    const nlohmann::json *v = field(j, path, key);
    if (!v)
      return 0;
    if (!v->is_number()) {
      error = source + ": field '" + (path.empty() ? key : path + "." + key) +
              "' must be a number, got " + v->dump();
      return 0;
    }
    double d = v->get<double>();
    if (!(d > 0)) {
      error = source + ": field '" + (path.empty() ? key : path + "." + key) +
              "' must be positive, got " + v->dump();
      return 0;
    }
    return d;
  }
  std::string string(const nlohmann::json &j, const char *key) {
    const nlohmann::json *v = field(j, "", key);
    if (!v)
      return "";
    if (!v->is_string()) {
      error =
          source + ": field '" + key + "' must be a string, got " + v->dump();
      return "";
    }
    return v->get<std::string>();
  }
  const nlohmann::json &object(const nlohmann::json &j, const std::string &path,
                               const char *key) {
    static const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json *v = field(j, path, key);
    if (!v)
      return empty;
    if (!v->is_object()) {
      error = source + ": field '" + (path.empty() ? key : path + "." + key) +
              "' must be an object";
      return empty;
    }
    return *v;
  }
  LinkTier link(const nlohmann::json &links, const char *key) {
    std::string path = std::string("links.") + key;
    const nlohmann::json &l = object(links, "links", key);
    LinkTier t;
    t.bandwidthGBps = number(l, path, "bandwidth_gbps");
    t.latencyUs = number(l, path, "latency_us");
    t.efficiency = number(l, path, "efficiency");
    return t;
  }
};

} // namespace

std::vector<std::string> hardwarePresetNames() {
  std::vector<std::string> names;
  for (const auto &entry : presets())
    names.push_back(entry.first);
  return names;
}

HardwareResult lookupHardwarePreset(const std::string &name) {
  HardwareResult r;
  auto it = presets().find(name);
  if (it != presets().end()) {
    r.hardware = it->second;
    return r;
  }
  r.error = "unknown cluster '" + name + "' (presets:";
  for (const std::string &n : hardwarePresetNames())
    r.error += " " + n;
  r.error += "; or a JSON file)";
  return r;
}

HardwareResult parseHardwareText(const std::string &text,
                                 const std::string &source) {
  HardwareResult r;
  nlohmann::json j;
  r.error = jsonDepthError(text, source);
  if (!r.error.empty())
    return r;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception &e) {
    r.error = source + ": not valid JSON: " + e.what();
    return r;
  }
  if (!j.is_object()) {
    r.error = source + ": expected a JSON object";
    return r;
  }
  Reader in{source, ""};
  Hardware &hw = r.hardware;
  hw.name = in.string(j, "name");
  hw.computeDtype = in.string(j, "compute_dtype");
  hw.gpusPerNode = static_cast<int>(in.number(j, "", "gpus_per_node"));
  hw.peakTflops = in.number(j, "", "peak_tflops");
  hw.memoryGB = in.number(j, "", "memory_gb");
  hw.hbmGBps = in.number(j, "", "hbm_gbps");
  const nlohmann::json &links = in.object(j, "", "links");
  hw.intraNode = in.link(links, "intra_node");
  hw.interNode = in.link(links, "inter_node");
  const nlohmann::json &gemm = in.object(j, "", "gemm_efficiency");
  hw.gemm.max = in.number(gemm, "gemm_efficiency", "max");
  hw.gemm.halfDim = in.number(gemm, "gemm_efficiency", "half_dim");
  if (in.error.empty() && hw.computeDtype != "bf16" && hw.computeDtype != "f32")
    in.error = source +
               ": field 'compute_dtype' must be \"bf16\" or \"f32\", "
               "got \"" +
               hw.computeDtype + "\"";
  if (in.error.empty() && hw.gemm.max > 1)
    in.error = source + ": field 'gemm_efficiency.max' must be at most 1";
  if (in.error.empty() && j.contains("attention_efficiency")) {
    const nlohmann::json &a = j["attention_efficiency"];
    if (!a.is_number() || a.get<double>() <= 0 || a.get<double>() > 1)
      in.error = source +
                 ": field 'attention_efficiency' must be a number in (0, 1], "
                 "got " +
                 a.dump();
    else
      hw.attentionEfficiency = a.get<double>();
  }
  if (j.contains("measured") && j["measured"].is_string())
    hw.measured = j["measured"].get<std::string>();
  if (in.error.empty() && j.contains("collectives")) {
    const nlohmann::json &c = j["collectives"];
    if (c == "hierarchical" || c == "ring")
      hw.hierarchical = c == "hierarchical";
    else
      in.error = source +
                 ": field 'collectives' must be \"ring\" or "
                 "\"hierarchical\", got " +
                 c.dump();
  }
  r.error = in.error;
  return r;
}

HardwareResult resolveHardware(const std::string &nameOrPath) {
  if (presets().count(nameOrPath))
    return lookupHardwarePreset(nameOrPath);
  std::ifstream in(nameOrPath);
  if (!in) {
    HardwareResult r = lookupHardwarePreset(nameOrPath);
    if (nameOrPath.find('/') != std::string::npos ||
        nameOrPath.find(".json") != std::string::npos)
      r.error = "cannot open cluster file '" + nameOrPath + "'";
    return r;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parseHardwareText(text.str(), nameOrPath);
}

std::string hardwareToJson(const Hardware &hw) {
  auto link = [](const LinkTier &l) {
    return nlohmann::json{{"bandwidth_gbps", l.bandwidthGBps},
                          {"latency_us", l.latencyUs},
                          {"efficiency", l.efficiency}};
  };
  nlohmann::json j = {
      {"name", hw.name},
      {"compute_dtype", hw.computeDtype},
      {"gpus_per_node", hw.gpusPerNode},
      {"peak_tflops", hw.peakTflops},
      {"memory_gb", hw.memoryGB},
      {"hbm_gbps", hw.hbmGBps},
      {"links",
       {{"intra_node", link(hw.intraNode)},
        {"inter_node", link(hw.interNode)}}},
      {"gemm_efficiency",
       {{"max", hw.gemm.max}, {"half_dim", hw.gemm.halfDim}}},
  };
  if (hw.attentionEfficiency > 0)
    j["attention_efficiency"] = hw.attentionEfficiency;
  if (hw.hierarchical)
    j["collectives"] = "hierarchical";
  if (!hw.measured.empty())
    j["measured"] = hw.measured;
  return j.dump(2) + "\n";
}

} // namespace weft::cost
