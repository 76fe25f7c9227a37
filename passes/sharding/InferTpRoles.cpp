//===- InferTpRoles.cpp - weft-infer-tp-roles: roles from structure -------===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/sharding/TpRoles.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTINFERTPROLES
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

ParamOp paramOf(Value v) { return v.getDefiningOp<ParamOp>(); }

bool isNorm(Value v) {
  return isa_and_nonnull<LayerNormOp, RmsNormOp>(v.getDefiningOp());
}

// One region per column-parallel layer, merged where their values meet
// (q, k and v in one attention; gate and up in one swiglu).
struct Regions {
  struct Entry {
    ParamOp param;
    StringRef kind;
    int64_t dim;
  };
  struct Region {
    bool poisoned = false;
    bool closed = false; // has a row-parallel end
    SmallVector<Entry> entries;
  };
  SmallVector<unsigned> parent;
  SmallVector<Region> regions;
  llvm::DenseMap<Value, unsigned> regionOf;
  // The column parameters whose output a value is, through a bias add (the
  // weight and bias a fused-QKV split divides into blocks).
  llvm::DenseMap<Value, SmallVector<ParamOp, 2>> chain;
  llvm::DenseMap<Operation *, int64_t> blocks;

  unsigned find(unsigned r) {
    while (parent[r] != r)
      r = parent[r] = parent[parent[r]];
    return r;
  }
  unsigned fresh() {
    parent.push_back(parent.size());
    regions.emplace_back();
    return parent.size() - 1;
  }
  std::optional<unsigned> of(Value v) {
    auto it = regionOf.find(v);
    if (it == regionOf.end())
      return std::nullopt;
    return find(it->second);
  }
  unsigned merge(unsigned a, unsigned b) {
    a = find(a), b = find(b);
    if (a == b)
      return a;
    parent[b] = a;
    Region &ra = regions[a], &rb = regions[b];
    ra.poisoned |= rb.poisoned;
    ra.closed |= rb.closed;
    ra.entries.append(rb.entries.begin(), rb.entries.end());
    return a;
  }
  void poison(Operation *op) {
    for (Value v : op->getOperands())
      if (auto r = of(v))
        regions[*r].poisoned = true;
  }
  void add(unsigned r, ParamOp p, StringRef kind, int64_t dim) {
    regions[find(r)].entries.push_back({p, kind, dim});
  }
};

// The dim of a matmul's `b` that holds its output features, and the one
// it contracts.
int64_t outputDim(MatmulOp m) { return m.getTransposeB() ? 0 : 1; }
int64_t inputDim(MatmulOp m) { return m.getTransposeB() ? 1 : 0; }

bool usedOnce(ParamOp p) { return p && p->hasOneUse(); }

// A matmul of a norm's output by a [V, d] parameter, V the vocabulary,
// whose result only a cross-entropy reads or the function returns.
bool isVocabHead(MatmulOp m, int64_t vocab) {
  ParamOp w = paramOf(m.getB());
  if (!w || m.getTransposeA() || !isNorm(m.getA()) || vocab <= 0 ||
      w.getType().getRank() != 2 ||
      w.getType().getShape()[outputDim(m)] != vocab)
    return false;
  if (m->use_empty())
    return false;
  for (OpOperand &use : m->getUses()) {
    Operation *user = use.getOwner();
    if (isa<func::ReturnOp>(user))
      continue;
    if (isa<CrossEntropyOp>(user) && use.getOperandNumber() == 0)
      continue;
    return false;
  }
  return true;
}

} // namespace

llvm::DenseMap<Operation *, TpRoleAttr> weft::inferTpRoles(func::FuncOp fn) {
  llvm::DenseMap<Operation *, TpRoleAttr> roles;
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return roles;
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();

  // The token tables (a weft.embedding's) and the vocabulary they index.
  SmallVector<ParamOp> tables;
  int64_t vocab = 0;
  for (Operation &op : body)
    if (auto e = dyn_cast<EmbeddingOp>(op))
      if (ParamOp t = paramOf(e.getTable())) {
        if (!llvm::is_contained(tables, t))
          tables.push_back(t);
        int64_t rows = t.getType().getShape()[0];
        vocab = vocab == 0 || vocab == rows ? rows : -1;
      }

  Regions r;
  SmallVector<MatmulOp> heads;
  for (Operation &op : body) {
    if (isa<ParamOp>(op))
      continue;
    auto in = [&](Value v) { return r.of(v).has_value(); };
    if (auto m = dyn_cast<MatmulOp>(op)) {
      ParamOp w = paramOf(m.getB());
      bool aIn = in(m.getA());
      if (!aIn && isVocabHead(m, vocab)) {
        heads.push_back(m);
        continue;
      }
      if (!aIn && usedOnce(w) && !m.getTransposeA() && isNorm(m.getA())) {
        unsigned reg = r.fresh();
        r.add(reg, w, "column", outputDim(m));
        r.regionOf[m.getResult()] = reg;
        r.chain[m.getResult()] = {w};
        continue;
      }
      if (aIn && usedOnce(w) && !m.getTransposeA()) {
        unsigned reg = *r.of(m.getA());
        r.add(reg, w, "row", inputDim(m));
        r.regions[reg].closed = true;
        continue;
      }
      r.poison(&op);
      continue;
    }
    if (auto bias = dyn_cast<BiasAddOp>(op)) {
      ParamOp b = paramOf(bias.getBias());
      if (!in(bias.getX()))
        continue;
      if (!usedOnce(b)) {
        r.poison(&op);
        continue;
      }
      unsigned reg = *r.of(bias.getX());
      r.add(reg, b, "column", 0);
      r.regionOf[bias.getResult()] = reg;
      auto chain = r.chain.lookup(bias.getX());
      chain.push_back(b);
      r.chain[bias.getResult()] = chain;
      continue;
    }
    if (isa<GeluOp, ActOp, SiluOp, PointwiseOp, RopeOp>(op)) {
      if (auto reg = r.of(op.getOperand(0)))
        r.regionOf[op.getResult(0)] = *reg;
      continue;
    }
    if (isa<SwigluOp, MulOp, AttentionOp>(op)) {
      bool all = llvm::all_of(op.getOperands(), in);
      bool any = llvm::any_of(op.getOperands(), in);
      if (all) {
        unsigned reg = *r.of(op.getOperand(0));
        for (Value v : op.getOperands())
          reg = r.merge(reg, *r.of(v));
        r.regionOf[op.getResult(0)] = reg;
      } else if (any) {
        r.poison(&op);
      }
      continue;
    }
    if (auto split = dyn_cast<SplitOp>(op)) {
      auto reg = r.of(split.getX());
      if (!reg)
        continue;
      ArrayRef<int64_t> sizes = split.getSizes();
      if (!llvm::all_equal(sizes)) {
        r.poison(&op);
        continue;
      }
      for (ParamOp p : r.chain.lookup(split.getX()))
        r.blocks[p] = int64_t(sizes.size());
      for (Value v : split.getResults())
        r.regionOf[v] = *reg;
      continue;
    }
    r.poison(&op);
  }

  auto role = [&](StringRef kind, int64_t dim, int64_t blocks = 1) {
    return TpRoleAttr::get(ctx, kind, dim, blocks);
  };
  for (unsigned i = 0; i < r.regions.size(); ++i) {
    if (r.find(i) != i)
      continue;
    const Regions::Region &reg = r.regions[i];
    if (reg.poisoned || !reg.closed)
      continue;
    for (const Regions::Entry &e : reg.entries)
      roles[e.param] =
          role(e.kind, e.dim,
               r.blocks.lookup(e.param) > 1 ? r.blocks.lookup(e.param) : 1);
  }
  // The LM head and the token tables split over the vocabulary, if every
  // use of the head's weight is the head or a token lookup (tied).
  for (MatmulOp head : heads) {
    ParamOp w = paramOf(head.getB());
    bool plain = llvm::all_of(w->getUsers(), [&](Operation *u) {
      return isa<EmbeddingOp>(u) || u == head.getOperation();
    });
    if (!plain)
      continue;
    roles[w] = role("vocab", outputDim(head));
    for (ParamOp t : tables)
      if (llvm::all_of(t->getUsers(), [&](Operation *u) {
            return isa<EmbeddingOp>(u) || llvm::is_contained(heads, u);
          }))
        roles[t] = role("vocab", 0);
  }
  // A role declared before (by a frontend or a user) stands.
  fn.walk([&](ParamOp p) {
    if (auto declared = p->getAttrOfType<TpRoleAttr>(attrname::kTpRole))
      roles[p] = declared;
  });
  return roles;
}

namespace {
struct InferTpRoles : weft::impl::WeftInferTpRolesBase<InferTpRoles> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>())
      for (auto [op, role] : inferTpRoles(fn))
        op->setAttr(attrname::kTpRole, role);
  }
};
} // namespace
