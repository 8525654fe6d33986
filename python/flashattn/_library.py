"""Finding and loading libflashattn: the places searched, in order, and the ctypes
signatures of the entry points the binding calls. Kept free of torch (the ABI check in
ctest loads the library without it).

Search order: FLASHATTN_LIBRARY (a path, used as given); the copy bundled into the
installed package (flashattn/_lib/, put there by `pip install ./python` from the library
it found at build time); the source tree's own builds (build*/libflashattn.so next to
python/, for a checkout used in place; the newest first); the system loader (ldconfig,
LD_LIBRARY_PATH, an installed prefix). The error names every place it looked."""
import ctypes
import ctypes.util
import glob
import os

from . import _abi
from ._abi import Params, Tensor, KvcacheParams

_HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(_HERE, "_lib", "libflashattn.so")


def newest_first(paths):
    """Build trees by the time their library was last built: the one just built wins."""
    return sorted(paths, key=os.path.getmtime, reverse=True)


def candidates():
    """(where, path) pairs in search order; a path may not exist."""
    found = []
    explicit = os.environ.get("FLASHATTN_LIBRARY")
    if explicit:
        found.append(("FLASHATTN_LIBRARY", explicit))
    found.append(("bundled with the package", BUNDLED))
    root = os.path.dirname(os.path.dirname(_HERE))
    for path in newest_first(glob.glob(os.path.join(root, "build*", "libflashattn.so"))):
        found.append(("source-tree build", path))
    system = ctypes.util.find_library("flashattn")
    if system:
        found.append(("system loader", system))
    return found


def _open():
    tried = []
    for where, path in candidates():
        explicit = where == "FLASHATTN_LIBRARY"
        if not explicit and os.path.isabs(path) and not os.path.exists(path):
            tried.append("%s: %s (absent)" % (where, path))
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            if explicit:  # the user's choice: never fall back past it silently
                raise ImportError("flashattn: FLASHATTN_LIBRARY=%s cannot be loaded: %s" % (path, e))
            tried.append("%s: %s (%s)" % (where, path, e))
    raise ImportError("flashattn: libflashattn.so not found. Build the C library (README: cmake "
                      "--build build) and reinstall the package, or set FLASHATTN_LIBRARY to its "
                      "path. Looked in:\n  " + "\n  ".join(tried or ["(nowhere: no candidate)"]))


def _declare(lib):
    c_void_p, size_t, c_int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    tensor, params, kv = ctypes.POINTER(Tensor), ctypes.POINTER(Params), ctypes.POINTER(KvcacheParams)
    size_out = ctypes.POINTER(ctypes.c_size_t)
    lib.fa_create.argtypes = [ctypes.POINTER(c_void_p), c_int, c_int]
    lib.fa_create_error.restype = ctypes.c_char_p
    lib.fa_last_error.restype = ctypes.c_char_p
    lib.fa_last_error.argtypes = [c_void_p]
    lib.fa_status_string.restype = ctypes.c_char_p
    lib.fa_set_stream.argtypes = [c_void_p, c_void_p]
    lib.fa_params_init.argtypes = [params]
    lib.fa_kvcache_params_init.argtypes = [kv]
    lib.fa_fwd_workspace_size.argtypes = [c_void_p] + [tensor] * 3 + [params, size_out]
    lib.fa_bwd_workspace_size.argtypes = [c_void_p] + [tensor] * 3 + [params, size_out]
    lib.fa_fwd.argtypes = [c_void_p] + [tensor] * 3 + [params, tensor, tensor, c_void_p, size_t]
    lib.fa_bwd.argtypes = [c_void_p] + [tensor] * 6 + [params] + [tensor] * 3 + [c_void_p, size_t]
    lib.fa_fwd_kvcache_workspace_size.argtypes = [c_void_p] + [tensor] * 5 + [kv, params, size_out]
    lib.fa_fwd_kvcache.argtypes = [c_void_p] + [tensor] * 5 + [kv, params, tensor, tensor, c_void_p, size_t]
    lib.fa_combine.argtypes = [c_void_p, c_int, tensor, tensor, tensor, tensor]
    lib.fa_device_error.argtypes = [c_void_p, c_int]


_lib = None


def library():
    """The loaded C library (ctypes.CDLL), loaded on first use. ImportError when it cannot
    be found or loaded, or when its structs differ from the binding's mirrors of them
    (python/flashattn/_abi.py)."""
    global _lib
    if _lib is None:
        lib = _open()
        _abi.check_layouts(lib)
        _declare(lib)
        _lib = lib
    return _lib


def path():
    """The file the loaded library came from (loads it first)."""
    return library()._name
