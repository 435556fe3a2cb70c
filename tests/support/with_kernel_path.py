"""Runs `python -m unittest -v MODULE` under TERN_KERNELS=<path>, or reports SKIPPED.

CTest registers every end-to-end test marked "# tern-test: every-kernel-path"
once per kernel path (tests/CMakeLists.txt). A path this CPU lacks cannot run
(tern refuses TERN_KERNELS=avx512 without AVX-512), so the test is reported as
skipped (CTest's SKIP_REGULAR_EXPRESSION "^SKIPPED:"), not failed. The
requirements mirror src/tern/core/kernel_path.cpp.

    python3 with_kernel_path.py MODULE   (TERN_KERNELS set by CTest)
"""
import os
import sys

REQUIRES = {"portable": set(), "avx2": {"avx2", "fma", "f16c"},
            "avx512": {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"}}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])


def main():
    path = os.environ.get("TERN_KERNELS", "")
    if path not in REQUIRES:
        sys.exit(f"with_kernel_path.py: TERN_KERNELS={path!r} is not one of {', '.join(REQUIRES)}")
    missing = REQUIRES[path] - set(cpu_flags())
    if missing:
        print(f"SKIPPED: TERN_KERNELS={path} but this CPU lacks {' '.join(sorted(missing))}", flush=True)
        return 0
    os.execv(sys.executable, [sys.executable, "-m", "unittest", "-v", sys.argv[1]])


if __name__ == "__main__":
    sys.exit(main())
