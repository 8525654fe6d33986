#!/usr/bin/env python3
"""Merges benchmark sweeps from any number of machines into one report: a self-contained
HTML page (plots as inline SVG drawn by matplotlib, no scripts, no external files) and a
Markdown summary.

Input files follow bench/sweep_schema.json (flashattn_bench --sweep, bench/sweep_torch.py);
each is validated first. A series is one provider on one device from one tool. Rows are
compared only when their shapes are identical (workload, pass, batch, lengths, heads, head
dim, mask, page size, dtype); the same shape with different FLOP or byte counts in two
files is refused (exit 2), never plotted side by side.

For training rows: TFLOP/s against sequence length per head dim and mask, forward and
backward, and the same as a fraction of each device's measured matrix ceiling. For
decode rows: TB/s of K/V read per row and page size, and as a fraction of the device's
copy ceiling. Then a ratio table against a baseline series (default: the first flashattn
series; --baseline 'provider@device').

    python3 bench/report.py A.json B.json ... --html report.html --md report.md
    python3 bench/report.py --validate A.json ...
"""
import argparse
import html
import io
import json
import math
import os
import sys

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep_schema.json")
SHAPE_FIELDS = ("workload", "pass", "batch", "seqlen_q", "seqlen_k", "heads", "kv_heads", "head_dim", "causal",
                "page_block_size", "dtype")


class ReportError(Exception):
    """A file that fails the schema, or rows that must not be compared."""


def load(paths):
    """The sweeps, each validated against the schema (jsonschema, Debian's python3-jsonschema)."""
    try:
        import jsonschema
    except ImportError:
        raise ReportError("report.py needs jsonschema (Debian: python3-jsonschema) to validate its inputs")
    with open(SCHEMA_PATH) as f:
        validator = jsonschema.Draft202012Validator(json.load(f))
    sweeps = []
    for path in paths:
        with open(path) as f:
            sweep = json.load(f)
        errors = sorted(validator.iter_errors(sweep), key=lambda e: list(e.path))
        if errors:
            raise ReportError("%s does not follow %s: %s at %s" % (
                path, os.path.basename(SCHEMA_PATH), errors[0].message, "/".join(map(str, errors[0].path))))
        sweep["_path"] = path
        sweeps.append(sweep)
    return sweeps


def series_of(sweeps):
    """{series name: (sweep, [ok rows])}; a name is provider@device, with the tool added
    when one provider on one device comes from two tools."""
    keys = [(s["device"]["name"], r["provider"], s["tool"].split()[0]) for s in sweeps for r in s["rows"]]
    ambiguous = {(d, p) for d, p, t in keys if sum(1 for k in set(keys) if k[:2] == (d, p)) > 1}
    series = {}
    for sweep in sweeps:
        for row in sweep["rows"]:
            device, provider = sweep["device"]["name"], row["provider"]
            name = "%s@%s" % (provider, device)
            if (device, provider) in ambiguous:
                name += " (%s)" % sweep["tool"].split()[0]
            entry = series.setdefault(name, (sweep, []))
            if row["status"] == "ok":
                entry[1].append(row)
    return series


def shape_key(row):
    return tuple(row[f] for f in SHAPE_FIELDS)


def check_comparable(series):
    """Every shape has one FLOP count and one byte count across all series; else ReportError."""
    seen = {}
    for name, (_, rows) in series.items():
        for row in rows:
            key = shape_key(row)
            first = seen.setdefault(key, (name, row["flops"], row["bytes"]))
            for what, index in (("FLOP", 1), ("byte", 2)):
                value = row["flops" if index == 1 else "bytes"]
                if not math.isclose(first[index], value, rel_tol=1e-9):
                    raise ReportError("refusing to compare: shape %s has %s count %.6g in %s and %.6g in %s" % (
                        dict(zip(SHAPE_FIELDS, key)), what, first[index], first[0], value, name))
    return seen


def ceiling(sweep, which):
    return sweep["ceilings"][which]["value"]


# ------------------------------------------------------------------------------------ plots

def svg_of(figure):
    import matplotlib.pyplot as plt
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = out.getvalue()
    return text[text.index("<svg"):]


def training_figure(series, pass_, fraction):
    import matplotlib.pyplot as plt
    rows_of = {name: [r for r in rows if r["workload"] == "training" and r["pass"] == pass_]
               for name, (_, rows) in series.items()}
    dims = sorted({r["head_dim"] for rows in rows_of.values() for r in rows})
    if not dims:
        return None
    figure, axes = plt.subplots(len(dims), 2, figsize=(11, 3.2 * len(dims)), squeeze=False)
    for i, d in enumerate(dims):
        for j, causal in enumerate((False, True)):
            ax = axes[i][j]
            for name, rows in rows_of.items():
                points = sorted((r["seqlen_k"], r["tflops"]) for r in rows if r["head_dim"] == d and r["causal"] == causal)
                limit = ceiling(series[name][0], "matrix_tflops")
                if not points or (fraction and not limit):
                    continue
                xs, ys = zip(*points)
                ax.plot(xs, [y / limit for y in ys] if fraction else ys, marker="o", label=name)
            ax.set_xscale("log", base=2)
            ax.set_title("%s d%d %s" % (pass_, d, "causal" if causal else "non-causal"))
            ax.set_xlabel("sequence length")
            ax.set_ylabel("fraction of matrix ceiling" if fraction else "TFLOP/s")
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
    figure.tight_layout()
    return svg_of(figure)


def decode_figure(series, fraction):
    import matplotlib.pyplot as plt
    rows_of = {name: [r for r in rows if r["workload"] == "decode"] for name, (_, rows) in series.items()}
    pages = sorted({r["page_block_size"] for rows in rows_of.values() for r in rows})
    if not pages:
        return None
    figure, axes = plt.subplots(1, len(pages), figsize=(5.5 * len(pages), 3.6), squeeze=False)
    for j, page in enumerate(pages):
        ax = axes[0][j]
        labels = sorted({(r["batch"], r["seqlen_k"]) for rows in rows_of.values() for r in rows
                         if r["page_block_size"] == page})
        width = 0.8 / max(1, len(rows_of))
        for k, (name, rows) in enumerate(rows_of.items()):
            by_label = {(r["batch"], r["seqlen_k"]): r["tbps"] for r in rows if r["page_block_size"] == page}
            limit = ceiling(series[name][0], "copy_gbps")
            if not by_label or (fraction and not limit):
                continue
            values = [by_label.get(label, 0.0) * (1e3 / limit if fraction else 1.0) for label in labels]
            ax.bar([x + k * width for x in range(len(labels))], values, width, label=name)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))])
        ax.set_xticklabels(["%d x %d" % label for label in labels], rotation=30, fontsize=7)
        ax.set_title("decode, %s" % ("pages of %d keys" % page if page else "contiguous K/V"))
        ax.set_ylabel("fraction of copy ceiling" if fraction else "TB/s of K/V read")
        ax.grid(True, axis="y", alpha=0.3)
        if ax.patches:
            ax.legend(fontsize=7)
    figure.tight_layout()
    return svg_of(figure)


# ------------------------------------------------------------------------------------ tables

def measure(row):
    """The row's figure of merit: TFLOP/s for training, TB/s of K/V read for decode."""
    return row["tbps"] if row["workload"] == "decode" else row["tflops"]


def describe(key):
    s = dict(zip(SHAPE_FIELDS, key))
    if s["workload"] == "decode":
        return "decode b%d x %d h%d/%d d%d%s" % (s["batch"], s["seqlen_k"], s["heads"], s["kv_heads"], s["head_dim"],
                                                " P%d" % s["page_block_size"] if s["page_block_size"] else "")
    return "%s d%d s%d%s b%d h%d" % ("fwd" if s["pass"] == "forward" else "bwd", s["head_dim"], s["seqlen_k"],
                                     " causal" if s["causal"] else "", s["batch"], s["heads"])


def ratio_table(series, baseline):
    """[(shape description, {series: value}, {series: baseline / series})] and geometric means."""
    by_series = {name: {shape_key(r): measure(r) for r in rows} for name, (_, rows) in series.items()}
    keys = sorted({k for values in by_series.values() for k in values}, key=lambda k: (k[0], k[1], k[7], k[8], k[4],
                                                                                        k[9], k[2]))
    table, logs = [], {name: [] for name in series}
    for key in keys:
        values = {name: by_series[name].get(key) for name in series}
        ratios = {}
        base = values.get(baseline)
        for name, value in values.items():
            if base and value:
                ratios[name] = base / value
                logs[name].append(math.log(ratios[name]))
        table.append((describe(key), values, ratios))
    geomean = {name: math.exp(sum(v) / len(v)) for name, v in logs.items() if v}
    return table, geomean


def default_baseline(series):
    """The first flashattn series measured in one process beside other providers (a file
    with several providers), else the first flashattn series, else the first series."""
    def beside_others(sweep):
        return len({r["provider"] for r in sweep["rows"]}) > 1
    for pick in (lambda n: n.startswith("flashattn@") and beside_others(series[n][0]),
                 lambda n: n.startswith("flashattn@"), lambda n: True):
        for name in series:
            if pick(name):
                return name


def device_rows(sweeps):
    rows = []
    for s in sweeps:
        d, c = s["device"], s["ceilings"]
        fmt = lambda v, unit: "%.4g %s" % (v, unit) if v else "not measured"  # noqa: E731
        rows.append([d["name"], d["backend"], d["arch"], d.get("runtime", ""), d.get("driver", ""),
                     "%s / %s MHz" % (d.get("clock_mhz", "?"), d.get("memory_clock_mhz", "?")),
                     "%s (%s)" % (fmt(c["copy_gbps"]["value"], "GB/s"), c["copy_gbps"]["source"]),
                     "%s (%s)" % (fmt(c["matrix_tflops"]["value"], "TFLOP/s"), c["matrix_tflops"]["source"]),
                     "%s, preset %s, %s" % (s["tool"], s["preset"], s["created_utc"])])
    return rows


TIMING_NOTE = ("Series from one file were measured in one process, on the same inputs, back to back. "
               "Series from different tools time differently (flashattn_bench: CUDA events around each "
               "call, caches warm; sweep_torch.py: triton's do_bench, L2 cleared between calls), so "
               "compare providers within one tool's series.")

DEVICE_HEADER = ["device", "backend", "arch", "runtime", "driver", "clocks (SM / memory)", "copy ceiling",
                 "matrix ceiling", "measured by"]


def markdown(sweeps, series, baseline, table, geomean):
    out = ["# flashattn benchmark report", "", "## Devices and ceilings (measured in each run)", "",
           "| " + " | ".join(DEVICE_HEADER) + " |", "|" + "---|" * len(DEVICE_HEADER)]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in device_rows(sweeps)]
    names = list(series)
    out += ["", "## Ratios: %s / each series (TFLOP/s; decode: TB/s)" % baseline, "", TIMING_NOTE, "",
            "Geometric mean over the shared shapes: " + ", ".join("%s %.2f" % (n, g) for n, g in geomean.items()
                                                                  if n != baseline), "",
            "| shape | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for what, values, ratios in table:
        cells = ["%.3g (%.2fx)" % (values[n], ratios[n]) if n in ratios else ("%.3g" % values[n] if values[n] else "-")
                 for n in names]
        out.append("| %s | %s |" % (what, " | ".join(cells)))
    return "\n".join(out) + "\n"


def page(sweeps, series, baseline, table, geomean, figures):
    esc = html.escape
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>flashattn benchmark report</title>",
             "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}"
             "td:first-child{text-align:left}figure{margin:1em 0}</style></head><body>",
             "<h1>flashattn benchmark report</h1>",
             "<p>%d sweep file(s), %d series. Rows are compared only where shapes and FLOP counts are identical.</p>"
             % (len(sweeps), len(series)), "<h2>Devices and ceilings (measured in each run)</h2><table><tr>",
             "".join("<th>%s</th>" % esc(h) for h in DEVICE_HEADER), "</tr>"]
    for r in device_rows(sweeps):
        parts.append("<tr>" + "".join("<td>%s</td>" % esc(str(c)) for c in r) + "</tr>")
    parts.append("</table>")
    for title, svg in figures:
        if svg:
            parts.append("<h2>%s</h2><figure class='plot'>%s</figure>" % (esc(title), svg))
    names = list(series)
    parts.append("<h2>Ratios: %s / each series</h2><p>%s</p><p>Geometric means: %s</p><table><tr><th>shape</th>%s</tr>" % (
        esc(baseline), esc(TIMING_NOTE), esc(", ".join("%s %.2f" % (n, g) for n, g in geomean.items() if n != baseline)),
        "".join("<th>%s</th>" % esc(n) for n in names)))
    for what, values, ratios in table:
        cells = "".join("<td>%s</td>" % ("%.3g (%.2fx)" % (values[n], ratios[n]) if n in ratios else
                                         ("%.3g" % values[n] if values[n] else "-")) for n in names)
        parts.append("<tr><td>%s</td>%s</tr>" % (esc(what), cells))
    parts.append("</table></body></html>")
    return "\n".join(parts)


def report(paths, html_path, md_path, baseline=None):
    import matplotlib
    matplotlib.use("svg")
    sweeps = load(paths)
    series = series_of(sweeps)
    check_comparable(series)
    baseline = baseline or default_baseline(series)
    if baseline not in series:
        raise ReportError("--baseline %s: no such series (%s)" % (baseline, ", ".join(series)))
    table, geomean = ratio_table(series, baseline)
    figures = [("Training forward: TFLOP/s", training_figure(series, "forward", False)),
               ("Training forward: fraction of the device's matrix ceiling", training_figure(series, "forward", True)),
               ("Training backward: TFLOP/s", training_figure(series, "backward", False)),
               ("Training backward: fraction of the device's matrix ceiling", training_figure(series, "backward", True)),
               ("Decode: TB/s of K/V read", decode_figure(series, False)),
               ("Decode: fraction of the device's copy ceiling", decode_figure(series, True))]
    if html_path:
        with open(html_path, "w") as f:
            f.write(page(sweeps, series, baseline, table, geomean, figures))
    if md_path:
        with open(md_path, "w") as f:
            f.write(markdown(sweeps, series, baseline, table, geomean))
    return series


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--html")
    ap.add_argument("--md")
    ap.add_argument("--baseline", help="the series the ratios divide by, as provider@device")
    ap.add_argument("--validate", action="store_true", help="only check the files against the schema")
    args = ap.parse_args()
    try:
        if args.validate:
            load(args.files)
            print("%d file(s) follow %s" % (len(args.files), os.path.basename(SCHEMA_PATH)))
            return 0
        series = report(args.files, args.html, args.md, args.baseline)
    except ReportError as err:
        print("report.py: %s" % err, file=sys.stderr)
        return 2
    print("report: %d series: %s" % (len(series), ", ".join(series)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
