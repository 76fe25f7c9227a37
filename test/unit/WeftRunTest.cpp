//===- WeftRunTest.cpp - The weft-run command line: output and exit codes -===//
#include "TestPrograms.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

using namespace weft::test;

namespace {

struct Result {
  int Code;
  std::string Out; // stdout and stderr
};

Result run(const std::string &Args) {
  std::string Cmd = std::string(WEFT_RUN_PATH) + " " + Args + " 2>&1";
  Result R{-1, ""};
  FILE *P = popen(Cmd.c_str(), "r");
  if (!P)
    return R;
  char Buf[4096];
  size_t N;
  while ((N = fread(Buf, 1, sizeof(Buf), P)) > 0)
    R.Out.append(Buf, N);
  int Status = pclose(P);
  R.Code = WIFEXITED(Status) ? WEXITSTATUS(Status) : -1;
  return R;
}

std::string writeFile(const std::string &Name, const std::string &Bytes) {
  std::string Path = ::testing::TempDir() + Name;
  std::ofstream(Path, std::ios::binary) << Bytes;
  return Path;
}

std::string tokenFile(size_t N, int Vocab) {
  std::string B;
  for (size_t I = 0; I < N; ++I) {
    B.push_back(char((I * 7) % Vocab));
    B.push_back(0);
  }
  return writeFile("cli_tokens.bin", B);
}

TEST(WeftRun, TrainsAndPrintsStepsAndSummary) {
  std::string Prog = writeFile("cli_tiny.wp", tinyProgram().file());
  std::string Metrics = ::testing::TempDir() + "cli_metrics.jsonl";
  std::remove(Metrics.c_str());
  Result R = run(Prog + " --steps 3 --data " + tokenFile(100, 16) +
                 " --metrics " + Metrics + " --threads 1");
  ASSERT_EQ(R.Code, 0) << R.Out;
  EXPECT_NE(R.Out.find("step    3 | loss "), std::string::npos) << R.Out;
  EXPECT_NE(R.Out.find("summary: steps 3 | first loss"), std::string::npos);
  std::ifstream In(Metrics);
  std::string Line;
  int Lines = 0;
  while (std::getline(In, Line)) {
    ++Lines;
    auto J = nlohmann::json::parse(Line, nullptr, false);
    ASSERT_FALSE(J.is_discarded()) << Line;
    for (const char *K :
         {"step", "loss", "lr", "step_time_s", "tokens_per_s", "peak_bytes"})
      EXPECT_TRUE(J.contains(K)) << K;
  }
  EXPECT_EQ(Lines, 3);
}

TEST(WeftRun, GradCheckPassesAndFails) {
  std::string Good = writeFile("cli_good.wp", tinyProgram("f64").file());
  Result R = run(Good + " --grad-check 4");
  EXPECT_EQ(R.Code, 0) << R.Out;
  EXPECT_NE(R.Out.find("grad-check: passed"), std::string::npos) << R.Out;
  ProgramBuilder PB = tinyProgram("f64");
  PB.root()["instructions"][3]["attrs"]["value"] = 2.0; // wrong gradients
  std::string Bad = writeFile("cli_bad.wp", PB.file());
  R = run(Bad + " --grad-check 4");
  EXPECT_EQ(R.Code, 1) << R.Out;
  EXPECT_NE(R.Out.find("weft-run: error: grad-check failed: parameter"),
            std::string::npos)
      << R.Out;
}

TEST(WeftRun, ErrorsAndExitCodes) {
  std::string Prog = writeFile("cli_tiny.wp", tinyProgram().file());
  Result R = run(Prog + " --bogus");
  EXPECT_EQ(R.Code, 2);
  EXPECT_NE(R.Out.find("weft-run: error: unknown flag '--bogus'"),
            std::string::npos);
  EXPECT_EQ(run(Prog + " --steps x").Code, 2);
  R = run(Prog);
  EXPECT_EQ(R.Code, 1);
  EXPECT_NE(R.Out.find("no --data given"), std::string::npos);
  std::string Bad = tinyProgram().file();
  Bad[8] = 18; // the version is a little-endian u32 at byte 8
  R = run(writeFile("cli_v18.wp", Bad) + " --dump");
  EXPECT_EQ(R.Code, 1);
  EXPECT_NE(R.Out.find("format version 18, this runtime reads version 17"),
            std::string::npos)
      << R.Out;
  R = run(Prog + " --dump");
  EXPECT_EQ(R.Code, 0);
  EXPECT_NE(R.Out.find("cross_entropy_grad  in=[11,1,13] out=[14]"),
            std::string::npos)
      << R.Out;
  EXPECT_EQ(run("--help").Code, 0);
}

} // namespace
