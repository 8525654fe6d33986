"""How the package finds libflashattn (python/flashattn/_library.py): the search order, the
user's FLASHATTN_LIBRARY never silently passed over, and an ImportError that names every
place looked in when nothing loads."""
import os
import subprocess
import sys

import pytest

from flashattn import _library


def test_search_order_puts_the_environment_then_the_bundled_copy_first(monkeypatch):
    monkeypatch.setenv("FLASHATTN_LIBRARY", "/somewhere/libflashattn.so")
    places = _library.candidates()
    assert places[0] == ("FLASHATTN_LIBRARY", "/somewhere/libflashattn.so")
    assert places[1] == ("bundled with the package", _library.BUNDLED)


def test_nothing_found_names_every_place(monkeypatch):
    absent = [("bundled with the package", "/nonexistent/a/libflashattn.so"),
              ("source-tree build", "/nonexistent/b/libflashattn.so")]
    monkeypatch.setattr(_library, "candidates", lambda: absent)
    with pytest.raises(ImportError) as err:
        _library._open()
    for _, path in absent:
        assert path + " (absent)" in str(err.value)
    assert "FLASHATTN_LIBRARY" in str(err.value)


def test_a_bad_flashattn_library_is_an_error_not_a_fallback():
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(_library.__file__)))
    env = dict(os.environ, FLASHATTN_LIBRARY="/nonexistent/libflashattn.so", PYTHONPATH=package_parent)
    code = "import flashattn\ntry:\n    flashattn.library()\nexcept ImportError as e:\n    print(e)\n"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "FLASHATTN_LIBRARY=/nonexistent/libflashattn.so cannot be loaded" in run.stdout, run.stderr
