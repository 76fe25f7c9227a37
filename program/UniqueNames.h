//===- UniqueNames.h - each name once, by hash ------------------*- C++ -*-===//
//
// Parameters, outputs and tensor inputs are named and looked up by name:
// two of one name would make one of them unreachable. The check hashes (a
// pairwise one took minutes on a file of 10^5 names).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_UNIQUENAMES_H
#define WEFT_PROGRAM_UNIQUENAMES_H

#include "program/Status.h"

#include <string>
#include <string_view>
#include <unordered_map>

namespace weft {

/// The first of N items whose name an earlier item has, as "Kind[i]Note
/// repeats name 'n' of Kind[j]". NameOf(I) is item I's name, or null to
/// leave it out.
template <typename F>
Status checkUniqueNames(size_t N, const char *Kind, const char *Note,
                        F NameOf) {
  std::unordered_map<std::string_view, size_t> Seen;
  for (size_t I = 0; I < N; ++I) {
    const std::string *Name = NameOf(I);
    if (!Name)
      continue;
    if (auto [It, New] = Seen.emplace(*Name, I); !New)
      return Status::error(std::string(Kind) + "[" + std::to_string(I) + "]" +
                           Note + " repeats name '" + *Name + "' of " + Kind +
                           "[" + std::to_string(It->second) + "]");
  }
  return Status::success();
}

} // namespace weft

#endif // WEFT_PROGRAM_UNIQUENAMES_H
