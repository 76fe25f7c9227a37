//===- checkpoint.cpp - Fuzz the checkpoint directory's JSON files --------===//
//
// Input: one byte choosing the file, then its text: 0 a sharded
// checkpoint's layout.json, 1 trainer_state.json, 2 manifest.json (each
// parsed and checked as loadCheckpoint does before it reads any tensor).
//
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/CheckpointManifest.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  if (Size == 0)
    return 0;
  std::string Text(reinterpret_cast<const char *>(Data) + 1, Size - 1);
  switch (Data[0] % 3) {
  case 0: {
    weft::Expected<weft::CheckpointLayout> L =
        weft::parseCheckpointLayout(Text, "layout.json");
    if (L.ok())
      for (const auto &[Name, Layout] : L->Tensors)
        (void)weft::numElements(Layout.Global);
    break;
  }
  case 1:
    (void)weft::parseTrainerState(Text, "trainer_state.json");
    break;
  default:
    (void)weft::parseManifest(Text, "manifest.json");
  }
  return 0;
}
