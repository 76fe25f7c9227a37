//===- RopeTable.cpp - RoPE frequencies with scaling, as transformers ----===//
//
// transformers' modeling_rope_utils (4.49), in double precision: the
// default inverse frequencies theta^(-2i/d), then
//   linear:  divided by factor;
//   dynamic: theta raised to fit the compiled sequence when it exceeds
//            max_position_embeddings (NTK-aware; what transformers'
//            dynamic update computes for a batch of that length);
//   llama3:  low frequencies divided by factor, high ones kept, a smooth
//            blend between;
//   yarn:    a ramp between interpolated and extrapolated frequencies, and
//            cos/sin scaled by the attention factor.
//
//===----------------------------------------------------------------------===//
#include "frontends/builtin/ModelConfig.h"

#include <algorithm>
#include <cmath>

namespace weft {
namespace {

std::vector<double> defaultInvFreq(double theta, int64_t dim) {
  std::vector<double> f(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    f[size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(dim));
  return f;
}

void llama3(const RopeScaling &s, std::vector<double> &f) {
  double lowWavelen = double(s.originalMaxPositions) / s.lowFreqFactor;
  double highWavelen = double(s.originalMaxPositions) / s.highFreqFactor;
  for (double &inv : f) {
    double wavelen = 2 * M_PI / inv;
    if (wavelen > lowWavelen) {
      inv = inv / s.factor;
    } else if (!(wavelen < highWavelen)) { // medium: blend
      double smooth =
          (double(s.originalMaxPositions) / wavelen - s.lowFreqFactor) /
          (s.highFreqFactor - s.lowFreqFactor);
      inv = (1 - smooth) * inv / s.factor + smooth * inv;
    }
  }
}

void yarn(const RopeScaling &s, double theta, int64_t dim, int64_t maxPositions,
          std::vector<double> &f, double &scale) {
  scale = s.attentionFactor > 0 ? s.attentionFactor
                                : 0.1 * std::log(s.factor) + 1.0;
  auto correctionDim = [&](double rotations) {
    return double(dim) *
           std::log(double(maxPositions) / (rotations * 2 * M_PI)) /
           (2 * std::log(theta));
  };
  double low = std::max(std::floor(correctionDim(s.betaFast)), 0.0);
  double high = std::min(std::ceil(correctionDim(s.betaSlow)), double(dim - 1));
  if (low == high)
    high += 0.001; // transformers' guard against a zero-width ramp
  for (size_t i = 0; i < f.size(); ++i) {
    double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    double extrapolation = 1 - ramp;
    double interpolated = f[i] / s.factor;
    f[i] = interpolated * (1 - extrapolation) + f[i] * extrapolation;
  }
}

} // namespace

RopeTable ropeTable(const ModelConfig &c, int64_t seq) {
  RopeTable t;
  const RopeScaling &s = c.ropeScaling;
  int64_t dim = c.headDimOrDefault();
  if (s.type == "default")
    return t;
  double theta = c.ropeTheta;
  if (s.type == "dynamic") {
    int64_t len = std::max(seq, c.maxPositions);
    theta *= std::pow(s.factor * double(len) / double(c.maxPositions) -
                          (s.factor - 1),
                      double(dim) / double(dim - 2));
  }
  t.invFreq = defaultInvFreq(theta, dim);
  if (s.type == "linear")
    for (double &inv : t.invFreq)
      inv /= s.factor;
  else if (s.type == "llama3")
    llama3(s, t.invFreq);
  else if (s.type == "yarn")
    yarn(s, theta, dim, c.maxPositions, t.invFreq, t.scale);
  return t;
}

} // namespace weft
