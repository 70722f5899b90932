#!/usr/bin/env python3
"""Run every ctest test labelled `gpu` in a build directory, one process per test executable.

  python3 scripts/run_gpu_tests.py BUILD_DIR [--timeout SECONDS] [--log FILE] [--part K/N]

ctest runs each GoogleTest case as its own process, so a suite of hundreds of cases pays the
process and CUDA start-up hundreds of times, and the RNN suite recomputes its shared reference
results in every process. Here each GoogleTest executable runs once, with all of its `gpu` cases
(the filter ctest would use, joined), and reports per case through --gtest_output=xml; tests that
are not GoogleTest cases (e.g. torch_agreement) run through ctest by name.

Counting, per case: passed, or failed (failed, skipped, crashed before reporting, timed out, or
missing from the report). A skipped GPU test is a failure: it never counts as passed.
Prints the failed cases, then one line `passed N | failed M`; exit status 0 only when M == 0 and
N > 0.

--part K/N runs the K-th of N disjoint parts whose union is the whole suite, for runs that must
fit a time limit: every N-th GoogleTest case of each executable from its (K-1)-th, and every N-th
other test likewise; the summary line then ends with `| part K/N`."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import OrderedDict


def list_gpu_tests(build):
    out = subprocess.run(["ctest", "--test-dir", build, "-L", "gpu", "-N", "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["tests"]


def property_of(test, name, default=None):
    for p in test.get("properties", []):
        if p["name"] == name:
            return p["value"]
    return default


def gtest_case(test):
    """(executable, GoogleTest case) of a ctest test, or None if it is not a GoogleTest case.
    gtest_discover_tests writes the command in one of two forms:
      EXE --gtest_filter=CASE ...                               (CMake < 3.31 or so)
      cmake -D TEST_EXECUTABLE=EXE ... -D TEST_FILTER=CASE ... -P .../LaunchTest.cmake
    """
    command = test.get("command") or []
    for arg in command[1:]:
        if arg.startswith("--gtest_filter="):
            return command[0], arg[len("--gtest_filter="):]
    defines = {}
    for flag, value in zip(command, command[1:]):
        if flag == "-D" and "=" in value:
            key, _, val = value.partition("=")
            defines[key] = val
    if defines.get("TEST_EXECUTABLE") and defines.get("TEST_FILTER"):
        return defines["TEST_EXECUTABLE"], defines["TEST_FILTER"]
    return None


def run_executable(exe, cases, workdir, timeout, log):
    """Runs `exe` once on `cases` (gtest names); returns {case: passed?}."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.xml")
        cmd = [exe, "--gtest_filter=" + ":".join(cases), "--gtest_also_run_disabled_tests",
               "--gtest_output=xml:" + report]
        log.write(f"$ {exe} ({len(cases)} cases)\n")
        log.flush()
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout)
            log.write(f"exit status {proc.returncode} after {time.monotonic() - start:.1f} s\n")
        except subprocess.TimeoutExpired:
            log.write(f"timed out after {timeout} s\n")
        results = {}
        if os.path.exists(report):
            for tc in ET.parse(report).getroot().iter("testcase"):
                name = f"{tc.get('classname')}.{tc.get('name')}"
                failed = tc.find("failure") is not None or tc.find("error") is not None
                skipped = tc.get("result") == "skipped" or tc.find("skipped") is not None
                ran = tc.get("status", "run") == "run"
                results[name] = ran and not failed and not skipped
        return {c: results.get(c, False) for c in cases}


def run_ctest(build, name, timeout, log):
    log.write(f"$ ctest -R ^{name}$\n")
    log.flush()
    start = time.monotonic()
    proc = subprocess.run(["ctest", "--test-dir", build, "-R", f"^{name}$", "--timeout",
                           str(timeout), "--output-on-failure"], stdout=log,
                          stderr=subprocess.STDOUT)
    log.write(f"exit status {proc.returncode} after {time.monotonic() - start:.1f} s\n")
    return proc.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per executable")
    ap.add_argument("--log", default=None, help="the tests' output (default: stderr)")
    ap.add_argument("--part", default="1/1", help="K/N: the K-th of N parts (default 1/1)")
    a = ap.parse_args()
    try:
        k, n = (int(v) for v in a.part.split("/"))
    except ValueError:
        ap.error(f"--part expects K/N with integers 1 <= K <= N, got {a.part!r}")
    if not 1 <= k <= n:
        ap.error(f"--part expects K/N with integers 1 <= K <= N, got {a.part!r}")

    tests = list_gpu_tests(a.build)
    by_exe = OrderedDict()  # executable -> (workdir, [case names])
    others = []
    for t in tests:
        found = gtest_case(t)
        if found is None:
            others.append(t["name"])
            continue
        exe, case = found
        workdir = property_of(t, "WORKING_DIRECTORY", a.build)
        by_exe.setdefault(exe, (workdir, []))[1].append(case)

    log = open(a.log, "w") if a.log else sys.stderr
    log.write(f"{len(tests)} gpu tests: {sum(len(c) for _, c in by_exe.values())} GoogleTest cases "
              f"in {len(by_exe)} executables, {len(others)} others\n")
    if n > 1:
        by_exe = OrderedDict((exe, (workdir, cases[k - 1::n]))
                             for exe, (workdir, cases) in by_exe.items() if cases[k - 1::n])
        others = others[k - 1::n]
        log.write(f"part {k}/{n}: {sum(len(c) for _, c in by_exe.values())} GoogleTest cases, "
                  f"{len(others)} others\n")
    if tests:
        log.write("first test as ctest lists it: " + json.dumps(tests[0])[:600] + "\n")
    outcome = OrderedDict()
    for exe, (workdir, cases) in by_exe.items():
        outcome.update(run_executable(exe, cases, workdir, a.timeout, log))
    for name in others:
        outcome[name] = run_ctest(a.build, name, a.timeout, log)
    if a.log:
        log.close()

    failed = [n for n, ok in outcome.items() if not ok]
    for name in failed:
        print(f"FAILED {name}")
    passed = len(outcome) - len(failed)
    print(f"passed {passed} | failed {len(failed)}" + (f" | part {k}/{n}" if n > 1 else ""))
    return 0 if not failed and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
