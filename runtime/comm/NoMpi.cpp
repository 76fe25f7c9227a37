//===- NoMpi.cpp - createCommunicator in a build without MPI -------------===//
#include "runtime/comm/Communicator.h"

namespace weft {

bool haveMpi() { return false; }

Expected<std::unique_ptr<Communicator>> createCommunicator() {
  if (launchedByMpi())
    return Status::error("started by an MPI launcher, but this weft runtime "
                         "was built without MPI (install libopenmpi-dev and "
                         "reconfigure)");
  return createLocalCommunicator();
}

} // namespace weft
