//===- Queue.cpp - The synchronous host queue -----------------------------===//
#include "runtime/Queue.h"

#include <cstring>

namespace weft {

namespace {
class HostQueue final : public Queue {
public:
  bool hostMemory() const override { return true; }
  Status copyToDevice(void *Device, const void *Host, size_t Bytes) override {
    return move(Device, Host, Bytes);
  }
  Status copyToHost(void *Host, const void *Device, size_t Bytes) override {
    return move(Host, Device, Bytes);
  }
  Status copyOnDevice(void *Dst, const void *Src, size_t Bytes) override {
    return move(Dst, Src, Bytes);
  }
  Status fillZero(void *Device, size_t Bytes) override {
    if (Bytes)
      std::memset(Device, 0, Bytes);
    return Status::success();
  }
  // Work is done when it returns: an event is complete when recorded.
  Status record(Event &) override { return Status::success(); }
  Status waitFor(const Event &) override { return Status::success(); }
  Status synchronize() override { return Status::success(); }

private:
  static Status move(void *Dst, const void *Src, size_t Bytes) {
    if (Bytes && Dst != Src)
      std::memmove(Dst, Src, Bytes);
    return Status::success();
  }
};
} // namespace

std::unique_ptr<Queue> createHostQueue() {
  return std::make_unique<HostQueue>();
}

Queue &hostQueue() {
  static HostQueue Q;
  return Q;
}

} // namespace weft
