//===- Calibrate.h - measure this machine for the cost model ----*- C++ -*-===//
#ifndef WEFT_TOOLS_WEFT_PLAN_CALIBRATE_H
#define WEFT_TOOLS_WEFT_PLAN_CALIBRATE_H

#include "planner/Hardware.h"

#include <string>

namespace weft::cost {
/// Starts from the `local` preset and replaces what it measures: sgemm rate
/// at several sizes (peak and the efficiency curve), memcpy bandwidth.
/// `log` receives one line per measurement.
Hardware calibrateLocal(std::string &log);
} // namespace weft::cost

#endif // WEFT_TOOLS_WEFT_PLAN_CALIBRATE_H
