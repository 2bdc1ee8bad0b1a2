#!/usr/bin/env python3
"""make.py: writes the PyTorch schedule CSV files that tests/test_schedule_csv.c imports, and
checks that PyTorch loads the files plumb writes. Not used at build or run time: plumb needs
no Python. Run once per installed torch version (see README.md in this folder):

    python make.py gen   OUTDIR            # PyTorch's own CSV files, into OUTDIR/<version>/
    python make.py check PLUMB             # plumb's export, loaded by this torch's _load_csv

The schedules are built without a process group: each schedule class gets stand-in stage
objects that carry only the fields its constructor reads (stage index, stage count, group
size and rank, an identity module). No tensor is computed.
"""
import csv
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import torch
import torch.distributed.pipelining.schedules as S

VERSION = ".".join(torch.__version__.split("+")[0].split(".")[:2])  # "2.15"


def stand_in_stages(ranks, chunks, v_shape, rank=0):
    """The stages of `rank`: stand-ins for _PipelineStageBase with the placement only."""
    n = ranks * chunks
    if v_shape:
        idx = [rank, 2 * ranks - 1 - rank]
    else:
        idx = [rank + c * ranks for c in range(chunks)]
    return [SimpleNamespace(stage_index=i, num_stages=n, group_size=ranks, group_rank=rank,
                            is_first=i == 0, is_last=i == n - 1,
                            submod=torch.nn.Identity()) for i in idx]


def write_rows(path, rows):
    # what PipelineScheduleMulti._dump_csv does: csv.writer over each rank's action list
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for r in sorted(rows):
            w.writerow(rows[r])


# (file stem, class name, chunks per rank, V placement), each on 2 ranks x 4 microbatches
# and 4 ranks x 8
CLASSES = [
    ("gpipe", "ScheduleGPipe", 1, False),
    ("1f1b", "Schedule1F1B", 1, False),
    ("interleaved1f1b", "ScheduleInterleaved1F1B", 2, False),
    ("interleavedzb", "ScheduleInterleavedZeroBubble", 2, False),
    ("zbv", "ScheduleZBVZeroBubble", 2, True),
    ("dualpipev", "ScheduleDualPipeV", 2, True),
]
CASES = [(f"{stem}-p{p}-m{m}", cls, p, m, chunks, v)
         for stem, cls, chunks, v in CLASSES for p, m in ((2, 4), (4, 8))]


def runtime_for(ranks, chunks, v_shape, mb):
    """A bare _PipelineScheduleRuntime placed like the schedule, for _load_csv."""
    return S._PipelineScheduleRuntime(stand_in_stages(ranks, chunks, v_shape), mb)


def gen(outdir):
    out = os.path.join(outdir, VERSION)
    os.makedirs(out, exist_ok=True)
    for stem, cls, ranks, mb, chunks, v in CASES:
        klass = getattr(S, cls, None)
        if klass is None:
            print(f"{VERSION}: no {cls}, skipped")
            continue
        co = os.path.join(out, stem + ".compute_only.csv")
        cc = os.path.join(out, stem + ".compute_comms.csv")
        if issubclass(klass, S.PipelineScheduleSingle):
            # one stage per rank: pipeline_order covers every rank; its compute actions go
            # through the runtime's own lowering (_load_csv compute_only) for compute_comms
            sch = klass(stand_in_stages(ranks, 1, False)[0], mb)
            order = {r: [a for a in acts if a is None or a.is_compute_op]
                     for r, acts in sch.pipeline_order.items()}
            write_rows(co, order)
            rt = runtime_for(ranks, 1, False, mb)
            try:
                rt._load_csv(co, format="compute_only")
            except AssertionError as e:  # PyTorch refuses its own order: keep it, say why
                print(f"{VERSION}: {stem}: compute_only only; PyTorch's _load_csv refuses it: "
                      f"{str(e).splitlines()[0]}")
                continue
            rt._dump_csv(cc, format="compute_comms")
        else:
            sch = klass(stand_in_stages(ranks, chunks, v), mb)
            sch._dump_csv(co, format="compute_only")
            sch._dump_csv(cc, format="compute_comms")
        print(f"{VERSION}: {stem}")


# plumb schedules whose export this torch's _load_csv must take
CHECKS = [
    ("gpipe", 2, 1, 4), ("1f1b-flush", 4, 1, 8), ("interleaved", 2, 2, 4),
    ("interleaved", 4, 2, 8), ("zb-h1", 4, 1, 8), ("zb-v", 2, 2, 4), ("zb-v", 4, 2, 8),
]


def check(plumb):
    """Exports plumb's schedules in both forms and loads each with this torch's
    _PipelineScheduleRuntime._load_csv. Prints one line per file; exit 1 if any fails."""
    bad = 0
    tmp = tempfile.mkdtemp()
    for kind, ranks, chunks, mb in CHECKS:
        for fmt, extra in (("compute_comms", []), ("compute_only", ["--compute-only"])):
            for pf in ("2.11", "2.15"):
                if fmt == "compute_only" and pf == "2.11":
                    continue  # the same bytes in both versions
                path = os.path.join(tmp, f"{kind}-{ranks}-{mb}-{fmt}-{pf}.csv")
                cmd = [plumb, "schedule", "--kind", kind, "--stages", str(ranks),
                       "--chunks", str(chunks), "--microbatches", str(mb), "--csv",
                       "--pytorch", pf] + extra
                with open(path, "w") as f:
                    subprocess.run(cmd, stdout=f, check=True)
                v = kind == "zb-v"
                try:
                    rt = runtime_for(ranks, chunks, v, mb)
                    rt._load_csv(path, format=fmt)
                    if fmt == "compute_comms":  # PyTorch's replay of the sends and receives
                        rt._simulate()
                    got = "loads"
                    # does PyTorch see the same actions plumb wrote?
                    with open(path, newline="") as f:
                        rows = list(csv.reader(f))
                    if fmt == "compute_comms":
                        same = all([str(a) for a in rt.pipeline_order_with_comms[r]] == rows[r]
                                   for r in range(ranks))
                        got += ", parsed as written" if same else ", PARSED DIFFERENTLY"
                        if not same:
                            bad += 1
                except Exception as e:  # report, do not stop
                    got = f"REFUSED: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
                    if pf == VERSION or fmt == "compute_only":
                        bad += 1
                print(f"torch {VERSION} _load_csv({fmt}) of plumb --kind {kind} --stages "
                      f"{ranks} --chunks {chunks} --microbatches {mb} --pytorch {pf}: {got}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    else:
        sys.exit(__doc__)
