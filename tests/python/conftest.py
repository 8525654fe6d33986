"""pytest setup for the Python package's tests: which flashattn is tested, on which devices,
and a floor on the number of passed tests.

- FLASHATTN_TEST_INSTALLED=1 tests the installed package (pip install ./python); otherwise
  the source tree's python/ goes first on sys.path (it finds the tree's build*/ library).
- `device` fixture: cpu always, cuda when torch sees one (those cases skip otherwise).
- --min-passed N (or FLASHATTN_MIN_PASSED): the session fails when fewer than N tests
  passed, so a run where everything skipped, or nothing was collected, cannot pass
  quietly (pytest itself exits 0 when every test skips)."""
import os
import sys

import pytest

if os.environ.get("FLASHATTN_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def pytest_addoption(parser):
    parser.addoption("--min-passed", type=int, default=int(os.environ.get("FLASHATTN_MIN_PASSED", "0")),
                     help="fail the session when fewer tests than this pass")


_passed = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed:
        _passed.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    floor = session.config.getoption("--min-passed")
    if floor and len(_passed) < floor and exitstatus == 0:
        session.exitstatus = 1
        print("\nflashattn: only %d tests passed, fewer than --min-passed %d (skipped or not collected)"
              % (len(_passed), floor))


def pytest_report_header(config):
    try:
        import importlib.metadata
        import flashattn
        import torch
        try:
            transformers = importlib.metadata.version("transformers")
        except importlib.metadata.PackageNotFoundError:
            transformers = "absent"
        return "flashattn from %s, library %s; torch %s (custom ops: %s), CUDA: %s, transformers %s" % (
            os.path.dirname(flashattn.__file__), flashattn.library_path(), torch.__version__,
            flashattn.HAS_CUSTOM_OPS, torch.cuda.is_available(), transformers)
    except ImportError as e:
        return "flashattn: not importable (%s)" % e


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    import torch
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch.device(request.param)
