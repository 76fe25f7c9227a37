//===- StageBalance.cpp - cutting layers into balanced stages -------------===//
#include "passes/pipeline/StageBalance.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace weft {

std::vector<int64_t> balanceStages(const std::vector<double> &layerCost,
                                   double first, double last, int64_t n) {
  const int64_t l = int64_t(layerCost.size());
  std::vector<int64_t> stage(size_t(l), 0);
  if (n <= 1 || l < n)
    return stage;
  std::vector<double> prefix(size_t(l) + 1, 0.0);
  for (int64_t i = 0; i < l; ++i)
    prefix[i + 1] = prefix[i] + layerCost[i];
  auto cost = [&](int64_t s, int64_t from, int64_t to) {
    return prefix[to] - prefix[from] + (s == 0 ? first : 0) +
           (s == n - 1 ? last : 0);
  };
  // best[s][j]: the least largest stage cost cutting layers [0, j) into
  // stages [0, s]; cut[s][j]: where stage s starts.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(n, std::vector<double>(l + 1, inf));
  std::vector<std::vector<int64_t>> cut(n, std::vector<int64_t>(l + 1, 0));
  for (int64_t j = 1; j <= l; ++j)
    best[0][j] = cost(0, 0, j);
  for (int64_t s = 1; s < n; ++s)
    for (int64_t j = s + 1; j <= l; ++j)
      for (int64_t i = s; i < j; ++i) {
        double c = std::max(best[s - 1][i], cost(s, i, j));
        // Within 0.1%: prefer the cut nearest an even split.
        double even = double(s * l) / double(n);
        if (c < best[s][j] * (1 - 1e-3) ||
            (c <= best[s][j] * (1 + 1e-3) &&
             std::abs(double(i) - even) < std::abs(double(cut[s][j]) - even))) {
          best[s][j] = c;
          cut[s][j] = i;
        }
      }
  for (int64_t s = n - 1, j = l; s >= 0; --s) {
    int64_t from = s ? cut[s][j] : 0;
    for (int64_t i = from; i < j; ++i)
      stage[i] = s;
    j = from;
  }
  return stage;
}

} // namespace weft
