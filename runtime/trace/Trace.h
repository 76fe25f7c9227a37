//===- Trace.h - Write every rank's timeline as one Chrome trace -*- C++
//-*-===//
#ifndef WEFT_RUNTIME_TRACE_H
#define WEFT_RUNTIME_TRACE_H

#include "runtime/Executor.h"

#include <string>

namespace weft {

/// Collective: gathers every rank's spans (Executor::setTracing) to rank 0,
/// which writes Path durably as Chrome trace-event JSON
/// ({"traceEvents": [...]}; one process per rank, threads "main queue" and
/// "async collectives in flight"; times in µs of the steady clock, which the
/// ranks of one node share).
Status writeChromeTrace(const Executor &E, const std::string &Path);

} // namespace weft

#endif // WEFT_RUNTIME_TRACE_H
