//===- Mesh.cpp - Mesh coordinates, shard indices, groups and layouts -----===//
#include "program/Program.h"
#include "program/Shard.h"

namespace weft {

int64_t Mesh::size() const { return numElements(Dims); }

std::string axesString(const AxesList &A) {
  std::string R = "[";
  for (size_t I = 0; I < A.size(); ++I)
    R += (I ? "," : "") + A[I];
  return R + "]";
}

std::string Mesh::describe() const {
  std::string R;
  for (size_t I = 0; I < Axes.size(); ++I)
    R += (I ? " x " : "") + Axes[I] + "=" + std::to_string(Dims[I]);
  return R.empty() ? "(no mesh)" : R;
}

int Mesh::axisIndex(const std::string &Axis) const {
  for (size_t I = 0; I < Axes.size(); ++I)
    if (Axes[I] == Axis)
      return int(I);
  return -1;
}

std::vector<int64_t> Mesh::coords(int64_t Rank) const {
  std::vector<int64_t> C(Dims.size(), 0);
  for (size_t I = Dims.size(); I-- > 0;) {
    C[I] = Rank % Dims[I];
    Rank /= Dims[I];
  }
  return C;
}

int64_t Mesh::count(const std::vector<std::string> &Names) const {
  int64_t N = 1;
  for (const std::string &A : Names)
    if (int I = axisIndex(A); I >= 0)
      N *= Dims[size_t(I)];
  return N;
}

int64_t Mesh::shardIndex(int64_t Rank,
                         const std::vector<std::string> &Names) const {
  std::vector<int64_t> C = coords(Rank);
  int64_t S = 0;
  for (const std::string &A : Names)
    if (int I = axisIndex(A); I >= 0)
      S = S * Dims[size_t(I)] + C[size_t(I)];
  return S;
}

std::vector<int64_t> Mesh::group(int64_t Rank,
                                 const std::vector<std::string> &Names) const {
  std::vector<int64_t> C = coords(Rank);
  int64_t N = count(Names);
  std::vector<int64_t> Out;
  for (int64_t S = 0; S < N; ++S) {
    // Write shard index S into the coordinates of Names (last fastest).
    std::vector<int64_t> G = C;
    int64_t Rest = S;
    for (size_t K = Names.size(); K-- > 0;) {
      int I = axisIndex(Names[K]);
      if (I < 0)
        continue;
      G[size_t(I)] = Rest % Dims[size_t(I)];
      Rest /= Dims[size_t(I)];
    }
    int64_t R = 0;
    for (size_t I = 0; I < Dims.size(); ++I)
      R = R * Dims[I] + G[I];
    Out.push_back(R);
  }
  return Out;
}

Status parseMeshSpec(const std::string &Text, Mesh &M) {
  M = Mesh();
  if (Text.empty())
    return Status::error("the mesh is empty: expected AXIS=N[,AXIS=N...], "
                         "e.g. dp=2,tp=2");
  size_t Start = 0;
  while (Start <= Text.size()) {
    size_t Comma = Text.find(',', Start);
    std::string Part = Text.substr(
        Start, Comma == std::string::npos ? std::string::npos : Comma - Start);
    size_t Eq = Part.find('=');
    std::string Name = Part.substr(0, Eq);
    std::string Size = Eq == std::string::npos ? "" : Part.substr(Eq + 1);
    bool Identifier = !Name.empty() && !(Name[0] >= '0' && Name[0] <= '9');
    for (char C : Name)
      Identifier &= (C >= 'a' && C <= 'z') || (C >= 'A' && C <= 'Z') ||
                    (C >= '0' && C <= '9') || C == '_';
    bool Digits = !Size.empty() && Size.size() <= 7;
    for (char C : Size)
      Digits &= C >= '0' && C <= '9';
    if (!Identifier || !Digits || std::stoll(Size) < 1)
      return Status::error(
          "bad mesh axis '" + Part + "' in '" + Text +
          "': expected NAME=SIZE (NAME letters, digits and _, SIZE 1 to "
          "2^20, no spaces)");
    if (M.axisIndex(Name) >= 0)
      return Status::error("mesh axis '" + Name + "' appears twice in '" +
                           Text + "'");
    M.Axes.push_back(Name);
    M.Dims.push_back(std::stoll(Size));
    if (Comma == std::string::npos)
      break;
    Start = Comma + 1;
  }
  return checkMesh(M);
}

bool Layout::sharded() const {
  for (const AxesList &A : Sharding)
    if (!A.empty())
      return true;
  return false;
}

Layout Layout::replicated(const Shape &S) {
  Layout L;
  L.Global = S;
  L.Sharding.assign(S.size(), {});
  L.Blocks.assign(S.size(), 1);
  return L;
}

ShardMap shardMap(const Layout &L, const Mesh &M, int64_t Rank) {
  ShardMap S;
  S.Global = L.Global;
  for (size_t D = 0; D < L.Global.size(); ++D) {
    const AxesList &A = D < L.Sharding.size() ? L.Sharding[D] : AxesList{};
    int64_t C = M.count(A);
    S.Count.push_back(C);
    S.Index.push_back(M.shardIndex(Rank, A));
    S.Blocks.push_back(D < L.Blocks.size() ? L.Blocks[D] : 1);
    S.Local.push_back(L.Global[D] / C);
  }
  return S;
}

} // namespace weft
