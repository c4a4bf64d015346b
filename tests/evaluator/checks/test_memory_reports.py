"""Reading the memory checkers' reports (``evaluator/checks/memory_reports.py``):
compute-sanitizer's memcheck log and AddressSanitizer's report files, as text written here in
the shape the tools write them (the memcheck log as CUDA 12/13's compute-sanitizer writes it;
the ASan report as gcc 12's libasan wrote it for the m4 fixture, its Python frames shortened).

What it does not check: running either checker (tests/adversarial for ASan, tests/gpu for
memcheck).
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.evaluator.checks.memory_reports import (
    MAX_FINDINGS,
    parse_asan,
    parse_memcheck,
    read_reports,
)


def memcheck_record(kind: str, thread: int, address: int, after: int) -> str:
    return f"""\
========= {kind}
=========     at relu_peek(const float *, float *, long)+0x70 in /tmp/ca/builds/ext/0f3a/cuda.cu:14
=========     by thread ({thread},0,0) in block (3,0,0)
=========     Address 0x{address:x} is out of bounds
=========     and is {after} bytes after the nearest allocation at 0x7f3a2c000000 of size \
65536 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f1f2f] in libcuda.so.1
=========         Host Frame: [0x15803] in /usr/local/cuda/lib64/libcudart.so.12
=========         Host Frame: relu_peek_launch(at::Tensor) [0x9b21] in /tmp/ca/builds/ext/0f3a/m.so
=========
"""


MEMCHECK_LOG = (
    "========= COMPUTE-SANITIZER\n"
    + memcheck_record("Invalid __global__ read of size 4 bytes", 255, 0x7F3A2C010000, 0)
    + memcheck_record("Invalid __global__ read of size 4 bytes", 254, 0x7F3A2C010004, 4)
    + memcheck_record("Invalid __global__ write of size 4 bytes", 253, 0x7F3A2C010008, 8)
    + "========= Target application returned an error\n"
    + "========= ERROR SUMMARY: 3 errors\n"
)


def test_memcheck_counts_and_findings() -> None:
    errors, findings = parse_memcheck(MEMCHECK_LOG)
    assert errors == 3
    assert len(findings) == 3
    first = findings[0]
    assert first.startswith(
        "Invalid __global__ read of size 4 bytes "
        "at relu_peek(const float *, float *, long)+0x70 in cuda.cu:14 "
        "Address 0x7f3a2c010000 is out of bounds "
        "and is 0 bytes after the nearest allocation"
    )
    assert findings[2].startswith("Invalid __global__ write of size 4 bytes")
    for finding in findings:
        assert "\n" not in finding and len(finding) <= 300
        assert "/tmp/ca" not in finding  # paths cut to their last part
        assert "by thread" not in finding and "Host Frame" not in finding
        assert "COMPUTE-SANITIZER" not in finding and "ERROR SUMMARY" not in finding


def test_memcheck_repeated_findings_are_given_once_and_few() -> None:
    same = memcheck_record("Invalid __global__ read of size 4 bytes", 1, 0x7F3A2C010000, 0)
    others = "".join(
        memcheck_record("Invalid __shared__ read of size 4 bytes", k, 0x100 + 4 * k, 4 * k)
        for k in range(5)
    )
    log = "========= COMPUTE-SANITIZER\n" + same + same + others
    log += "========= ERROR SUMMARY: 1,207 errors\n"  # more than --print-limit printed
    errors, findings = parse_memcheck(log)
    assert errors == 1207
    assert len(findings) == MAX_FINDINGS
    assert len(set(findings)) == MAX_FINDINGS
    assert findings[0].startswith("Invalid __global__ read")
    assert findings[1].startswith("Invalid __shared__ read")


def test_memcheck_without_a_summary_counts_its_records() -> None:
    log = MEMCHECK_LOG.replace("========= ERROR SUMMARY: 3 errors\n", "")
    errors, findings = parse_memcheck(log)
    assert errors == 3 and len(findings) == 3


def test_a_clean_memcheck_log_has_no_errors() -> None:
    log = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    assert parse_memcheck(log) == (0, [])
    assert parse_memcheck("") == (0, [])


PYTHON_FRAMES = "".join(
    f"    #{k} 0x7f9311afe1{k:02d} in _PyEval_EvalFrameDefault Python/ceval.c:5376\n"
    for k in range(3, 9)
)

ASAN_REPORT = f"""\
=================================================================
==10724==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6310003fc7fc at pc \
0x7f92f0d854bc bp 0x7ffd87db82c0 sp 0x7ffd87db82b8
READ of size 4 at 0x6310003fc7fc thread T0
    #0 0x7f92f0d854bb in relu_peek_back(at::Tensor) \
(/root/.cache/cuda-agent/builds/ext/7c7e8055f60d/adv_relu_peek_back.so+0x154bb)
    #1 0x7f92f0ded1cd in pybind11::cpp_function::dispatcher(_object*, _object* const*, \
unsigned long, _object*) (/root/.cache/cuda-agent/builds/ext/7c7e8055f60d/adv.so+0x68a9d)
    #2 0x7f9311ba7331 in cfunction_vectorcall_FASTCALL_KEYWORDS Objects/methodobject.c:443
{PYTHON_FRAMES}
0x6310003fc7fc is located 4 bytes to the left of 65536-byte region \
[0x6310003fc800,0x63100040c800)
allocated by thread T0 here:
    #0 0x7f93120b7ffd in __interceptor_posix_memalign \
../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:145
    #1 0x7f930fb5df7e in c10::alloc_cpu(unsigned long) \
(/work/.venv/lib/python3.11/site-packages/torch/lib/libc10.so+0x91f7e)

SUMMARY: AddressSanitizer: heap-buffer-overflow \
(/root/.cache/cuda-agent/builds/ext/7c7e8055f60d/adv_relu_peek_back.so+0x154bb) in \
relu_peek_back(at::Tensor)
Shadow bytes around the buggy address:
  0x0c62800778f0: fa fa fa fa fa fa fa fa fa fa fa fa fa fa fa[fa]
  0x0c6280077900: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
==10724==ABORTING
"""


def test_asan_counts_and_findings() -> None:
    errors, findings = parse_asan(ASAN_REPORT)
    assert errors == 1  # the SUMMARY line names the kind again: not a second error
    assert len(findings) == 1
    finding = findings[0]
    assert finding.startswith(
        "heap-buffer-overflow READ of size 4 in relu_peek_back(at::Tensor) "
        "(adv_relu_peek_back.so+0x154bb)"
    )
    assert "\n" not in finding and len(finding) <= 300
    assert "/root/.cache" not in finding  # paths cut to their last part
    assert "#1" not in finding and "pybind11" not in finding  # only the innermost frame


def test_asan_finding_says_where_the_access_lies_after_a_long_stack() -> None:
    """A real report's stack (46 frames through Python for the m4 fixture) puts the 'is
    located' line far below the ERROR line: the whole report is read."""
    deep = ASAN_REPORT.replace(PYTHON_FRAMES, PYTHON_FRAMES * 6)
    (finding,) = parse_asan(deep)[1]
    assert "located 4 bytes to the left of 65536-byte region" in finding


def test_asan_finding_with_a_short_stack_says_where_the_access_lies() -> None:
    short = ASAN_REPORT.replace(PYTHON_FRAMES, "")
    (finding,) = parse_asan(short)[1]
    assert "located 4 bytes to the left of 65536-byte region" in finding


def test_asan_reports_of_several_processes_are_counted_together() -> None:
    write = ASAN_REPORT.replace("READ of size 4", "WRITE of size 8").replace("==10724==", "==9==")
    errors, findings = parse_asan(ASAN_REPORT + "\n" + write + "\n" + ASAN_REPORT)
    assert errors == 3
    assert len(findings) == 2  # the repeated one once
    assert "READ of size 4" in findings[0] and "WRITE of size 8" in findings[1]


def test_asan_use_after_free_kind() -> None:
    text = (
        "==77==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010 at pc "
        "0x1 bp 0x2 sp 0x3\n"
        "WRITE of size 4 at 0x602000000010 thread T0\n"
        "    #0 0x55 in scale(at::Tensor) /tmp/ca/builds/ext/1/main.cpp:12\n"
    )
    assert parse_asan(text) == (
        1,
        ["heap-use-after-free WRITE of size 4 in scale(at::Tensor) main.cpp:12"],
    )


def test_no_asan_report_has_no_errors() -> None:
    assert parse_asan("") == (0, [])
    assert parse_asan("some stderr line\nSUMMARY: nothing\n") == (0, [])


def test_read_reports_memcheck_log(tmp_path: Path) -> None:
    log = tmp_path / "memcheck.log"
    assert read_reports(log, "cuda") == ""  # the checker never wrote it
    log.write_text(MEMCHECK_LOG)
    assert read_reports(log, "cuda") == MEMCHECK_LOG


def test_read_reports_every_asan_file_of_the_worker(tmp_path: Path) -> None:
    log = tmp_path / "asan"  # ASan's log_path: it writes asan.<pid>, one per process
    assert read_reports(log, "cpu") == ""
    (tmp_path / "asan.200").write_text("second\n")
    (tmp_path / "asan.100").write_text("first\n")
    (tmp_path / "memcheck.log").write_text("not ASan's\n")
    assert read_reports(log, "cpu") == "first\n\nsecond\n"
    errors, _ = parse_asan(read_reports(log, "cpu"))
    assert errors == 0
