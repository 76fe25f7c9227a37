//===- program.cpp - Fuzz the program loader ------------------------------===//
//
// Input: a whole program file (container + JSON payload), or, when it does
// not start with the container's magic, a JSON payload alone (the container
// hash would otherwise reject almost every mutation). A program that loads is
// also dumped, as `weft-run --dump` would.
//
//===----------------------------------------------------------------------===//
#include "program/Program.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  std::string Bytes(reinterpret_cast<const char *>(Data), Size);
  weft::Expected<weft::Program> P =
      Size >= 8 && std::memcmp(Data, "WEFTPROG", 8) == 0
          ? weft::parseProgram(Bytes)
          : weft::parseProgramJson(Bytes);
  if (P.ok())
    (void)weft::dumpProgram(*P);
  return 0;
}
