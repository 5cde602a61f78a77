#!/usr/bin/env python3
"""Mutation check of the test suite: plants realistic bugs in the CPU backend, in the code both
backends share (request resolution, numerics) and in the host-side validation, one at a time,
and confirms that the suite fails on each.

    python3 tests/mutation.py                 # every mutation, C++ and Python suites
    python3 tests/mutation.py --list          # the mutations
    python3 tests/mutation.py --only rms-eps-fixed,conv-width-fixed --suite cpp

Run it when changing the tests (it is not part of CI). It works on a scratch copy of the
sources under build/mutation/ (the work tree is never modified): a CPU-only build
(KDA_CPU_ONLY) of the library, the GoogleTest suite and the Python extension. It first checks
that both suites pass on the unmodified copy, then for each mutation rewrites its file in the
copy (src/cpu/cpu_backend.cpp unless the mutation names another), rebuilds, runs the CPU C++
suite (kda_tests, all tests, failures counted) and the Python suite (pytest -x: the first failing
test), and restores the file. Every GPU variant is judged against the CPU backend, so a bug the
suite cannot see here hides the same bug in the kernels; a bug in what both backends share
(include/kda/request.h, include/kda/numerics.h) is invisible to that comparison and must be
caught by the float64 reference, the golden data or the error-flag tests. Exit status 1 when a
mutation is missed by both suites.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = "src/cpu/cpu_backend.cpp"
REQUEST, NUMERICS, VALIDATE = "include/kda/request.h", "include/kda/numerics.h", "src/validate/step.cpp"

# (name, what the bug is, [(original text, replacement)][, file]): each original must occur exactly
# once in the file (default TARGET).
MUTATIONS = [
    ("rms-eps-fixed", "the RMSNorm epsilon hard-coded to 1e-5 instead of the layer's eps",
     [("sqrtf(ss / float(K) + p.eps)", "sqrtf(ss / float(K) + 1e-5f)")]),
    ("conv-width-fixed", "the conv width hard-coded to W = 4 instead of the layer's W",
     [("const int q = p.q, W = p.W, H = p.H", "const int q = p.q, W = 4, H = p.H")]),
    ("l2-eps-outside-sqrt", "the l2-norm epsilon added outside the square root",
     [("iq = 1.0f / sqrtf(sq + kL2Eps), ik = 1.0f / sqrtf(sk + kL2Eps)",
       "iq = 1.0f / (sqrtf(sq) + kL2Eps), ik = 1.0f / (sqrtf(sk) + kL2Eps)")]),
    ("q-scale-missing", "q not scaled by 128^-0.5",
     [("qn[t * K + i] = yq[i] * iq * kQScale;", "qn[t * K + i] = yq[i] * iq;")]),
    ("decay-after-dot", "u computed from the state before the decay",
     [("Sv[i] *= e[i];\n          dot = fmaf(Sv[i], kt[i], dot);",
       "dot = fmaf(Sv[i], kt[i], dot);\n          Sv[i] *= e[i];")]),
    ("bf16-fused-not-continued", "a bf16-state fused step continues from the unrounded fold, not from what it stored",
     [("for (auto& s : S) s = round_bf16(s);", "(void)S;")]),
    ("fused-pending-kept", "a fused step does not zero pending",
     [("if (mode == StepMode::kFused) p.pending[r.row * p.pending_stride] = 0;", "")]),
    ("conv-bias-channel", "the conv bias indexed by the channel within its q/k/v block",
     [("float a = p.conv_b ? p.conv_b[c] : 0.f;", "float a = p.conv_b ? p.conv_b[cc] : 0.f;")]),
    ("beta-head-0", "every head takes the beta logit of head 0",
     [("p.beta[int64_t(b * q + t) * p.beta_row + h]", "p.beta[int64_t(b * q + t) * p.beta_row]")]),
    ("pad-token-null-written", "a per-token write skips negative ids only (writes the null slot)",
     [("if (!is_pad_id(dst, p.null_slot)) state_store(", "if (dst >= 0) state_store(")]),
    ("commit-one-short", "commit folds one record fewer than asked",
     [("c.row, h, c.count);", "c.row, h, c.count - 1);")]),
    ("append-full-not-written", "an append step on a full row folds it but does not write the state back",
     [("if (mode == StepMode::kFused || append_full) {", "if (mode == StepMode::kFused) {")]),
    ("append-pending-kept", "an append step does not advance pending",
     [("if (mode == StepMode::kAppend) p.pending[r.row * p.pending_stride] = pos0 + 1;",
       "if (mode == StepMode::kAppend) p.pending[r.row * p.pending_stride] = pos0;")]),
    ("append-fold-one-short", "an append step's running copy folds one pending record fewer",
     [("p.Qr, r.row, h, r.pending);", "p.Qr, r.row, h, mode == StepMode::kAppend ? r.pending - 1 : r.pending);")]),
    # the output norm (SPEC §3, §9)
    ("norm-weight-ignored", "the gated RMSNorm drops its weight",
     [("o[v] * rr * p.norm_w[v] * sigmoidf_(", "o[v] * rr * sigmoidf_(")]),
    ("out-gate-not-activated", "the output gate taken raw instead of through the sigmoid",
     [("* sigmoidf_(bf16_to_f32(og[v])));", "* bf16_to_f32(og[v]));")]),
    # what both backends share: the request's resolution and its error flags (SPEC §4)
    ("pending-qr-rejected", "pending = Qr flagged as an error (the contract allows pending <= Qr)",
     [("if (pend > p.Qr || pend < 0) f |= kPending;", "if (pend >= p.Qr || pend < 0) f |= kPending;")], REQUEST),
    ("accepted-window-short", "the largest valid accepted (window - W + 2) flagged as an error",
     [("acc <= p.window - p.W + 2", "acc <= p.window - p.W + 1")], REQUEST),
    ("out-slot-null-accepted", "out_slots equal to the null slot not flagged",
     [("os >= p.state_slots || os == p.null_slot) f |= kRowRange;", "os >= p.state_slots) f |= kRowRange;")],
     REQUEST),
    ("record-row-null-accepted", "a records row equal to the null slot not flagged (step)",
     [("p.record_rows_stride] : s0;\n      const bool row_ok = row >= 0 && row < p.record_rows_n && row != p.null_slot;",
       "p.record_rows_stride] : s0;\n      const bool row_ok = row >= 0 && row < p.record_rows_n;")], REQUEST),
    ("per-token-later-slot-unchecked", "a per-token slot id >= the pool after the start not flagged",
     [("if (!is_pad_id(id, p.null_slot) && id >= p.state_slots) f |= kSlotRange;", "(void)id;")], REQUEST),
    ("commit-count-unbounded", "a commit count above Qr not flagged",
     [("if (n < 0 || n > p.Qr) f |= kPending;", "if (n < 0) f |= kPending;")], REQUEST),
    # what both backends share: the gate's functions (SPEC §3)
    ("lower-bound-gate-without-a", "the lower-bound gate takes sigmoid(z) instead of sigmoid(exp(A_log) z)",
     [("lower_bound * sigmoidf_<APPROX>(a * z)", "lower_bound * sigmoidf_<APPROX>(z)")], NUMERICS),
    ("softplus-threshold-zero", "softplus(z) = z from z > 0 instead of from z > 20",
     [("return z > kSoftplusThreshold ? z : log1pf(expf(z));", "return z > 0.f ? z : log1pf(expf(z));")],
     NUMERICS),
    # host-side validation (shape and layout errors are exceptions, SPEC §4)
    ("window-need-one-short", "a conv window one column too short for q accepted",
     [("const int64_t need = layer.W - 2 + key.q;", "const int64_t need = layer.W - 3 + key.q;")], VALIDATE),
    ("out-rows-overlap", "an out row stride below D (overlapping rows) accepted",
     [("if (rows > 1 && out.strides[0] < D)", "if (rows > 1 && out.strides[0] < 1)")], VALIDATE),
    ("per-token-slots-short", "per-token slots with a column fewer than q accepted",
     [("expect_dim_at_least(sl, \"slots\", 1, a.q,", "expect_dim_at_least(sl, \"slots\", 1, a.q - 1,")], VALIDATE),
]


def log(msg):
    print(msg, flush=True)


def run(cmd, cwd=None, env=None, timeout=None):
    """(returncode, combined output); a timeout reads as returncode -9."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return -9, out + "\n<timeout>"


def copy_tree(dst):
    """The sources the build and the tests need, copied fresh (no build outputs)."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    # every top-level entry git tracks (a new folder, e.g. cmake/, must not be forgotten), else
    # the known list
    try:
        listed = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
        names = sorted({f.split("/", 1)[0] for f in listed.splitlines() if f and not f.startswith(".")})
    except (OSError, subprocess.CalledProcessError):
        names = ["CMakeLists.txt", "pyproject.toml", "cmake", "include", "src", "csrc", "python", "tests",
                 "examples", "benchmarks", "docs"]
    for name in names:
        s = os.path.join(ROOT, name)
        if os.path.isdir(s):
            # plain copies (fresh modification times): the build must not take an object compiled
            # from a mutant in an earlier run for the restored source
            shutil.copytree(s, os.path.join(dst, name), ignore=shutil.ignore_patterns("__pycache__", "*.so"),
                            copy_function=shutil.copy)
        elif os.path.exists(s):
            shutil.copy(s, os.path.join(dst, name))


def mutation_file(m):
    """The file a mutation rewrites."""
    return m[3] if len(m) > 3 else TARGET


class Scratch:
    def __init__(self, base, jobs):
        self.base, self.jobs = base, jobs
        self.tree = os.path.join(base, "tree")
        self.build = os.path.join(base, "build")
        self.pkg = os.path.join(base, "pkg")
        self.env = dict(os.environ, KDA_CPU_ONLY="1")

    def setup(self):
        copy_tree(self.tree)
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        rc, out = run(["cmake", "-S", self.tree, "-B", self.build, *gen, "-DKDA_CPU_ONLY=ON", "-DKDA_BUILD_TESTS=ON",
                       "-DKDA_BUILD_PYTHON=ON", "-DCMAKE_BUILD_TYPE=Release",
                       f"-DPython_EXECUTABLE={sys.executable}"], env=self.env)
        if rc:
            sys.exit("cmake failed:\n" + out[-3000:])
        self.pristine = {}
        for path in {mutation_file(m) for m in MUTATIONS}:
            with open(os.path.join(self.tree, path)) as f:
                self.pristine[path] = f.read()

    def write_target(self, path, text):
        with open(os.path.join(self.tree, path), "w") as f:
            f.write(text)

    def compile(self):
        """Builds the C++ suite and the extension; lays out the package for PYTHONPATH."""
        rc, out = run(["cmake", "--build", self.build, "-j", str(self.jobs), "--target", "kda_tests", "_core"],
                      env=self.env)
        if rc:
            return out
        if os.path.exists(self.pkg):
            shutil.rmtree(self.pkg)
        shutil.copytree(os.path.join(self.tree, "python", "kda_decode"), os.path.join(self.pkg, "kda_decode"))
        for f in os.listdir(self.build):
            if f.startswith("_core") and f.endswith(".so"):
                shutil.copy2(os.path.join(self.build, f), os.path.join(self.pkg, "kda_decode", f))
        return None

    def cpp(self, timeout):
        """(failed test count or a word, first failed test names)."""
        exe = os.path.join(self.build, "tests", "cpp", "kda_tests")
        t0 = time.time()
        rc, out = run([exe, "--gtest_brief=1"], env=self.env, timeout=timeout)
        dt = time.time() - t0
        failed = re.findall(r"^\[  FAILED  \] (\S+\.\S+)", out, re.M)
        failed = sorted(set(f for f in failed if not f.endswith(",")))
        if rc == -9:
            return "timeout", failed, dt
        if rc == 0:
            return 0, [], dt
        if not failed:
            return "crash", [], dt  # died before the summary (e.g. an out-of-bounds access)
        return len(failed), failed, dt

    def python(self, timeout):
        """(passed: bool, first failing test or '', seconds)."""
        env = dict(self.env, PYTHONPATH=self.pkg + os.pathsep + self.env.get("PYTHONPATH", ""))
        t0 = time.time()
        rc, out = run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "."],
                      cwd=os.path.join(self.tree, "tests", "python"), env=env, timeout=timeout)
        dt = time.time() - t0
        if rc == 0:
            return True, "", dt
        m = re.search(r"^FAILED (\S+)", out, re.M) or re.search(r"^ERROR (\S+)", out, re.M)
        first = m.group(1) if m else ("timeout" if rc == -9 else f"exit {rc}")
        return False, first, dt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated mutation names")
    ap.add_argument("--suite", choices=["cpp", "python", "both"], default="both")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")))
    ap.add_argument("--scratch", default=os.path.join(ROOT, "build", "mutation"))
    ap.add_argument("--timeout", type=float, default=900, help="seconds per suite run")
    a = ap.parse_args(argv)
    muts = MUTATIONS
    if a.list:
        for m in muts:
            print(f"{m[0]:30s} {mutation_file(m):26s} {m[1]}")
        return 0
    if a.only:
        want = a.only.split(",")
        unknown = set(want) - {m[0] for m in muts}
        if unknown:
            sys.exit(f"unknown mutations: {sorted(unknown)}")
        muts = [m for m in muts if m[0] in want]

    sc = Scratch(a.scratch, a.jobs)
    log(f"mutation: scratch copy in {sc.base}")
    sc.setup()
    for m in muts:
        for old, _new in m[2]:
            n = sc.pristine[mutation_file(m)].count(old)
            if n != 1:
                sys.exit(f"mutation {m[0]}: the text to replace occurs {n} times in {mutation_file(m)} (expected "
                         f"once): {old!r}")
    do_cpp, do_py = a.suite in ("cpp", "both"), a.suite in ("python", "both")

    t0 = time.time()
    err = sc.compile()
    if err:
        sys.exit("the unmodified copy does not build:\n" + err[-3000:])
    if do_cpp:
        n, failed, dt = sc.cpp(a.timeout)
        if n != 0:
            sys.exit(f"the C++ suite fails on the unmodified copy ({n}): {failed[:5]}")
        log(f"baseline: C++ suite passes ({dt:.0f} s)")
    if do_py:
        ok, first, dt = sc.python(a.timeout)
        if not ok:
            sys.exit(f"the Python suite fails on the unmodified copy: {first}")
        log(f"baseline: Python suite passes ({dt:.0f} s)")

    rows = []
    try:
        for m in muts:
            name, edits, path = m[0], m[2], mutation_file(m)
            text = sc.pristine[path]
            for old, new in edits:
                text = text.replace(old, new)
            sc.write_target(path, text)
            err = sc.compile()
            sc.write_target(path, sc.pristine[path])  # (rebuilt with the next mutant or at the end)
            if err:
                rows.append((name, "build failed", "-", False))
                log(f"{name}: the mutant does not build (fix the mutation):\n{err[-1500:]}")
                continue
            cpp_s, py_s, caught = "-", "-", False
            if do_cpp:
                n, failed, dt = sc.cpp(a.timeout)
                caught |= n != 0
                cpp_s = ("0 failed" if n == 0 else f"{n} failed" if isinstance(n, int) else n) + f" ({dt:.0f} s)"
                if failed:
                    cpp_s += ", e.g. " + ", ".join(failed[:2])
            if do_py:
                ok, first, dt = sc.python(a.timeout)
                caught |= not ok
                py_s = ("passed" if ok else f"failed at {first}") + f" ({dt:.0f} s)"
            rows.append((name, cpp_s, py_s, caught))
            log(f"{name}: {'CAUGHT' if caught else 'MISSED'} — C++: {cpp_s}; Python: {py_s}")
    finally:
        for path, text in sc.pristine.items():
            sc.write_target(path, text)

    log("")
    log(f"{'mutation':30s} {'result':7s} C++ suite (kda_tests) | Python suite (pytest -x)")
    for name, cpp_s, py_s, caught in rows:
        log(f"{name:30s} {'caught' if caught else 'MISSED':7s} {cpp_s} | {py_s}")
    missed = [r[0] for r in rows if not r[3]]
    log(f"mutation: {len(rows) - len(missed)} of {len(rows)} caught, {len(missed)} missed"
        f"{' (' + ', '.join(missed) + ')' if missed else ''}; {time.time() - t0:.0f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
