"""Checks a `weft-run --trace` file: valid Chrome trace-event JSON, a named
process per rank, every instruction of every step on each rank's main
queue (once, or once per micro-batch; spans in order, not overlapping), collectives with bytes and group,
async collectives on their own track, pipeline transfers (which may
overlap each other) on theirs.
Prints a summary line per rank (with the unpacks that a bucket's
all-reduce did in place, spans of no time).
usage: check_trace.py TRACE RANKS STEPS INSTRUCTIONS
INSTRUCTIONS: one count for every rank, or one per rank (N0,N1,...): a
pipeline rank runs its stage's instructions."""
import collections
import json
import sys

path, ranks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
counts = [int(n) for n in sys.argv[4].split(",")]
counts = counts * ranks if len(counts) == 1 else counts
events = json.load(open(path))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(names) == list(range(ranks)), names
for rank in range(ranks):
    spans = [e for e in events if e["ph"] == "X" and e["pid"] == rank]
    main = sorted((e for e in spans if e["tid"] == 0), key=lambda e: e["ts"])
    for a, b in zip(main, main[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3, (a, b)
    run = [e for e in main if e["cat"] in ("compute", "collective")]
    seen = collections.Counter((e["args"]["step"], e["args"]["instruction"])
                               for e in run)
    want = {(s, i) for s in range(1, steps + 1)
            for i in range(counts[rank])}
    # Once per step, or once per micro-batch (forward and backward).
    assert set(seen) == want and len(set(seen.values())) <= 2, \
        f"rank {rank}: {len(seen)} (step, instruction) spans, want {len(want)}"
    for e in spans:
        if e["cat"] in ("collective", "async"):
            assert e["args"]["bytes"] > 0 and e["args"]["group"], e
    flights = [e for e in spans if e["cat"] == "async"]
    assert all(e["tid"] == 1 for e in flights)
    transfers = [e for e in spans if e["cat"] == "transfer"]
    assert all(e["tid"] == 2 and e["args"]["microbatch"] >= -1 and
               e["args"]["step"] >= 1 for e in transfers), transfers
    # Asynchronous transfers overlap each other (a send in flight while
    # the next group starts); each ends after it starts.
    assert all(e["dur"] >= 0 for e in transfers), transfers
    kinds = collections.Counter(e["cat"] for e in spans)
    sent = sum(e["args"]["bytes"] for e in transfers)
    # An unpack its all-reduce did in place runs for no time.
    in_place = sum(1 for e in run if e["name"] == "unpack" and e["dur"] == 0)
    print(f"rank {rank} ({names[rank]}): {len(run)} instruction spans, "
          f"{kinds['collective']} collectives, {kinds['async']} async in "
          f"flight, {kinds['wait']} waits, {len(transfers)} transfer groups "
          f"({sent:.0f} bytes sent)" + (f", {in_place} unpacks in place" if in_place else ""))
