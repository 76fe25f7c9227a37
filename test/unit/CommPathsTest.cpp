//===- CommPathsTest.cpp - the measured collective path table -------------===//
#include "runtime/comm/CommPaths.h"

#include <gtest/gtest.h>

using namespace weft;

namespace {
CommPathTable parsed(const std::string &Text) {
  Expected<CommPathTable> T = CommPathTable::parse(Text, "t.json");
  EXPECT_TRUE(T.ok()) << T.message();
  return T.ok() ? *T : CommPathTable();
}

std::string errorOf(const std::string &Text) {
  Expected<CommPathTable> T = CommPathTable::parse(Text, "t.json");
  EXPECT_FALSE(T.ok());
  return T.ok() ? "" : T.message();
}
} // namespace

// The VM of issue 14: Open MPI's all-gather faster from 64 KiB to 16 MiB.
TEST(CommPaths, ChoosesByCollectiveGroupSizeAndBytes) {
  CommPathTable T = parsed(R"({"weft_comm_paths": 1, "ranks": 2,
      "all_gather": [[4096, "shm"], [65536, "mpi"], [16777216, "shm"]],
      "all_reduce": [[4096, "shm"]]})");
  EXPECT_EQ(T.choose("all_gather", 2, 1024), std::nullopt); // below: built-in
  EXPECT_EQ(T.choose("all_gather", 2, 4096), CommPath::Shm);
  EXPECT_EQ(T.choose("all_gather", 2, 65535), CommPath::Shm);
  EXPECT_EQ(T.choose("all_gather", 2, 65536), CommPath::Mpi);
  EXPECT_EQ(T.choose("all_gather", 2, 16777215), CommPath::Mpi);
  EXPECT_EQ(T.choose("all_gather", 2, 64u << 20), CommPath::Shm);
  EXPECT_EQ(T.choose("all_reduce", 2, 1u << 30), CommPath::Shm);
  // Not listed: the built-in rule.
  EXPECT_EQ(T.choose("reduce_scatter", 2, 1u << 20), std::nullopt);
  // Measured for 2 ranks, not for groups of 4.
  EXPECT_EQ(T.choose("all_gather", 4, 65536), std::nullopt);
  EXPECT_EQ(T.describe(), "all_gather: shm from 4096 B mpi from 65536 B shm "
                          "from 16777216 B; all_reduce: shm from 4096 B");
}

TEST(CommPaths, FormatRoundTrips) {
  std::map<std::string, std::vector<std::pair<size_t, CommPath>>> E = {
      {"reduce_scatter", {{4096, CommPath::Mpi}, {1u << 20, CommPath::Shm}}}};
  CommPathTable T = parsed(CommPathTable::format(4, E));
  EXPECT_EQ(T.ranks(), 4);
  EXPECT_EQ(T.choose("reduce_scatter", 4, 8192), CommPath::Mpi);
  EXPECT_EQ(T.choose("reduce_scatter", 4, 2u << 20), CommPath::Shm);
}

// Measured across nodes, a table says "hier" (hierarchical) or "mpi".
TEST(CommPaths, HierarchicalEntriesRoundTrip) {
  std::map<std::string, std::vector<std::pair<size_t, CommPath>>> E = {
      {"all_gather", {{4096, CommPath::Hier}, {1u << 20, CommPath::Mpi}}}};
  std::string Text = CommPathTable::format(4, E);
  EXPECT_NE(Text.find("[4096, \"hier\"]"), std::string::npos) << Text;
  CommPathTable T = parsed(Text);
  EXPECT_EQ(T.choose("all_gather", 4, 8192), CommPath::Hier);
  EXPECT_EQ(T.choose("all_gather", 4, 2u << 20), CommPath::Mpi);
  EXPECT_EQ(T.describe(), "all_gather: hier from 4096 B mpi from 1048576 B");
}

// Each refusal names the file, the key and the value.
TEST(CommPaths, RefusesWhatItCannotFollow) {
  EXPECT_EQ(errorOf("[1]"), "t.json: not a JSON object (a path table from "
                            "weft-bench-comm --write-table)");
  EXPECT_EQ(errorOf(R"({"weft_comm_paths": 1, "ranks": 2, "all_gather": [)"),
            "t.json: not valid JSON (a path table from weft-bench-comm "
            "--write-table)");
  EXPECT_EQ(errorOf(R"({"ranks": 2})"),
            "t.json: key 'weft_comm_paths' must be 1 (the table's format "
            "version)");
  EXPECT_EQ(errorOf(R"({"weft_comm_paths": 1, "ranks": 1})"),
            "t.json: key 'ranks' must be an integer from 2 to 2^20, got 1");
  EXPECT_EQ(
      errorOf(R"({"weft_comm_paths": 1, "ranks": 2, "broadcast": []})"),
      "t.json: key 'broadcast' is not a collective of the table (all_reduce, "
      "all_gather, reduce_scatter)");
  EXPECT_EQ(errorOf(R"({"weft_comm_paths": 1, "ranks": 2,
                        "all_reduce": [[4096, "nccl"]]})"),
            "t.json: key 'all_reduce[0]' path must be \"shm\", \"hier\" or "
            "\"mpi\", got \"nccl\"");
  EXPECT_EQ(errorOf(R"({"weft_comm_paths": 1, "ranks": 2,
                        "all_reduce": [[-1, "shm"]]})"),
            "t.json: key 'all_reduce[0]' must be [bytes, \"shm\", \"hier\" or "
            "\"mpi\"], got [-1,\"shm\"]");
  EXPECT_EQ(errorOf(R"({"weft_comm_paths": 1, "ranks": 2,
                        "all_reduce": [[4096, "shm"], [4096, "mpi"]]})"),
            "t.json: key 'all_reduce[1]' bytes 4096 must exceed the previous "
            "entry's 4096");
}
