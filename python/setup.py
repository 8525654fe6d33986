"""Builds the flashattn wheel with the C library inside it (flashattn/_lib/libflashattn.so),
so the installed package finds the library it was built with. The library is not compiled
here: it is taken from FLASHATTN_LIBRARY, else from the source tree's build
(../build*/libflashattn.so, the README's cmake build; the newest). With
neither, the build stops and says what to do; FLASHATTN_NO_BUNDLE=1 builds a package that
loads an installed libflashattn through the system loader instead. The version is the
CMake project's."""
import glob
import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(flashattn VERSION ([0-9.]+)", f.read()).group(1)


def library_to_bundle():
    explicit = os.environ.get("FLASHATTN_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            raise SystemExit("flashattn setup: FLASHATTN_LIBRARY=%s is not a file" % explicit)
        return explicit
    if os.environ.get("FLASHATTN_NO_BUNDLE") == "1":
        return None
    built = sorted(glob.glob(os.path.join(ROOT, "build*", "libflashattn.so")), key=os.path.getmtime)
    if built:
        return built[-1]
    raise SystemExit("flashattn setup: no libflashattn.so to bundle. Build the C library first "
                     "(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build), "
                     "or set FLASHATTN_LIBRARY=/path/to/libflashattn.so, or FLASHATTN_NO_BUNDLE=1 to load "
                     "an installed one through the system loader")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        source = library_to_bundle()
        if source is None:
            return
        target = os.path.join(self.build_lib, "flashattn", "_lib")
        os.makedirs(target, exist_ok=True)
        # realpath: the build tree's libflashattn.so may be a link to a versioned name.
        shutil.copyfile(os.path.realpath(source), os.path.join(target, "libflashattn.so"))
        print("flashattn setup: bundled %s" % source)


class BinaryDistribution(Distribution):
    """The wheel carries a shared library: tag it for this platform, not as pure Python."""

    def has_ext_modules(self):
        return True


setup(version=project_version(), cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
