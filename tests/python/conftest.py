"""pytest setup for the Python package's tests: which flashattn is tested, on which devices.

- FLASHATTN_TEST_INSTALLED=1 tests the installed package (pip install ./python); otherwise
  the source tree's python/ goes first on sys.path (it finds the tree's build*/ library).
- `device` fixture: cpu always, cuda when torch sees one (those cases skip otherwise).

The floor on passed tests (--min-passed) is the plugin tests/pytest_floor.py (-p pytest_floor
with tests/ on PYTHONPATH), shared with tests/bench."""
import os
import sys

import pytest

if os.environ.get("FLASHATTN_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


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
