"""The vendor-comparison tools (issue 17): flashattn_bench --sweep writes JSON that follows
bench/sweep_schema.json and CSV with the same rows; bench/report.py renders the committed
sweeps of two devices into HTML and Markdown, refuses rows whose FLOP counts differ, and
the page loads in a headless Chromium without console errors with its plots drawn.

FLASHATTN_BENCH names the CLI (default: the newest build*/bench/flashattn_bench). Run:
    python3 -m pytest tests/bench"""
import csv
import glob
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import report  # noqa: E402

SAMPLES = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "sweep", "*.json")))


def bench_cli():
    explicit = os.environ.get("FLASHATTN_BENCH")
    found = [explicit] if explicit else sorted(glob.glob(os.path.join(ROOT, "build*", "bench", "flashattn_bench")),
                                               key=os.path.getmtime)[-1:]
    assert found and os.path.exists(found[0]), "set FLASHATTN_BENCH or build flashattn_bench into build*/"
    return found[0]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    run = subprocess.run([bench_cli(), "--backend", "cpu", "--sweep", "smoke", "--iters", "2", "--out-json",
                          str(out / "smoke.json"), "--out-csv", str(out / "smoke.csv")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return out, run.stderr


def test_sweep_json_follows_the_schema_and_csv_has_the_same_rows(smoke):
    out, progress = smoke
    sweep = report.load([str(out / "smoke.json")])[0]
    assert sweep["device"]["backend"] == "cpu" and sweep["ceilings"]["copy_gbps"]["value"] > 0
    assert all(r["status"] == "ok" for r in sweep["rows"])
    with open(out / "smoke.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(sweep["rows"])
    for line, row in zip(table, sweep["rows"]):
        assert int(line["seqlen_k"]) == row["seqlen_k"] and line["pass"] == row["pass"]
    # stderr is not a terminal here: one progress line per shape, then the summary.
    assert progress.count("sweep ") == len(sweep["rows"]) + 1


def test_list_gives_the_rows_the_sweep_counts(smoke):
    out, _ = smoke
    listing = json.loads(subprocess.run([bench_cli(), "--sweep", "smoke", "--list", "--dtype", "f32"],
                                        capture_output=True, text=True, check=True).stdout)
    rows = report.load([str(out / "smoke.json")])[0]["rows"]
    assert [(s["flops"], s["bytes"]) for s in listing["shapes"]] == [(r["flops"], r["bytes"]) for r in rows]


def test_a_wrong_preset_is_refused():
    run = subprocess.run([bench_cli(), "--sweep", "nosuch"], capture_output=True, text=True)
    assert run.returncode == 2 and "no such preset" in run.stderr


def test_report_refuses_rows_whose_flops_differ(smoke, tmp_path):
    out, _ = smoke
    sweep = json.load(open(out / "smoke.json"))
    sweep["device"]["name"] = "another device"
    sweep["rows"][0]["flops"] *= 1.5
    json.dump(sweep, open(tmp_path / "other.json", "w"))
    with pytest.raises(report.ReportError, match="refusing to compare"):
        report.report([str(out / "smoke.json"), str(tmp_path / "other.json")], None, None)


def test_report_refuses_a_file_off_the_schema(smoke, tmp_path):
    out, _ = smoke
    sweep = json.load(open(out / "smoke.json"))
    del sweep["ceilings"]
    json.dump(sweep, open(tmp_path / "bad.json", "w"))
    with pytest.raises(report.ReportError, match="does not follow"):
        report.load([str(tmp_path / "bad.json")])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    devices = {json.load(open(p))["device"]["name"] for p in SAMPLES}
    assert len(devices) >= 2, "bench/results/sweep/ should hold sweeps of two devices"
    out = tmp_path_factory.mktemp("report")
    series = report.report(SAMPLES, str(out / "report.html"), str(out / "report.md"))
    return out, series


def test_report_of_the_committed_samples(rendered):
    out, series = rendered
    text = open(out / "report.html").read()
    assert text.count("<svg") >= 4 and "<script" not in text
    md = open(out / "report.md").read()
    for name in series:
        assert name in md


def chromium(*args, timeout=120):
    """Headless Chromium (Debian's) on the command line: no driver, no local server, so it
    runs in a bare chroot; console messages go to stderr as CONSOLE lines."""
    return subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=1", "--window-size=1300,2400"] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def console_lines(run):
    return [line for line in run.stderr.splitlines() if "CONSOLE" in line]


def test_chromium_reports_console_errors(tmp_path):
    """The check below can fail: a page that logs an error is caught."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('broken page'); undefined_call();</script>"
                    "</body></html>")
    run = chromium("--dump-dom", "file://%s" % page)
    assert any("broken page" in line for line in console_lines(run)), run.stderr[-2000:]


def test_page_loads_in_headless_chromium_with_plots(rendered):
    import matplotlib.image
    out, _ = rendered
    page = "file://" + os.path.abspath(out / "report.html")
    dom = chromium("--dump-dom", page)
    assert dom.returncode == 0 and not console_lines(dom), console_lines(dom)
    assert dom.stdout.count("<svg") >= 4 and dom.stdout.count("<figure class=\"plot\">") >= 4
    shot = os.environ.get("FLASHATTN_REPORT_SCREENSHOT", str(out / "report.png"))
    run = chromium("--screenshot=%s" % shot, page)
    assert run.returncode == 0 and os.path.exists(shot)
    pixels = matplotlib.image.imread(shot)[..., :3]
    drawn = (pixels.min(axis=-1) < 0.9).mean()  # not white: text, axes, lines
    assert drawn > 0.02, "the screenshot is nearly blank (%.3f of pixels drawn)" % drawn
