"""The binding's struct mirrors against the C library (python/flashattn/_abi.py): the real
mirrors pass, a mirror of the wrong size or with fields out of place is refused with an
ImportError naming the struct, and, where torch is installed, the binding itself loads.
Needs no GPU and no torch: ctest runs it (python_binding_layouts) with FLASHATTN_LIBRARY
set; `python3 -m pytest tests/python` collects it too. Run alone:
    FLASHATTN_LIBRARY=build/libflashattn.so python3 tests/python/test_abi_layout.py"""
import ctypes
import glob
import importlib.util
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load_abi():
    """python/flashattn/_abi.py on its own: importing the package would import torch."""
    spec = importlib.util.spec_from_file_location(
        "flashattn_abi", os.path.join(ROOT, "python", "flashattn", "_abi.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def library_path():
    """FLASHATTN_LIBRARY, else the tree's build*/, else the copy an installed package bundles."""
    explicit = os.environ.get("FLASHATTN_LIBRARY")
    if explicit:
        return explicit
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "libflashattn.so")))
    installed = importlib.util.find_spec("flashattn")
    if installed is not None and installed.origin:
        found.append(os.path.join(os.path.dirname(installed.origin), "_lib", "libflashattn.so"))
    found = [path for path in found if os.path.exists(path)]
    assert found, "set FLASHATTN_LIBRARY, build libflashattn.so into build*/, or install the package"
    return found[0]


def fresh_library():
    """A CDLL object of its own, so restype/argtypes set by one check do not leak."""
    return ctypes.CDLL(library_path())


def refusal(abi, mirrors):
    """The ImportError check_layouts raises for these mirrors (None if it accepts them)."""
    try:
        abi.check_layouts(fresh_library(), mirrors)
    except ImportError as error:
        return str(error)
    return None


def test_library_sizes_match_ctypes_sizeof():
    abi = load_abi()
    lib = fresh_library()
    lib.fa_struct_size.restype = ctypes.c_size_t
    lib.fa_struct_size.argtypes = [ctypes.c_int]
    assert lib.fa_struct_size(abi.STRUCT_TENSOR) == ctypes.sizeof(abi.Tensor)
    assert lib.fa_struct_size(abi.STRUCT_PARAMS) == ctypes.sizeof(abi.Params)
    assert lib.fa_struct_size(abi.STRUCT_KVCACHE_PARAMS) == ctypes.sizeof(abi.KvcacheParams)
    assert lib.fa_struct_size(5) == 0  # FA_STRUCT_COUNT names no struct


def test_real_mirrors_are_accepted():
    abi = load_abi()
    assert refusal(abi, abi.MIRRORS) is None


def test_mirror_of_wrong_size_is_refused_naming_struct_and_sizes():
    abi = load_abi()

    class ShortParams(ctypes.Structure):  # fa_params without its reserved words
        _fields_ = [f for f in abi.Params._fields_ if f[0] != "reserved"]

    mirrors = (("fa_tensor", abi.STRUCT_TENSOR, abi.Tensor),
               ("fa_params", abi.STRUCT_PARAMS, ShortParams))
    message = refusal(abi, mirrors)
    assert message is not None
    assert "fa_params" in message
    assert str(ctypes.sizeof(abi.Params)) in message and str(ctypes.sizeof(ShortParams)) in message


def test_mirror_with_fields_out_of_place_is_refused():
    abi = load_abi()

    class SwappedTensor(ctypes.Structure):  # same size, dtype and ndim exchanged
        _fields_ = [("data", ctypes.c_void_p), ("ndim", ctypes.c_int), ("dtype", ctypes.c_int),
                    ("shape", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 4)]

    mirrors = (("fa_tensor", abi.STRUCT_TENSOR, SwappedTensor),
               ("fa_params", abi.STRUCT_PARAMS, abi.Params))
    message = refusal(abi, mirrors)
    assert message is not None and "fa_tensor" in message


def test_device_check_status_and_query_on_a_cpu_context():
    """FA_ERR_DEVICE_CHECK keeps its value (the binding reports statuses by number), and
    fa_device_error answers FA_OK on a CPU context, which checks its indices on the host."""
    lib = fresh_library()
    lib.fa_status_string.restype = ctypes.c_char_p
    assert lib.fa_status_string(18) == b"FA_ERR_DEVICE_CHECK"
    ctx = ctypes.c_void_p()
    assert lib.fa_create(ctypes.byref(ctx), 1, 0) == 0
    lib.fa_device_error.argtypes = [ctypes.c_void_p, ctypes.c_int]
    assert lib.fa_device_error(ctx, 1) == 0
    lib.fa_destroy.argtypes = [ctypes.c_void_p]
    lib.fa_destroy(ctx)


def skip(reason):
    """pytest's skip under pytest; run as a script, a note (the test then passes)."""
    if "pytest" in sys.modules:
        sys.modules["pytest"].skip(reason)
    print("skipped: " + reason)


def test_binding_loads_where_torch_is_installed():
    if importlib.util.find_spec("torch") is None:
        skip("torch is not installed")
        return
    os.environ.setdefault("FLASHATTN_LIBRARY", library_path())
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import flashattn
    lib = flashattn.library()  # checks the binding's own mirrors on the way
    assert lib.fa_struct_size(load_abi().STRUCT_PARAMS) == ctypes.sizeof(load_abi().Params)


if __name__ == "__main__":
    tests = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_")]
    for name, fn in tests:
        fn()
        print("passed: %s" % name)
    print("%d passed" % len(tests))
