"""What this installation was built for, and whether its CUDA backend can run here.

``pip install .`` builds the CUDA backend for the GPUs it sees (or ``KDA_CUDA_ARCHS``), the
CPU backend alone without nvcc or with ``KDA_CPU_ONLY=1``; the build records what it did::

    python -m kda_decode.build_info        # the record, the driver and GPUs here, and a verdict

    >>> import kda_decode.build_info as bi
    >>> bi.build_info()["cuda_archs"]       # e.g. ['90a']
    >>> bi.cuda_problem()                   # None, or why the CUDA backend cannot run here

The driver is asked through ``libcuda`` with ctypes, so none of this imports torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import sys
from typing import Any, List, Optional, Tuple

__all__ = ["build_info", "check_cuda", "cuda_problem", "driver_cuda_version", "gpus", "main"]

#: The oldest GPU the CUDA kernels run on (Hopper: TMA, clusters, mbarriers).
MIN_CAPABILITY = (9, 0)


def build_info() -> dict:
    """The build record of this installation.

    Returns:
        dict with ``version`` (str), ``cuda_backend`` (bool: the extension has the CUDA
        backend), ``cuda_archs`` (list of str, e.g. ``['90a']``; empty for a CPU build),
        ``cuda_toolkit`` (str, nvcc's ``major.minor``; empty for a CPU build),
        ``arch_source`` (str: ``'detected: NVIDIA H200 (sm_90)'``, ``'KDA_CUDA_ARCHS=90a'``
        or ``'default ...'``), ``cpu_only_reason`` (str; empty for a CUDA build) and
        ``recorded`` (bool: False for a build without a record, e.g. one made by CMake
        directly; then the arch fields are unknown: None).
    """
    from . import _version, cuda_built

    rec: Any
    try:  # written by CMake at build time (absent from a source tree that was never built)
        rec = importlib.import_module(f"{__package__}._build_config")
    except ImportError:
        rec = None
    info = dict(version=_version.__version__, cuda_backend=bool(cuda_built()), recorded=rec is not None)
    if rec is None:
        info.update(cuda_archs=None, cuda_toolkit=None, arch_source=None, cpu_only_reason=None)
    else:
        info.update(
            cuda_archs=list(rec.cuda_archs),
            cuda_toolkit=rec.cuda_toolkit,
            arch_source=rec.arch_source,
            cpu_only_reason=rec.cpu_only_reason,
        )
    return info


def _libcuda() -> Optional[ctypes.CDLL]:
    names = ["nvcuda.dll"] if sys.platform.startswith("win") else ["libcuda.so.1", "libcuda.so"]
    found = ctypes.util.find_library("cuda")
    if found:
        names.append(found)
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    return None


def driver_cuda_version() -> Optional[Tuple[int, int]]:
    """The newest CUDA version the installed NVIDIA driver supports, as (major, minor), or
    None where no driver library can be loaded (``cuDriverGetVersion``)."""
    lib = _libcuda()
    if lib is None:
        return None
    v = ctypes.c_int(0)
    try:
        if lib.cuDriverGetVersion(ctypes.byref(v)) != 0:
            return None
    except AttributeError:
        return None
    return v.value // 1000, (v.value % 1000) // 10


def gpus() -> List[Tuple[str, Tuple[int, int]]]:
    """The GPUs the driver shows this process (``CUDA_VISIBLE_DEVICES`` applies), as
    (name, (major, minor) compute capability); empty without a driver or a GPU."""
    lib = _libcuda()
    if lib is None:
        return []
    try:
        if lib.cuInit(0) != 0:
            return []
        n = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
            return []
        out = []
        for i in range(n.value):
            dev = ctypes.c_int(0)
            if lib.cuDeviceGet(ctypes.byref(dev), i) != 0:
                continue
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
            lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # ..._MINOR
            name = ctypes.create_string_buffer(256)
            lib.cuDeviceGetName(name, 256, dev)
            out.append((name.value.decode(errors="replace"), (major.value, minor.value)))
        return out
    except AttributeError:
        return []


def _arch_runs(built: List[str], capability: Tuple[int, int]) -> bool:
    """Does one of the built archs run on a GPU of this compute capability? An 'a' arch
    (sm_90a) runs only on its own capability; a plain one would also run on newer minors."""
    cc = capability[0] * 10 + capability[1]
    for a in built:
        num = int("".join(ch for ch in a if ch.isdigit()) or 0)
        if a.endswith("a") or a.endswith("f"):
            if num == cc:
                return True
        elif num // 10 == capability[0] and num <= cc:
            return True
    return False


def cuda_problem(
    capability: Optional[Tuple[int, int]] = None,
    *,
    driver: Optional[Tuple[int, int]] = None,
    info: Optional[dict] = None,
) -> Optional[str]:
    """Why the CUDA backend of this installation cannot run on this machine, or None.

    Args:
        capability: the compute capability (major, minor) of the GPU to run on (e.g. from
            ``torch.cuda.get_device_capability()``); None checks the build and the driver only.
        driver: the driver's CUDA version (default: :func:`driver_cuda_version`).
        info: a build record (default: :func:`build_info`); for tests.
    Returns:
        None, or one sentence naming what was found and what to do.
    """
    info = build_info() if info is None else info
    if not info["cuda_backend"]:
        why = info.get("cpu_only_reason") or "the build had no CUDA compiler or KDA_CPU_ONLY was set"
        return (
            f"kda_decode {info['version']} was built without the CUDA backend ({why}); reinstall with the "
            "CUDA toolkit's nvcc on PATH on a machine whose GPU it should build for"
        )
    drv = driver_cuda_version() if driver is None else driver
    if drv is None:
        return "no NVIDIA driver could be loaded (libcuda), so the CUDA backend cannot run here"
    tk = info.get("cuda_toolkit")
    if tk:
        tk_major = int(tk.split(".")[0])
        if drv[0] < tk_major:
            return (
                f"the CUDA toolkit and the driver disagree: kda_decode was built with CUDA {tk} (nvcc), but "
                f"the NVIDIA driver supports CUDA up to {drv[0]}.{drv[1]}; update the driver, or rebuild "
                f"with a CUDA {drv[0]}.x toolkit (CUDACXX=/path/to/nvcc pip install .)"
            )
    if capability is not None:
        cap = (int(capability[0]), int(capability[1]))
        sm = f"sm_{cap[0]}{cap[1]}"
        if cap < MIN_CAPABILITY:
            return (
                f"the GPU is {sm}; the CUDA kernels need sm_{MIN_CAPABILITY[0]}{MIN_CAPABILITY[1]} or newer "
                "(use CPU tensors for the CPU backend)"
            )
        built = info.get("cuda_archs")
        if built and not _arch_runs(built, cap):
            archs = ", ".join("sm_" + a for a in built)
            return (
                f"kda_decode was built for {archs}, which cannot run on this {sm} GPU; reinstall on this "
                f"machine (pip install . builds for the GPUs it sees) or with KDA_CUDA_ARCHS={cap[0]}{cap[1]}a"
            )
    return None


def check_cuda(capability: Optional[Tuple[int, int]] = None) -> None:
    """Raises ``RuntimeError`` with :func:`cuda_problem`'s sentence when there is one."""
    why = cuda_problem(capability)
    if why is not None:
        raise RuntimeError("kda_decode: " + why)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m kda_decode.build_info``: prints the record, the driver, the GPUs and a
    verdict; exit code 0 (also for a CPU build: it is a report)."""
    info = build_info()
    print(f"kda-decode {info['version']}")
    if info["cuda_backend"]:
        archs = ", ".join("sm_" + a for a in info["cuda_archs"]) if info["cuda_archs"] else "unknown archs"
        print(f"  CUDA backend: built for {archs} with CUDA {info['cuda_toolkit'] or '?'} ({info['arch_source']})")
    else:
        print(f"  CUDA backend: not built ({info['cpu_only_reason'] or 'no record'}); the CPU backend only")
    drv = driver_cuda_version()
    print(f"  NVIDIA driver: {'none found' if drv is None else f'supports CUDA {drv[0]}.{drv[1]}'}")
    found = gpus() if drv is not None else []
    for name, cap in found:
        why = cuda_problem(cap, driver=drv, info=info) if info["cuda_backend"] else None
        print(f"  GPU: {name} (sm_{cap[0]}{cap[1]}): {'ready' if why is None else why}")
    if info["cuda_backend"] and not found:
        why = cuda_problem(None, driver=drv, info=info)
        print(f"  no GPU visible{'' if why is None else ': ' + why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
