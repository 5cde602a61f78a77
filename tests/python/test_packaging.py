"""Packaging: one version (python/kda_decode/_version.py) read by the package, pyproject.toml
and CMake; the build record (kda_decode.build_info) and its verdicts on toolkit / driver /
GPU mismatches; and CMake's choice of CUDA archs (cmake/KdaCudaArchs.cmake) with a stand-in
nvidia-smi: the GPUs here when none are named, older GPUs left out, the CPU backend when no
GPU can run the kernels or no nvcc is found, and a configure error naming both versions
when the toolkit is newer than the driver. The CMake cases need cmake (and nvcc for those
that detect GPUs); they skip without.
"""
from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest

import kda_decode as kd
import kda_decode.build_info as bi

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------------------------------
# one version
# ---------------------------------------------------------------------------------------
def test_version_written_once():
    src = _read("python/kda_decode/_version.py")
    m = re.search(r'^__version__ = "([^"]+)"$', src, re.M)
    assert m, "python/kda_decode/_version.py has no __version__ line"
    version = m.group(1)
    assert kd.__version__ == version
    py = _read("pyproject.toml")
    project = py.split("[project]", 1)[1].split("\n[", 1)[0]
    assert not re.search(r"^version\s*=", project, re.M), "pyproject.toml must not write the version itself"
    assert re.search(r'^dynamic\s*=\s*\[\s*"version"\s*\]', project, re.M)
    assert 'provider = "scikit_build_core.metadata.regex"' in py
    assert 'input = "python/kda_decode/_version.py"' in py
    cm = _read("CMakeLists.txt")
    assert "include(cmake/KdaVersion.cmake)" in cm and "VERSION ${KDA_VERSION_NUMERIC}" in cm
    assert not re.search(r"project\([^)]*VERSION\s+[0-9]", cm), "CMakeLists.txt must not write the version itself"


def test_installed_metadata_matches():
    try:
        meta = importlib.metadata.version("kda-decode")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("kda_decode is not installed with metadata (run from a build tree)")
    assert meta == kd.__version__


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_reads_the_same_version(tmp_path):
    script = tmp_path / "v.cmake"
    script.write_text(f'include("{ROOT}/cmake/KdaVersion.cmake")\nmessage("${{KDA_VERSION}}|${{KDA_VERSION_NUMERIC}}")\n')
    r = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    full, numeric = r.stderr.strip().split("|")
    assert full == kd.__version__ and kd.__version__.startswith(numeric)


# ---------------------------------------------------------------------------------------
# the build record and its verdicts
# ---------------------------------------------------------------------------------------
def test_build_record():
    info = bi.build_info()
    assert info["version"] == kd.__version__
    assert info["cuda_backend"] == kd.cuda_built()
    if not info["recorded"]:
        pytest.skip("no build record (a build made by CMake directly, not pip)")
    if info["cuda_backend"]:
        assert info["cuda_archs"] and info["cuda_toolkit"] and info["arch_source"]
        assert all(re.fullmatch(r"[0-9]+[af]?", a) for a in info["cuda_archs"])
    else:
        assert info["cuda_archs"] == [] and info["cpu_only_reason"]


def _info(**kw):
    base = dict(version="9.9.9", cuda_backend=True, cuda_archs=["90a"], cuda_toolkit="13.0",
                arch_source="detected: NVIDIA H200 (sm_90)", cpu_only_reason="", recorded=True)
    base.update(kw)
    return base


def test_cuda_problem_sentences(monkeypatch):
    cpu = bi.cuda_problem(info=_info(cuda_backend=False, cuda_archs=[], cuda_toolkit="",
                                     cpu_only_reason="KDA_CPU_ONLY was set"), driver=(13, 0))
    assert "without the CUDA backend" in cpu and "KDA_CPU_ONLY" in cpu
    old_driver = bi.cuda_problem(info=_info(), driver=(12, 4))
    assert "disagree" in old_driver and "13.0" in old_driver and "12.4" in old_driver
    pre_hopper = bi.cuda_problem((8, 6), info=_info(), driver=(13, 0))
    assert "sm_86" in pre_hopper and "sm_90" in pre_hopper
    other_arch = bi.cuda_problem((10, 0), info=_info(), driver=(13, 0))
    assert "sm_90a" in other_arch and "sm_100" in other_arch and "KDA_CUDA_ARCHS=100a" in other_arch
    assert bi.cuda_problem((10, 0), info=_info(cuda_archs=["90a", "100a"]), driver=(13, 0)) is None
    assert bi.cuda_problem((9, 0), info=_info(), driver=(13, 1)) is None
    assert bi.cuda_problem((9, 0), info=_info(cuda_toolkit="12.8"), driver=(12, 4)) is None  # minor-version compat
    assert bi.cuda_problem(None, info=_info(cuda_archs=None, cuda_toolkit=None, recorded=False), driver=(12, 0)) is None
    monkeypatch.setattr(bi, "driver_cuda_version", lambda: None)
    assert "no NVIDIA driver" in bi.cuda_problem(info=_info())
    monkeypatch.setattr(bi, "cuda_problem", lambda capability=None: "the reason")
    with pytest.raises(RuntimeError, match="^kda_decode: the reason$"):
        bi.check_cuda()


def test_build_info_cli():
    r = subprocess.run([sys.executable, "-m", "kda_decode.build_info"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"kda-decode {kd.__version__}") and "CUDA backend" in r.stdout


# ---------------------------------------------------------------------------------------
# CMake: which archs, or the CPU backend (configure only)
# ---------------------------------------------------------------------------------------
FAKE_SMI = """#!/bin/sh
if [ "$1" = "--query-gpu=compute_cap,name,driver_version" ]; then
  printf '%s\\n' "$FAKE_GPUS"
  exit 0
fi
printf '| NVIDIA-SMI %s   Driver Version: %s   CUDA Version: %s |\\n' "$FAKE_DRIVER" "$FAKE_DRIVER" "$FAKE_CUDA"
"""


def _nvcc():
    for c in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if c and os.path.exists(c):
            return c
    return None


def _nvcc_major():
    out = subprocess.run([_nvcc(), "--version"], capture_output=True, text=True).stdout
    return int(re.search(r"release ([0-9]+)\.", out).group(1))


def _configure(tmp_path, *, gpus=None, driver_cuda="99.0", env_extra=None, path_without_nvcc=False):
    """Runs CMake's configure step; returns (returncode, output, build record text or '')."""
    build = tmp_path / "build"
    env = {k: v for k, v in os.environ.items() if k not in ("KDA_CUDA_ARCHS", "KDA_CPU_ONLY")}
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    if gpus is not None:
        smi = fake / "nvidia-smi"
        smi.write_text(FAKE_SMI)
        smi.chmod(0o755)
        env.update(FAKE_GPUS="\n".join(gpus), FAKE_CUDA=driver_cuda, FAKE_DRIVER="999.1")
    path = env.get("PATH", "")
    if path_without_nvcc:  # every PATH folder holding an nvcc goes
        path = os.pathsep.join(p for p in path.split(os.pathsep) if not os.path.exists(os.path.join(p, "nvcc")))
        env.pop("CUDACXX", None)
    else:
        if _nvcc():
            env.setdefault("CUDACXX", _nvcc())
        if gpus is None:  # no GPU visible: hide any real nvidia-smi behind one that fails
            smi = fake / "nvidia-smi"
            smi.write_text("#!/bin/sh\nexit 9\n")
            smi.chmod(0o755)
    env["PATH"] = str(fake) + os.pathsep + path
    env.update(env_extra or {})
    r = subprocess.run(["cmake", "-S", ROOT, "-B", str(build), "-DKDA_BUILD_PYTHON=OFF", "-DKDA_BUILD_TESTS=OFF",
                        "-DKDA_BUILD_BENCHMARKS=OFF"], capture_output=True, text=True, env=env, timeout=600)
    rec = build / "kda_build_config.py"
    return r.returncode, r.stdout + r.stderr, rec.read_text() if rec.exists() else ""


needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
needs_nvcc = pytest.mark.skipif(shutil.which("cmake") is None or _nvcc() is None, reason="needs cmake and nvcc")


@needs_nvcc
def test_cmake_builds_for_the_gpus_here(tmp_path):
    rc, out, rec = _configure(tmp_path, gpus=["9.0, NVIDIA H200, 999.1", "8.6, NVIDIA RTX A6000, 999.1"])
    assert rc == 0, out
    assert "cuda_archs = [\"90a\", ]" in rec and "detected: NVIDIA H200 (sm_90)" in rec, rec
    assert "not building for NVIDIA RTX A6000 (sm_86)" in out
    assert "building the CUDA backend for sm_90a" in out


@needs_nvcc
def test_cmake_explicit_archs_win(tmp_path):
    rc, out, rec = _configure(tmp_path, gpus=["8.6, NVIDIA RTX A6000, 999.1"], env_extra={"KDA_CUDA_ARCHS": "90a"})
    assert rc == 0, out
    assert "cuda_archs = [\"90a\", ]" in rec and "KDA_CUDA_ARCHS=90a" in rec


@needs_nvcc
def test_cmake_default_archs_without_a_gpu(tmp_path):
    rc, out, rec = _configure(tmp_path)
    assert rc == 0, out
    assert "cuda_archs = [\"90a\"" in rec and "default (no GPU visible" in rec


@needs_nvcc
def test_cmake_old_gpus_only_build_the_cpu_backend(tmp_path):
    rc, out, rec = _configure(tmp_path, gpus=["8.0, NVIDIA A100-SXM4-80GB, 999.1"])
    assert rc == 0, out
    assert "cuda_backend = False" in rec and "sm_80" in rec and "older than sm_90" in rec


@needs_nvcc
def test_cmake_driver_older_than_the_toolkit_is_an_error(tmp_path):
    major = _nvcc_major()
    rc, out, _ = _configure(tmp_path, gpus=["9.0, NVIDIA H200, 999.1"], driver_cuda=f"{major - 1}.9")
    assert rc != 0
    text = " ".join(out.split())
    assert "the CUDA toolkit and the driver disagree" in text and f"supports CUDA up to {major - 1}.9" in text
    assert "KDA_CPU_ONLY=1" in text


@needs_cmake
def test_cmake_cpu_backend_without_nvcc_or_when_asked(tmp_path):
    if os.path.exists(os.path.join(os.path.dirname(shutil.which("cmake")), "nvcc")):
        pytest.skip("cmake and nvcc share a folder: nvcc cannot be hidden from PATH")
    rc, out, rec = _configure(tmp_path, path_without_nvcc=True)
    assert rc == 0, out
    assert "cuda_backend = False" in rec
    assert "no CUDA compiler (nvcc) was found" in rec, rec
    (tmp_path / "asked").mkdir()
    rc, out, rec = _configure(tmp_path / "asked", env_extra={"KDA_CPU_ONLY": "1"})
    assert rc == 0, out
    assert "cuda_backend = False" in rec and "KDA_CPU_ONLY" in rec
