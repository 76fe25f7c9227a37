//===- hardware.cpp - Fuzz weft-plan's hardware JSON reader ---------------===//
#include "planner/Hardware.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  weft::cost::HardwareResult R = weft::cost::parseHardwareText(
      std::string(reinterpret_cast<const char *>(Data), Size), "fuzz");
  if (R.error.empty())
    (void)weft::cost::hardwareToJson(R.hardware);
  return 0;
}
