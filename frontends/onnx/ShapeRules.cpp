//===- ShapeRules.cpp - ONNX shape rules ----------------------------------===//
#include "frontends/onnx/ShapeRules.h"
#include "frontends/onnx/HostTensor.h"
#include "program/ShapeString.h"

#include <algorithm>

namespace weft {
namespace onnximport {

std::string shapeString(const std::vector<int64_t> &s) {
  return weft::shapeString(s.data(), s.size(), /*Spaced=*/true);
}

namespace {
int64_t product(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}
} // namespace

std::string reshapeTarget(const std::vector<int64_t> &in,
                          const std::vector<int64_t> &target, bool allowZero,
                          std::vector<int64_t> &out) {
  out = target;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowZero) {
      if (i >= in.size())
        return "shape " + shapeString(target) + " copies dim " +
               std::to_string(i) + " of a rank-" + std::to_string(in.size()) +
               " input";
      out[i] = in[i];
    } else if (out[i] == -1) {
      if (infer >= 0)
        return "shape " + shapeString(target) + " has more than one -1";
      infer = int(i);
    } else if (out[i] < 0) {
      return "shape " + shapeString(target) + " has dim " +
             std::to_string(out[i]);
    }
  }
  const int64_t n = product(in);
  if (n < 0)
    return "input shape " + shapeString(in) + " overflows int64";
  if (infer >= 0) {
    out[infer] = 1;
    int64_t rest = product(out);
    if (rest <= 0 || n % rest)
      return "cannot reshape " + shapeString(in) + " to " + shapeString(target);
    out[infer] = n / rest;
  }
  if (product(out) != n)
    return "cannot reshape " + shapeString(in) + " (" + std::to_string(n) +
           " elements) to " + shapeString(target);
  return "";
}

std::string unsqueezeShape(const std::vector<int64_t> &in,
                           const std::vector<int64_t> &axes,
                           std::vector<int64_t> &out) {
  if (axes.empty())
    return "has no axes (an Unsqueeze inserts at least one dim)";
  const int64_t rank = int64_t(in.size() + axes.size());
  std::vector<bool> inserted(size_t(rank), false);
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank || inserted[n])
      return "axis " + std::to_string(a) + " is out of range or repeated";
    inserted[n] = true;
  }
  out.clear();
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    out.push_back(inserted[d] ? 1 : in[next++]);
  return "";
}

std::string squeezeShape(const std::vector<int64_t> &in,
                         const std::vector<int64_t> &axes,
                         std::vector<int64_t> &out) {
  const int64_t rank = int64_t(in.size());
  std::vector<bool> drop(in.size(), false);
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank)
      return "axis " + std::to_string(a) + " is out of range";
    if (in[n] != 1)
      return "squeezes dim " + std::to_string(a) + " of size " +
             std::to_string(in[n]);
    drop[n] = true;
  }
  out.clear();
  for (int64_t d = 0; d < rank; ++d)
    if (!(axes.empty() ? in[d] == 1 : bool(drop[d])))
      out.push_back(in[d]);
  return "";
}

std::string transposeShape(const std::vector<int64_t> &in,
                           const std::vector<int64_t> &perm,
                           std::vector<int64_t> &out) {
  out.clear();
  if (perm.empty()) {
    out.assign(in.rbegin(), in.rend());
    return "";
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != int64_t(i) || perm.size() != in.size())
      return "perm " + shapeString(perm) + " is not a permutation of " +
             std::to_string(in.size()) + " dims";
  for (int64_t p : perm)
    out.push_back(in[p]);
  return "";
}

std::string sliceSpec(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &starts,
                      const std::vector<int64_t> &ends,
                      const std::vector<int64_t> &axesIn,
                      const std::vector<int64_t> &stepsIn, SliceSpec &out) {
  const int64_t rank = int64_t(in.size());
  std::vector<int64_t> axes = axesIn, steps = stepsIn;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return "starts, ends, axes and steps differ in length";
  out.start.assign(in.size(), 0);
  out.step.assign(in.size(), 1);
  out.shape = in;
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || seen[a])
      return "axis " + std::to_string(axes[i]) + " is out of range or repeated";
    seen[a] = true;
    const int64_t n = in[a], step = steps[i];
    if (step == 0)
      return "step 0 on axis " + std::to_string(axes[i]);
    // ONNX: a negative index counts from the end; then starts clamp to
    // [0, n] (positive steps) or [0, n-1] (negative ones), ends to [0, n]
    // or [-1, n-1].
    auto wrap = [&](int64_t v) {
      return v < 0 ? (v < -n ? -n - 1 : v + n) : v;
    };
    int64_t s = wrap(starts[i]), e = wrap(ends[i]);
    if (step > 0) {
      s = std::min(std::max<int64_t>(s, 0), n);
      e = std::min(std::max<int64_t>(e, 0), n);
    } else {
      s = std::min(std::max<int64_t>(s, 0), n - 1);
      e = std::min(std::max<int64_t>(e, -1), n - 1);
    }
    // step == INT64_MIN: one element at most (-step would overflow).
    int64_t len = step > 0            ? (e > s ? (e - s - 1) / step + 1 : 0)
                  : s <= e            ? 0
                  : step == INT64_MIN ? 1
                                      : (s - e - 1) / -step + 1;
    out.start[a] = s;
    out.step[a] = step;
    out.shape[a] = len;
  }
  return "";
}

std::string shapeTensor(const std::vector<int64_t> &in, int64_t start,
                        std::optional<int64_t> end, HostTensor &out) {
  const int64_t rank = int64_t(in.size());
  auto clampDim = [&](int64_t v) {
    v = v < 0 ? v + rank : v;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t s = clampDim(start), e = end ? clampDim(*end) : rank;
  out = HostTensor();
  out.type = HostType::I64;
  for (int64_t d = s; d < e; ++d)
    out.ints.push_back(in[d]);
  out.shape = {int64_t(out.ints.size())};
  return "";
}

} // namespace onnximport
} // namespace weft
