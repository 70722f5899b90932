#!/usr/bin/env python3
"""Run every ctest test labelled `gpu` in a build directory, one process per test executable.

  python3 scripts/run_gpu_tests.py BUILD_DIR [--timeout SECONDS] [--log FILE]

ctest runs each GoogleTest case as its own process, so a suite of hundreds of cases pays the
process and CUDA start-up hundreds of times, and the RNN suite recomputes its shared reference
results in every process. Here each GoogleTest executable runs once, with all of its `gpu` cases
(the filter ctest would use, joined), and reports per case through --gtest_output=xml; tests that
are not GoogleTest cases (e.g. torch_agreement) run through ctest by name.

Counting, per case: passed, or failed (failed, skipped, crashed before reporting, timed out, or
missing from the report). A skipped GPU test is a failure: it never counts as passed.
Prints the failed cases, then one line `passed N | failed M`; exit status 0 only when M == 0 and
N > 0."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
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


_listed = {}


def listed_cases(exe):
    """The cases `exe --gtest_list_tests` names (empty if it is no GoogleTest executable)."""
    if exe not in _listed:
        cases = set()
        try:
            out = subprocess.run([exe, "--gtest_list_tests"], capture_output=True, text=True,
                                 timeout=120).stdout
            suite = None
            for line in out.splitlines():
                if not line.strip():
                    continue
                if not line.startswith(" "):
                    suite = line.split()[0]
                elif suite is not None:
                    cases.add(suite + line.split()[0])
        except (OSError, subprocess.SubprocessError):
            pass
        _listed[exe] = cases
    return _listed[exe]


def gtest_filter(test):
    """The GoogleTest case a ctest test runs, or None if it is not one. gtest_discover_tests
    passes it as --gtest_filter=CASE (older CMake), or in GTEST_FILTER, or only as the test's
    name (then the executable must list it)."""
    command = test.get("command") or []
    for i, arg in enumerate(command[1:], start=1):
        if arg.startswith("--gtest_filter="):
            return arg[len("--gtest_filter="):]
        if arg == "--gtest_filter" and i + 1 < len(command):
            return command[i + 1]
    env = property_of(test, "ENVIRONMENT", []) or []
    for kv in env if isinstance(env, list) else [env]:
        if kv.startswith("GTEST_FILTER="):
            return kv[len("GTEST_FILTER="):]
    case = test["name"].split()[0]
    if command and os.path.isfile(command[0]) and os.access(command[0], os.X_OK):
        if case in listed_cases(command[0]):
            return case
    return None


def find_executable(build, case):
    """A test executable under BUILD/tests that lists `case`, for tests whose command does not
    name one (None if none does)."""
    tests_dir = os.path.join(build, "tests")
    for entry in sorted(os.listdir(tests_dir)) if os.path.isdir(tests_dir) else []:
        exe = os.path.abspath(os.path.join(tests_dir, entry))
        if os.path.isfile(exe) and os.access(exe, os.X_OK) and case in listed_cases(exe):
            return exe
    return None


def run_executable(exe, cases, workdir, timeout, log):
    """Runs `exe` once on `cases` (gtest names); returns {case: passed?}."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.xml")
        cmd = [exe, "--gtest_filter=" + ":".join(cases), "--gtest_also_run_disabled_tests",
               "--gtest_output=xml:" + report]
        log.write(f"$ {exe} ({len(cases)} cases)\n")
        log.flush()
        try:
            proc = subprocess.run(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout)
            log.write(f"exit status {proc.returncode}\n")
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
    proc = subprocess.run(["ctest", "--test-dir", build, "-R", f"^{name}$", "--timeout",
                           str(timeout), "--output-on-failure"], stdout=log,
                          stderr=subprocess.STDOUT)
    return proc.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per executable")
    ap.add_argument("--log", default=None, help="the tests' output (default: stderr)")
    a = ap.parse_args()

    tests = list_gpu_tests(a.build)
    by_exe = OrderedDict()  # executable -> (workdir, [case names])
    others = []
    for t in tests:
        cmd = t.get("command") or []
        f = gtest_filter(t)
        exe = cmd[0] if cmd else None
        if f is None:
            exe = find_executable(a.build, t["name"].split()[0])
            f = t["name"].split()[0] if exe else None
        if f is None:
            others.append(t["name"])
            continue
        workdir = property_of(t, "WORKING_DIRECTORY", a.build)
        by_exe.setdefault(exe, (workdir, []))[1].append(f)

    log = open(a.log, "w") if a.log else sys.stderr
    log.write(f"{len(tests)} gpu tests: {sum(len(c) for _, c in by_exe.values())} GoogleTest cases "
              f"in {len(by_exe)} executables, {len(others)} others\n")
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
    for n in failed:
        print(f"FAILED {n}")
    passed = len(outcome) - len(failed)
    print(f"passed {passed} | failed {len(failed)}")
    return 0 if not failed and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
