//===- Hyperparams.h - AdamW and learning-rate schedule ---------*- C++ -*-===//
//
// The optimizer's hyper-parameters, their domain and the learning-rate
// schedule, shared by weft-compile (which refuses bad values before writing
// a program) and the program loader (which refuses them in a file). Header
// only and dependency free, so the compiler can use it without the runtime.
//
// The schedule follows Hugging Face transformers' convention
// (get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup and
// get_cosine_with_min_lr_schedule_with_warmup): optimizer step t (1-based)
// uses lr * f(t - 1), where
//   f(s) = s / warmup                                   for s < warmup
//   f(s) = 1                                            constant, s >= warmup
//   f(s) = m + (1 - m) * 0.5 * (1 + cos(pi * p))        cosine, s >= warmup
// with p = (s - warmup) / max(1, total - warmup) and m = min_lr / lr. So
// with warmup the first step runs at lr 0, as the Trainer's does. Past
// total_steps, weft holds min_lr (p is clamped to 1), where transformers'
// cosine would rise again.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_HYPERPARAMS_H
#define WEFT_RUNTIME_HYPERPARAMS_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

namespace weft {

struct Hyperparams {
  double Lr = 1e-3, Beta1 = 0.9, Beta2 = 0.999, Eps = 1e-8, WeightDecay = 0.0;
  std::string Schedule = "constant";
  int64_t WarmupSteps = 0, TotalSteps = 0;
  double MinLr = 0.0;
};

/// The shortest decimal that reads back as V (0.1, not 0.10000000000000001;
/// integers without a fraction), for messages that name a value.
inline std::string shortestDecimal(double V) {
  if (std::isfinite(V) && V == std::floor(V) && std::fabs(V) < 1e15)
    return std::to_string(static_cast<int64_t>(V));
  for (int Digits = 1;; ++Digits) {
    std::ostringstream OS;
    OS.precision(Digits);
    OS << V;
    if (Digits >= 17 || !std::isfinite(V) ||
        std::strtod(OS.str().c_str(), nullptr) == V)
      return OS.str();
  }
}

/// Empty when every value is in its domain, else a message naming the first
/// value that is not, with what is expected.
inline std::string checkHyperparams(const Hyperparams &H) {
  auto bad = [&](const char *Name, double V, const char *Want) {
    return std::string(Name) + "=" + shortestDecimal(V) +
           " is out of range: " + Want;
  };
  if (!std::isfinite(H.Lr) || !(H.Lr > 0))
    return bad("lr", H.Lr, "need a finite lr > 0");
  if (!std::isfinite(H.Beta1) || !(H.Beta1 >= 0 && H.Beta1 < 1))
    return bad("beta1", H.Beta1, "need 0 <= beta1 < 1");
  if (!std::isfinite(H.Beta2) || !(H.Beta2 >= 0 && H.Beta2 < 1))
    return bad("beta2", H.Beta2, "need 0 <= beta2 < 1");
  if (!std::isfinite(H.Eps) || !(H.Eps > 0))
    return bad("eps", H.Eps, "need a finite eps > 0");
  if (!std::isfinite(H.WeightDecay) || !(H.WeightDecay >= 0))
    return bad("weight_decay", H.WeightDecay,
               "need a finite weight_decay >= 0");
  if (H.Schedule != "constant" && H.Schedule != "cosine")
    return "unknown learning-rate schedule '" + H.Schedule +
           "' (expected constant or cosine)";
  if (H.WarmupSteps < 0)
    return "warmup_steps=" + std::to_string(H.WarmupSteps) +
           " is out of range: need warmup_steps >= 0";
  if (H.Schedule == "constant") {
    if (H.TotalSteps != 0 || H.MinLr != 0)
      return "total_steps=" + std::to_string(H.TotalSteps) +
             " and min_lr=" + shortestDecimal(H.MinLr) +
             " have no meaning for the constant schedule: leave them 0 or "
             "use the cosine schedule";
    return "";
  }
  if (H.TotalSteps <= 0 || H.TotalSteps < H.WarmupSteps)
    return "total_steps=" + std::to_string(H.TotalSteps) +
           " is out of range: the cosine schedule needs total_steps > 0 and "
           ">= warmup_steps=" +
           std::to_string(H.WarmupSteps);
  if (!std::isfinite(H.MinLr) || !(H.MinLr >= 0 && H.MinLr <= H.Lr))
    return bad("min_lr", H.MinLr, "need 0 <= min_lr <= lr");
  return "";
}

/// The learning rate of optimizer step `Step` (1-based); see the file
/// comment for the convention.
inline double scheduledLr(const Hyperparams &H, int64_t Step) {
  double S = double(Step - 1);
  if (S < double(H.WarmupSteps))
    return H.Lr * S / double(std::max<int64_t>(1, H.WarmupSteps));
  if (H.Schedule != "cosine")
    return H.Lr;
  double P = std::min(
      1.0, (S - double(H.WarmupSteps)) /
               double(std::max<int64_t>(1, H.TotalSteps - H.WarmupSteps)));
  double M = H.MinLr / H.Lr;
  return H.Lr * (M + (1.0 - M) * 0.5 * (1.0 + std::cos(M_PI * P)));
}

} // namespace weft

#endif // WEFT_RUNTIME_HYPERPARAMS_H
