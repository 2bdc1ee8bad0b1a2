"""published.py: what the end-to-end scripts that hold plumb against published runs share
(imported by megatron_h100.sh, nemo_perf.sh, megatron.sh, megatron_memory.sh and
megatron_a100.sh from tests/e2e/lib, whose published.sh runs the plans; not a test itself)."""

import csv
import json
import math
import os
import re


def read_rows(tsv):
    """The rows of a tab-separated table with a header line, as dicts keyed by column name
    (blank lines skipped)."""
    with open(tsv) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def profiled_params(tmp, name):
    """The parameter count `plumb profile` printed for model NAME (published.sh's
    profile_models wrote it to TMP/BASENAME.prof), or None when there is no such file or
    count."""
    path = os.path.join(tmp, os.path.basename(name) + ".prof")
    if not os.path.exists(path):
        return None
    got = re.search(r"\((\d+) parameters\)", open(path).read())
    return int(got.group(1)) if got else None


def report(path):
    """(report, iteration_s) of a `plumb plan --json` report at PATH, or (None, why not)
    when there is none (the plan failed), it has no numeric iteration_s or that is not
    positive and finite."""
    if not os.path.exists(path):
        return None, "plumb plan failed (above)"
    try:
        rep = json.load(open(path))
        t = float(rep["iteration_s"])
    except (ValueError, KeyError, TypeError) as e:
        return None, f"no numeric iteration_s in the report ({e!r})"
    return (rep, t) if t > 0 and math.isfinite(t) else (None, f"iteration_s is {t}")


def layout_errors(run, rep, row, keys, only_present=False):
    """Prints a FAIL line for each of KEYS whose value in the report REP is not the row's
    (compared as text); with only_present a key the report lacks is not compared. Returns
    the number of FAIL lines."""
    bad = 0
    for key in keys:
        if only_present and key not in rep:
            continue
        if str(rep.get(key)) != row[key]:
            print(f"FAIL {run}: the report's {key} is {rep.get(key)}, asked for {row[key]}")
            bad += 1
    return bad


def mfu_mismatch(run, rep, mfu, counted):
    """1, with a FAIL line, when the report REP's own mfu is not MFU (the source's FLOP count
    at plumb's predicted time) within 2 %, a sign that the model file and the count describe
    different work; COUNTED says whose count it is (printed after "is not"); else 0."""
    if abs(rep["mfu"] / mfu - 1) > 0.02:
        print(f"FAIL {run}: plumb's mfu {rep['mfu']:.4f} is not {counted}")
        return 1
    return 0


def held_error(errs, is_held, t_pub, t_pred):
    """The error in per cent, t_pub / t_pred - 1 (that of a throughput); its magnitude is
    appended to errs[is_held] for summarize."""
    err = 100.0 * (t_pub / t_pred - 1.0)
    errs[is_held].append(abs(err))
    return err


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


def start(argv, environ):
    """What a reader starts from: (tsv, models, tmp, rows, held, row_tol, mean_tol), its
    arguments TSV MODELS TMP (argv[1:4]), the rows of TSV (read_rows) and limits(environ)."""
    tsv, models, tmp = argv[1:4]
    return (tsv, models, tmp, read_rows(tsv)) + limits(environ)


def model_rows(rows, models, held):
    """(k, row, is_held, m) for each of ROWS: k counted from 1 (plan_row's N), whether its run
    is in HELD, and its model file MODELS/<model>.json read as a dict."""
    for k, r in enumerate(rows, 1):
        with open(os.path.join(models, r["model"] + ".json")) as f:
            yield k, r, r["run"] in held, json.load(f)


def decoder_params(m):
    """The parameter count of a plumb-transformer/1 model file M (a dict) with a plain (not
    gated) MLP: per block the query and output projections, the grouped key/value
    projections, the MLP and two LayerNorms (weight and bias), biases on every projection
    when m["bias"]; the token embedding, the LM head unless tied, learned positions when the
    file has them and the final LayerNorm. Raises ValueError for a gated MLP."""
    if m["mlp"] not in ("gelu", "relu"):
        raise ValueError(f"decoder_params: a plain MLP is counted, not {m['mlp']}")
    l, h, f, V = (m[k] for k in ("num_hidden_layers", "hidden_size", "intermediate_size",
                                 "vocab_size"))
    kv = m.get("num_key_value_heads", m["num_attention_heads"]) * h // m["num_attention_heads"]
    block = 2 * h * h + 2 * h * kv + 2 * h * f + 4 * h
    if m["bias"]:
        block += h + 2 * kv + f + h + h  # Q K V, output projection, MLP in and out
    pos = m["max_position_embeddings"] * h if m["position_embedding"] == "learned" else 0
    return l * block + (1 if m["tie_word_embeddings"] else 2) * V * h + pos + 2 * h


def parameter_errors(tmp, models, names, published):
    """Prints a FAIL line for each model of NAMES whose parameter count as `plumb profile`
    printed it (profiled_params) is not decoder_params of its file MODELS/NAME.json, or whose
    closed form is not its published size within the tolerance: PUBLISHED maps NAME to
    (size, relative tolerance); a name it lacks fails. Returns the number of FAIL lines."""
    bad = 0
    for name in sorted(names):
        with open(os.path.join(models, name + ".json")) as f:
            m = json.load(f)
        got, want = profiled_params(tmp, name), decoder_params(m)
        pub, tol = published.get(name, (None, 0))
        if got != want or not pub or abs(want / pub - 1) > tol:
            print(f"FAIL {name}: plumb counts {got} parameters, closed form {want},"
                  f" published {pub}")
            bad += 1
    return bad


def planned_report(tmp, k, run, is_held, t_pub, width):
    """(report, iteration_s, failures) of the K-th planned row (published.sh's plan_row wrote
    TMP/K.rc, .err, .cmd and .json). When there is no usable report it prints why and
    returns (None, None, failures): a plan that failed is a FAIL line with its command and
    first errors (1), unless the row is not held and plumb refused it in one line as too
    large for its devices' memory, printed as RUN (in WIDTH columns), T_PUB and 'not held:
    plumb refuses the layout (X GiB on a rank)' (0); a report without a positive finite
    iteration_s is a FAIL line (1)."""
    rc = int(open(os.path.join(tmp, f"{k}.rc")).read())
    err_line = open(os.path.join(tmp, f"{k}.err")).read().strip().splitlines()
    if rc != 0:
        fits = rc == 2 and len(err_line) == 1 and "fit the memory" in err_line[0]
        if is_held or not fits:
            print(f"FAIL {run}: exit {rc}: {open(os.path.join(tmp, f'{k}.cmd')).read().strip()}")
            print("\n".join(err_line[:3]))
            return None, None, 1
        got = re.search(r"got ([0-9.]+ GiB)", err_line[0])
        print(f"{run:{width}} {t_pub:9.3f} {'-':>10} {'-':>8}   not held: plumb refuses the"
              f" layout ({got.group(1) if got else '?'} on a rank, over its memory)")
        return None, None, 0
    rep, t = report(os.path.join(tmp, f"{k}.json"))
    if rep is None:
        print(f"FAIL {run}: {t}")
        return None, None, 1
    return rep, t, 0


def error_flag(err, is_held, row_tol, band, not_held="  not held: > {tol:g} %"):
    """(flag, failures) for a row's error ERR in per cent: beyond BAND a FAIL whether held or
    not; beyond ROW_TOL a FAIL when held, NOT_HELD (formatted with tol=ROW_TOL) otherwise;
    else ('', 0)."""
    if abs(err) > band:
        return f"  FAIL > {band:g} % (the band every row is held to)", 1
    if abs(err) > row_tol:
        if is_held:
            return f"  FAIL > {row_tol:g} %", 1
        return not_held.format(tol=row_tol), 0
    return "", 0


LAYOUT = ("tp", "pp", "dp", "gpus", "global_batch")


def row_verdict(errs, run, rep, row, is_held, t_pub, t_pred, row_tol, band=math.inf,
                not_held="  not held: > {tol:g} %"):
    """The verdict on a predicted row: (error in per cent, flag, failures). Prints a FAIL line
    for each LAYOUT column the report REP does not give as the row asked (layout_errors),
    records the error in errs (held_error) and flags it (error_flag with BAND and
    NOT_HELD)."""
    bad = layout_errors(run, rep, row, LAYOUT)
    err = held_error(errs, is_held, t_pub, t_pred)
    flag, failed = error_flag(err, is_held, row_tol, band, not_held)
    return err, flag, bad + failed
