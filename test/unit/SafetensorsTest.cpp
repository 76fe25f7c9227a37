//===- SafetensorsTest.cpp - safetensors read/write -----------------------===//
#include "runtime/checkpoint/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace weft;

namespace {

std::string fileWith(const std::string &Header, const std::string &Data) {
  std::string F(8, '\0');
  uint64_t N = Header.size();
  for (int I = 0; I < 8; ++I)
    F[I] = char((N >> (8 * I)) & 0xff);
  return F + Header + Data;
}

TEST(Safetensors, WriteReadRoundTrip) {
  std::vector<float> A = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -1e-3f};
  std::vector<double> B = {1.0 / 3.0, 2.0};
  std::string Path = ::testing::TempDir() + "rt.safetensors";
  ASSERT_TRUE(
      writeSafetensors(Path, {{"a.weight", DType::F32, {2, 3}, A.data()},
                              {"b", DType::F64, {2}, B.data()}})
          .ok());
  Expected<SafetensorsFile> F = SafetensorsFile::read(Path);
  ASSERT_TRUE(F.ok()) << F.message();
  const SafeTensor *Ta = F->find("a.weight");
  ASSERT_NE(Ta, nullptr);
  EXPECT_EQ(Ta->Type, "F32");
  EXPECT_EQ(Ta->Dims, (Shape{2, 3}));
  std::vector<float> A2(6);
  ASSERT_TRUE(F->convert(*Ta, DType::F32, A2.data()).ok());
  EXPECT_EQ(A, A2);
  std::vector<double> B2(2);
  ASSERT_TRUE(F->convert(*F->find("b"), DType::F64, B2.data()).ok());
  EXPECT_EQ(B, B2);
}

TEST(Safetensors, ReadsF16AndBF16) {
  // F16: 1.0 = 0x3c00, -2.5 = 0xc100, 2^-24 (subnormal) = 0x0001.
  // BF16: 1.0 = 0x3f80, -0.15625 = 0xbe20.
  std::string Data = std::string("\x00\x3c\x00\xc1\x01\x00", 6) +
                     std::string("\x80\x3f\x20\xbe", 4);
  std::string Header =
      R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[6,10]},)"
      R"("__metadata__":{"format":"pt"}})";
  Expected<SafetensorsFile> F =
      SafetensorsFile::parse(fileWith(Header, Data), "t");
  ASSERT_TRUE(F.ok()) << F.message();
  float H[3];
  double Bv[2];
  ASSERT_TRUE(F->convert(*F->find("h"), DType::F32, H).ok());
  EXPECT_EQ(H[0], 1.0f);
  EXPECT_EQ(H[1], -2.5f);
  EXPECT_EQ(H[2], std::ldexp(1.0f, -24));
  ASSERT_TRUE(F->convert(*F->find("b"), DType::F64, Bv).ok());
  EXPECT_EQ(Bv[0], 1.0);
  EXPECT_EQ(Bv[1], -0.15625);
}

TEST(Safetensors, RefusesOutOfBoundsTensor) {
  std::string Header =
      R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  Expected<SafetensorsFile> F =
      SafetensorsFile::parse(fileWith(Header, std::string(8, '\0')), "f");
  ASSERT_FALSE(F.ok());
  EXPECT_NE(F.message().find("tensor 'w' data_offsets [0, 16) lie outside the "
                             "data section of 8 bytes"),
            std::string::npos)
      << F.message();
}

TEST(Safetensors, RefusesSizeMismatchAndBadHeader) {
  std::string Header =
      R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})";
  Expected<SafetensorsFile> F =
      SafetensorsFile::parse(fileWith(Header, std::string(16, '\0')), "f");
  ASSERT_FALSE(F.ok());
  EXPECT_NE(F.message().find("needs 12 bytes"), std::string::npos);
  std::string Bad(8, '\0');
  Bad[0] = 100;
  EXPECT_FALSE(SafetensorsFile::parse(Bad, "f").ok());
  EXPECT_FALSE(SafetensorsFile::parse(fileWith("{not json", ""), "f").ok());
}

// The tensors must tile the data section (the format's rule): two tensors
// on the same bytes loaded as aliases, a hole or trailing bytes hid data.
TEST(Safetensors, RefusesOverlapsHolesAndTrailingBytes) {
  auto Error = [](const std::string &Header, size_t DataBytes) {
    Expected<SafetensorsFile> F = SafetensorsFile::parse(
        fileWith(Header, std::string(DataBytes, '\0')), "f");
    return F.ok() ? std::string("ok") : F.message();
  };
  EXPECT_EQ(Error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                  16),
            "ok");
  EXPECT_EQ(Error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  12),
            "f: tensor 'b' data_offsets [4, 12) overlap the bytes before them, "
            "which end at 8");
  EXPECT_EQ(Error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                  8),
            "f: tensor 'b' data_offsets [0, 8) overlap the bytes before them, "
            "which end at 8");
  EXPECT_EQ(
      Error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
      "f: tensor 'a' data_offsets [4, 12) leave a hole after the bytes "
      "before them, which end at 0");
  EXPECT_EQ(
      Error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12),
      "f: the tensors cover 8 of the data section's 12 bytes");
}

} // namespace
