"""published.py: what the end-to-end scripts that hold plumb against published runs share
(imported by megatron_h100.sh and nemo_perf.sh from tests/e2e/lib; not a test itself)."""


def summarize(errs, held, mean_tol):
    """Prints the mean and worst |error| of the held rows and of the others.

    errs maps True (held) and False (printed for the record) to lists of |error| in per
    cent; held is the set of held run names. Returns the number of failures: the held
    rows' mean beyond mean_tol, and a held row that was not predicted (len(errs[True])
    != len(held)), each with a FAIL line."""
    bad = 0
    for is_held in (True, False):
        e = errs[is_held]
        if not e:
            continue
        mean = sum(e) / len(e)
        what = "held rows" if is_held else "not held: rows printed for the record"
        print(f"{what}: mean |error| {mean:.2f} %, worst {max(e):.2f} % ({len(e)} rows)")
        if is_held and mean > mean_tol:
            print(f"FAIL: held rows' mean |error| {mean:.2f} % > {mean_tol:g} %")
            bad += 1
    if len(errs[True]) != len(held):
        print(f"FAIL: {len(held)} rows are held, {len(errs[True])} were predicted")
        bad += 1
    return bad


def limits(environ):
    """(held, row_tol, mean_tol) from the script's exported HELD (run names, whitespace
    separated), ROW_TOL and MEAN_TOL (per cent). Raises KeyError or ValueError when the
    script did not export them as numbers."""
    return (set(environ["HELD"].split()), float(environ["ROW_TOL"]),
            float(environ["MEAN_TOL"]))
