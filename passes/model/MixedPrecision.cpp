//===- MixedPrecision.cpp - weft-mixed-precision: bf16 over f32 masters ---===//
//
// docs/design.md decision 15. Runs on the forward model, before autodiff:
// the casts it inserts are differentiated like any op.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/NamedTensors.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <cmath>

namespace weft {
#define GEN_PASS_DEF_WEFTMIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

RankedTensorType withElement(Type t, Type element) {
  auto r = cast<RankedTensorType>(t);
  return RankedTensorType::get(r.getShape(), element);
}

bool hasElement(Type t, Type element) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getElementType() == element;
}

struct MixedPrecision : weft::impl::WeftMixedPrecisionBase<MixedPrecision> {
  using WeftMixedPrecisionBase::WeftMixedPrecisionBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (dtype == "f32")
      return;
    if (dtype != "bf16") {
      fn.emitError("weft-mixed-precision: dtype must be f32 or bf16, got '")
          << dtype << "'";
      return signalPassFailure();
    }
    if (failed(lower(fn)))
      signalPassFailure();
  }

  LogicalResult lower(func::FuncOp fn) {
    MLIRContext *ctx = fn.getContext();
    Type f32 = Float32Type::get(ctx), bf16 = BFloat16Type::get(ctx);
    OpBuilder b(ctx);
    SmallVector<Operation *> ops;
    for (Operation &op : fn.getBody().front().without_terminator())
      ops.push_back(&op);
    // A named tensor input (a graph of float inputs) is read in bf16 like a
    // parameter: one copy, the argument itself stays the program's f32.
    b.setInsertionPointToStart(&fn.getBody().front());
    for (BlockArgument arg : fn.getArguments()) {
      if (!fn.getArgAttr(arg.getArgNumber(), weft::attrname::kInput) ||
          !hasElement(arg.getType(), f32) || arg.use_empty())
        continue;
      auto t = cast<RankedTensorType>(arg.getType());
      auto copy = CastOp::create(b, fn.getLoc(), withElement(t, bf16), arg);
      arg.replaceAllUsesExcept(copy.getResult(), copy);
    }
    for (Operation *op : ops) {
      if (isa<ParamGradOp, AdamWOp, StoredGradOp>(op))
        return op->emitOpError("is training state: weft-mixed-precision runs "
                               "on the forward model, before weft-autodiff");
      if (auto p = dyn_cast<ParamOp>(op)) {
        if (!hasElement(p.getType(), f32))
          return p.emitOpError("is ")
                 << p.getType()
                 << "; mixed precision keeps f32 master weights (build the "
                    "model in f32)";
        readParamInBf16(b, p.getResult(), bf16);
        continue;
      }
      // A float constant (the generic path's, a program buffer) is read in
      // bf16 like a parameter: one copy, the constant stays f32.
      if (auto c = dyn_cast<ConstantOp>(op)) {
        if (hasElement(c.getType(), f32)) {
          saturateToBf16(c);
          readInBf16(b, c.getResult(), bf16);
        }
        continue;
      }
      if (isa<CastOp>(op))
        continue;
      // A regression's loss compares with the program's f32 targets: on an
      // f32 copy of the prediction (exact), the loss f32.
      if (auto mse = dyn_cast<MseLossOp>(op)) {
        auto t = cast<RankedTensorType>(mse.getPred().getType());
        if (hasElement(t, bf16)) {
          b.setInsertionPoint(mse);
          mse.getPredMutable().assign(CastOp::create(b, mse.getLoc(),
                                                     withElement(t, f32),
                                                     mse.getPred())
                                          .getResult());
        }
        continue;
      }
      // Cross-entropy infers an f32 loss from bf16 logits (its kernels
      // reduce in f32), so the logits need no f32 copy.
      if (failed(retype(op, f32, bf16)))
        return failure();
    }
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    // A forward-only function's outputs (bf16 logits or hidden states,
    // any named tensor, a scalar too) are returned widened to f32: exact,
    // and the program's float dtype. A training function's loss stays
    // f32 (refused below otherwise).
    const bool named = namesTensors(fn);
    b.setInsertionPoint(ret);
    for (OpOperand &out : ret->getOpOperands()) {
      auto t = cast<RankedTensorType>(out.get().getType());
      if ((t.getRank() > 0 || named) && hasElement(t, bf16))
        out.set(CastOp::create(b, ret.getLoc(), withElement(t, f32), out.get())
                    .getResult());
    }
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                                 ret.getOperandTypes()));
    for (Value v : ret.getOperands())
      if (!hasElement(v.getType(), f32))
        return ret.emitOpError("returns ")
               << v.getType() << "; the loss must stay f32";
    return success();
  }

  /// A finite value past bf16's range would round to an infinity in the
  /// copy: HF's mask fill finfo(float32).min becomes -inf, and a row it
  /// masks whole becomes NaN where torch's is uniform. Such values become
  /// bf16's largest finite magnitude (they would round there or past it).
  static void saturateToBf16(ConstantOp c) {
    constexpr double kBf16Max = 3.3895313892515355e38; // 0x7f7f
    auto values = dyn_cast<DenseFPElementsAttr>(c.getValue());
    if (!values || llvm::none_of(values.getValues<APFloat>(), [&](APFloat v) {
          double x = v.convertToDouble();
          return std::isfinite(x) && std::abs(x) > kBf16Max;
        }))
      return;
    SmallVector<float> saturated;
    for (APFloat v : values.getValues<APFloat>()) {
      double x = v.convertToDouble();
      saturated.push_back(float(std::isfinite(x) && std::abs(x) > kBf16Max
                                    ? std::copysign(kBf16Max, x)
                                    : x));
    }
    c.setValueAttr(DenseElementsAttr::get(cast<ShapedType>(c.getType()),
                                          ArrayRef<float>(saturated)));
  }

  /// One bf16 copy of a parameter per op that reads it, just before that
  /// op: a tied table's lookup and LM head each read their own, so autodiff
  /// sums the two gradients in f32, each rounded to bf16 once (as
  /// Megatron's fp32 main_grad does), where one shared copy summed them in
  /// bf16. A parameter read once gets the one copy as before.
  static void readParamInBf16(OpBuilder &b, Value v, Type bf16) {
    SmallVector<Operation *> readers;
    for (Operation *user : v.getUsers())
      if (!llvm::is_contained(readers, user))
        readers.push_back(user);
    if (readers.size() < 2)
      return readInBf16(b, v, bf16);
    for (Operation *user : readers) {
      b.setInsertionPoint(user);
      auto copy =
          CastOp::create(b, v.getLoc(), withElement(v.getType(), bf16), v);
      user->replaceUsesOfWith(v, copy.getResult());
    }
  }

  /// One bf16 copy of v (a parameter, a constant), read by all its users.
  static void readInBf16(OpBuilder &b, Value v, Type bf16) {
    if (v.use_empty())
      return;
    b.setInsertionPointAfterValue(v);
    auto copy =
        CastOp::create(b, v.getLoc(), withElement(v.getType(), bf16), v);
    v.replaceAllUsesExcept(copy.getResult(), copy);
  }

  /// Op's results take the types its (already converted) operands imply;
  /// results without operands (fills) become bf16 directly.
  static LogicalResult retype(Operation *op, Type f32, Type bf16) {
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      SmallVector<Type> types;
      if (failed(infer.inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(),
              op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
              op->getRegions(), types)))
        return op->emitOpError("has no result types for bf16 operands");
      for (auto [r, t] : llvm::zip(op->getResults(), types))
        r.setType(t);
      return success();
    }
    if (op->hasTrait<OpTrait::SameOperandsAndResultType>() &&
        op->getNumOperands() > 0) {
      for (Value r : op->getResults())
        r.setType(op->getOperand(0).getType());
      return success();
    }
    // The generic path's ops with a written result type keep their shape
    // and take the operand's element type.
    if (isa<ReshapeOp, BroadcastOp, ReduceOp>(op)) {
      Type element =
          cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
      op->getResult(0).setType(
          withElement(op->getResult(0).getType(), element));
      return success();
    }
    if (isa<FillOp>(op)) {
      for (Value r : op->getResults())
        if (hasElement(r.getType(), f32))
          r.setType(withElement(r.getType(), bf16));
      return success();
    }
    return op->emitOpError("has no mixed-precision rule");
  }
};

} // namespace
