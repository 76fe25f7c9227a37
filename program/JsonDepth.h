//===- JsonDepth.h - refuse JSON nested too deep to parse safely -*- C++
//-*-===//
//
// nlohmann's and LLVM's JSON parsers recurse once per nesting level (and
// nlohmann's values are destroyed recursively), so a hostile file nested
// 100,000 deep overflows the stack. Every JSON input weft reads (configs,
// layouts, plans, programs, checkpoints' layout and state files, safetensors
// headers, hardware files) is scanned first; weft's own formats nest a few
// levels. Header only: the runtime, the passes and the tools share it.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_JSONDEPTH_H
#define WEFT_RUNTIME_JSONDEPTH_H

#include <string>
#include <string_view>

namespace weft {

constexpr int kMaxJsonDepth = 64;

/// Empty when `Text` nests at most kMaxJsonDepth arrays and objects (outside
/// strings), else a message naming `What`.
inline std::string jsonDepthError(std::string_view Text,
                                  const std::string &What) {
  int Depth = 0;
  bool InString = false, Escaped = false;
  for (char C : Text) {
    if (InString) {
      if (Escaped)
        Escaped = false;
      else if (C == '\\')
        Escaped = true;
      else if (C == '"')
        InString = false;
      continue;
    }
    if (C == '"')
      InString = true;
    else if (C == '[' || C == '{') {
      if (++Depth > kMaxJsonDepth)
        return What + " nests JSON arrays and objects more than " +
               std::to_string(kMaxJsonDepth) + " deep";
    } else if (C == ']' || C == '}')
      --Depth;
  }
  return "";
}

} // namespace weft

#endif // WEFT_RUNTIME_JSONDEPTH_H
