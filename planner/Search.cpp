//===- Search.cpp - the layout search -------------------------------------===//
//
// Every (dp, tp, pp) with dp * tp * pp = GPUs, tp dividing the heads, pp (x v)
// dividing the layers, dp x micro-batch dividing the global batch; every
// micro-batch size, schedule, ZeRO stage, SP and recompute mode. Each
// candidate is a closed-form estimate over the per-layer costs read once from
// the IR, so the whole space costs milliseconds.
//
//===----------------------------------------------------------------------===//
#include "planner/Search.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace weft::cost {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0)
      out.push_back(i);
  return out;
}

bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  out = std::stoll(s);
  return out > 0 || s == "0";
}

} // namespace

bool parseConstraints(const std::string &text, Constraints &out,
                      std::string &error) {
  std::stringstream in(text);
  std::string item;
  std::map<std::string, std::string> seen; // key -> first entry
  while (std::getline(in, item, ',')) {
    if (item.empty())
      continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      error = "--fix entry '" + item + "' is not KEY=VALUE";
      return false;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto [it, fresh] = seen.emplace(key, item);
    if (!fresh && it->second != item) {
      error = "contradictory --fix: " + it->second + " and " + item;
      return false;
    }
    int64_t n = 0;
    bool isInt = parseInt(value, n);
    auto needPositive = [&]() {
      if (!isInt || n < 1)
        error =
            "--fix " + key + " must be a positive integer, got '" + value + "'";
      return error.empty();
    };
    if (key == "dp" || key == "tp" || key == "pp" || key == "cp" ||
        key == "mb" || key == "v") {
      if (!needPositive())
        return false;
      auto &slot = key == "dp"   ? out.dp
                   : key == "tp" ? out.tp
                   : key == "pp" ? out.pp
                   : key == "cp" ? out.cp
                   : key == "mb" ? out.microBatch
                                 : out.virtualStages;
      slot = n;
    } else if (key == "zero") {
      if (!isInt || n > 3) {
        error = "--fix zero must be 0, 1, 2 or 3, got '" + value + "'";
        return false;
      }
      out.zero = int(n);
    } else if (key == "sp") {
      if (value != "0" && value != "1") {
        error = "--fix sp must be 0 or 1, got '" + value + "'";
        return false;
      }
      out.sequenceParallel = value == "1";
    } else if (key == "schedule") {
      if (value != "1f1b" && value != "interleaved") {
        error =
            "--fix schedule must be 1f1b or interleaved, got '" + value + "'";
        return false;
      }
      out.schedule =
          value == "1f1b" ? Schedule::OneFOneB : Schedule::Interleaved;
    } else if (key == "recompute") {
      std::optional<Recompute> r;
      if (value == "none")
        r = Recompute::None;
      else if (value == "selective")
        r = Recompute::Selective;
      else if (value == "full")
        r = Recompute::Full;
      else {
        error = "--fix recompute must be none, selective or full, got '" +
                value + "'";
        return false;
      }
      out.recompute = r;
    } else if (key == "context") {
      std::optional<ContextComm> c;
      for (ContextComm each :
           {ContextComm::AllGather, ContextComm::Ring, ContextComm::AllToAll})
        if (value == contextCommName(each))
          c = each;
      if (!c) {
        error = "--fix context must be all-gather, ring or all-to-all, got '" +
                value + "'";
        return false;
      }
      out.context = c;
    } else {
      error = "unknown --fix key '" + key +
              "' (expected dp, tp, pp, cp, mb, v, schedule, zero, sp, "
              "recompute, context)";
      return false;
    }
  }
  // Contradictions between keys.
  if (out.schedule == Schedule::Interleaved && out.virtualStages &&
      *out.virtualStages < 2) {
    error = "contradictory --fix: schedule=interleaved needs v >= 2, got v=" +
            std::to_string(*out.virtualStages);
    return false;
  }
  if (out.schedule == Schedule::OneFOneB && out.virtualStages &&
      *out.virtualStages > 1) {
    error = "contradictory --fix: schedule=1f1b has v=1, got v=" +
            std::to_string(*out.virtualStages);
    return false;
  }
  if (out.pp && *out.pp == 1 &&
      (out.schedule == Schedule::Interleaved ||
       (out.virtualStages && *out.virtualStages > 1))) {
    error =
        "contradictory --fix: an interleaved schedule needs pp > 1, got pp=1";
    return false;
  }
  if (out.tp && *out.tp == 1 && out.sequenceParallel == true) {
    error = "contradictory --fix: sp=1 needs tp > 1, got tp=1";
    return false;
  }
  if (out.dp && *out.dp == 1 && out.zero && *out.zero > 0) {
    error = "contradictory --fix: zero=" + std::to_string(*out.zero) +
            " shards over dp, got dp=1";
    return false;
  }
  return true;
}

SearchResult searchLayouts(const ModelCost &model, const Hardware &hw,
                           const SearchOptions &o) {
  SearchResult r;
  const Constraints &f = o.fix;
  const ModelDims &c = model.dims;
  int64_t fixedProduct =
      f.dp.value_or(1) * f.tp.value_or(1) * f.pp.value_or(1) * f.cp.value_or(1);
  if (o.gpus % fixedProduct != 0 ||
      (f.dp && f.tp && f.pp && f.cp && fixedProduct != o.gpus)) {
    r.error = "--gpus " + std::to_string(o.gpus) +
              " is not divisible into the fixed axes (dp*tp*pp*cp = " +
              std::to_string(fixedProduct) + ")";
    return r;
  }
  if (f.dp && o.globalBatch % *f.dp != 0) {
    r.error = "--global-batch " + std::to_string(o.globalBatch) +
              " is not divisible by dp=" + std::to_string(*f.dp);
    return r;
  }
  auto allow = [](const auto &fixed, auto value) {
    return !fixed || *fixed == value;
  };
  // Why layouts were rejected, each once, in the order met: the one that
  // matters may come before others (a fixed schedule the model cannot run,
  // then the tp values the heads refuse).
  std::vector<std::string> reasons;
  auto reject = [&](std::string why) {
    if (std::find(reasons.begin(), reasons.end(), why) == reasons.end())
      reasons.push_back(std::move(why));
  };
  std::set<int64_t> batchRejects; // dp values the global batch rejected
  for (int64_t tp : divisors(o.gpus)) {
    if (!allow(f.tp, tp))
      continue;
    if (c.numHeads % tp != 0) {
      reject("tp=" + std::to_string(tp) +
             " does not divide num_heads=" + std::to_string(c.numHeads));
      continue;
    }
    for (int64_t pp : divisors(o.gpus / tp)) {
      if (!allow(f.pp, pp))
        continue;
      // Uneven stages are fine (weft-cut-stages balances them, as Llama 3
      // 405B put 126 layers on 16 stages); each stage needs a layer.
      if (c.numLayers < pp) {
        reject("pp=" + std::to_string(pp) +
               " exceeds num_layers=" + std::to_string(c.numLayers));
        continue;
      }
      for (int64_t cp : divisors(o.gpus / (tp * pp))) {
        if (!allow(f.cp, cp))
          continue;
        // Load-balanced context parallelism cuts sequences in 2*cp chunks,
        // and weft must be able to partition the model so.
        std::string cpWhy;
        if (cp > 1 && !model.contextParallel(cpWhy)) {
          reject(cpWhy);
          continue;
        }
        if (cp > 1 && model.seq % (2 * cp) != 0) {
          reject("cp=" + std::to_string(cp) +
                 " does not cut seq=" + std::to_string(model.seq) +
                 " into 2*cp=" + std::to_string(2 * cp) + " chunks");
          continue;
        }
        int64_t dp = o.gpus / (tp * pp * cp);
        if (!allow(f.dp, dp))
          continue;
        // The three ways attention sees the other chunks (one without cp).
        std::vector<ContextComm> contexts;
        for (ContextComm cc :
             {ContextComm::AllGather, ContextComm::Ring, ContextComm::AllToAll})
          if ((cp > 1 || cc == ContextComm::AllGather) &&
              (cp == 1 || allow(f.context, cc)))
            contexts.push_back(cc);
        if (o.globalBatch % dp != 0) {
          batchRejects.insert(dp);
          reject("dp=" + std::to_string(dp) +
                 " does not divide the global batch " +
                 std::to_string(o.globalBatch));
          continue;
        }
        int64_t perReplica = o.globalBatch / dp;
        for (int64_t mb : divisors(perReplica)) {
          if (mb > o.maxMicroBatch && !f.microBatch)
            break;
          if (!allow(f.microBatch, mb))
            continue;
          int64_t m = perReplica / mb;
          std::vector<std::pair<Schedule, int64_t>> schedules;
          if (allow(f.schedule, Schedule::OneFOneB) &&
              allow(f.virtualStages, int64_t(1)))
            schedules.push_back({Schedule::OneFOneB, 1});
          // Interleaved: M a multiple of pp, the layers in pp * V equal
          // chunks, or with the first and last a layer short beside the
          // embeddings and the head (Llama 3 405B's 126 layers on pp=16,
          // as Meta cut them; weft-cut-stages balances chunks by FLOPs as it
          // does stages); a tied embedding's gradient crosses once per
          // step, outside the schedule's chunk order.
          // Why interleaving is impossible matters when it was asked for.
          const bool askedInterleaved = f.schedule.has_value();
          if (pp > 1 && allow(f.schedule, Schedule::Interleaved)) {
            if (m % pp != 0) {
              if (askedInterleaved)
                reject("interleaved on pp=" + std::to_string(pp) + " needs " +
                       "the micro-batches (" + std::to_string(m) +
                       ") a multiple of pp");
            } else
              for (int64_t v = 2; v <= c.numLayers / pp; ++v)
                if (allow(f.virtualStages, v)) {
                  if (c.numLayers % (pp * v) == 0 ||
                      (c.numLayers + 2) % (pp * v) == 0)
                    schedules.push_back({Schedule::Interleaved, v});
                  else if (f.virtualStages)
                    reject("interleaved v=" + std::to_string(v) +
                           " on pp=" + std::to_string(pp) +
                           " needs num_layers=" + std::to_string(c.numLayers) +
                           " (or 2 more) divisible by pp*v=" +
                           std::to_string(pp * v));
                }
          }
          for (auto [schedule, v] : schedules)
            for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
              if (!allow(f.zero, zero))
                continue;
              for (bool sp : {false, true}) {
                if ((sp && tp == 1) || !allow(f.sequenceParallel, sp))
                  continue;
                for (Recompute rc :
                     {Recompute::None, Recompute::Selective, Recompute::Full}) {
                  if (!allow(f.recompute, rc))
                    continue;
                  for (ContextComm cc : contexts) {
                    Layout l{dp, tp,   pp, mb, m,           schedule,
                             v,  zero, sp, rc, o.dpOverlap, o.masterWeights,
                             cp, cc};
                    l.tpOverlap = o.tpOverlap;
                    l.zero1AllReduce = o.zero1AllReduce;
                    Estimate est = estimate(model, hw, l, o.globalBatch,
                                            o.tokens, /*breakdown=*/false);
                    ++r.evaluated;
                    if (!est.error.empty()) { // weft cannot partition it so
                      reject(est.error);
                      continue;
                    }
                    ++r.valid;
                    if (!r.leastMemory ||
                        est.memoryBytes < r.leastMemory->memoryBytes)
                      r.leastMemory = est;
                    r.fitting += est.fits;
                    if (est.fits || o.memoryUnchecked)
                      r.ranked.push_back(std::move(est));
                  }
                }
              }
            }
        }
      }
    }
  }
  if (r.leastMemory) // with its breakdown
    r.leastMemory =
        estimate(model, hw, r.leastMemory->layout, o.globalBatch, o.tokens);
  if (r.valid == 0) {
    r.error = "no layout of " + std::to_string(o.gpus) +
              " GPUs satisfies the constraints";
    if (!batchRejects.empty()) {
      std::string dps;
      for (int64_t d : batchRejects)
        dps += (dps.empty() ? "" : ", ") + std::to_string(d);
      r.error += ": the global batch " + std::to_string(o.globalBatch) +
                 " is not divisible by dp = " + dps +
                 " (GPUs / (tp * pp), tp dividing the heads, pp the layers)";
    } else if (f.microBatch) {
      r.error += ": --fix mb=" + std::to_string(*f.microBatch) +
                 " divides no replica's share of the global batch " +
                 std::to_string(o.globalBatch);
    } else if (!reasons.empty()) {
      std::string all;
      for (size_t i = 0; i < reasons.size() && i < 6; ++i)
        all += (i ? "; " : "") + reasons[i];
      if (reasons.size() > 6)
        all += "; and " + std::to_string(reasons.size() - 6) + " more";
      r.error += " (rejected: " + all + ")";
    }
    return r;
  }
  if (r.ranked.empty()) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "the model fits no layout: the least memory found is %.1f GB "
                  "per GPU (",
                  r.leastMemory->memoryBytes / 1e9);
    const Layout &l = r.leastMemory->layout;
    r.error = std::string(buf) + "dp=" + std::to_string(l.dp) +
              " tp=" + std::to_string(l.tp) + " pp=" + std::to_string(l.pp) +
              (l.cp > 1 ? " cp=" + std::to_string(l.cp) : std::string()) +
              " mb=" + std::to_string(l.microBatch) +
              " zero=" + std::to_string(l.zero) +
              " recompute=" + recomputeName(l.recompute) + ") against " +
              std::to_string(int(0.95 * hw.memoryGB)) + " GB usable";
    return r;
  }
  std::stable_sort(
      r.ranked.begin(), r.ranked.end(),
      [](const Estimate &a, const Estimate &b) { return a.stepS < b.stepS; });
  // The breakdown of the layouts shown, which the search did not format.
  for (size_t i = 0; i < r.ranked.size() && i < o.breakdownTop; ++i)
    r.ranked[i] =
        estimate(model, hw, r.ranked[i].layout, o.globalBatch, o.tokens);
  return r;
}

} // namespace weft::cost
