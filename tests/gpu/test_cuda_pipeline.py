"""The cuda backend end to end (run on a GPU host: ``pytest -m gpu``).

The fixtures are workdirs sharing one pure-CUDA kernel file (compiled once, no torch headers)
with a small binding each, so the suite spends its time evaluating, not compiling.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.examples import example_solutions
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

KERNELS_CU = r"""
#include <cuda_runtime.h>

__global__ void relu_k(const float* x, float* y, long n) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void bad_k(float* y) { y[threadIdx.x + (1L << 40)] = 1.f; }

extern "C" void relu_launch(const float* x, float* y, long n, cudaStream_t s) {
  relu_k<<<1024, 256, 0, s>>>(x, y, n);
}

// Exploit B1: the work goes to a fresh non-blocking stream that is never joined.
extern "C" void relu_escape(const float* x, float* y, long n, cudaStream_t) {
  cudaStream_t side;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  for (int r = 0; r < 20; ++r) relu_k<<<1024, 256, 0, side>>>(x, y, n);
}

// Honest use of a second stream: it waits for the launch stream and is joined back.
extern "C" void relu_joined(const float* x, float* y, long n, cudaStream_t main) {
  static cudaStream_t side = nullptr;
  static cudaEvent_t ready, done;
  if (!side) {
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  }
  cudaEventRecord(ready, main);
  cudaStreamWaitEvent(side, ready, 0);
  relu_k<<<1024, 256, 0, side>>>(x, y, n);
  cudaEventRecord(done, side);
  cudaStreamWaitEvent(main, done, 0);
}

extern "C" void out_of_bounds(const float*, float* y, long, cudaStream_t s) {
  bad_k<<<1, 32, 0, s>>>(y);
}
"""

BINDING = r"""
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include "binding_registry.h"

extern "C" void %(launcher)s(const float* x, float* y, long n, cudaStream_t s);

static torch::Tensor run(torch::Tensor x) {
  %(body)s
}

static void bind(pybind11::module_& m) { m.def("run", &run); }
REGISTER_BINDING(run, bind);
"""

CALL_LAUNCHER = """auto y = torch::empty_like(x);
  %s(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
     c10::cuda::getCurrentCUDAStream().stream());
  return y;"""

MODEL_NEW = """import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        %s
"""


def workdir(
    tmp_path: Path,
    launcher: str,
    body: str | None = None,
    forward: str = "return cuda_extension.run(x)",
) -> Path:
    root = tmp_path / launcher
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "ops.cu").write_text(KERNELS_CU)
    (root / "kernels" / "ops_binding.cpp").write_text(
        BINDING % {"launcher": launcher, "body": body or CALL_LAUNCHER % launcher}
    )
    (root / "model_new.py").write_text(MODEL_NEW % forward)
    return root


def run(solution: Path, problem: str = "relu", size: str = "small", **options: object):
    opts = fast_options(backend="cuda", **options)
    return evaluate(resolve_problem(problem, size), load_solution(solution), opts)


@pytest.mark.parametrize(("problem_id", "path"), example_solutions("cuda"))
def test_examples_are_correct_and_run_their_own_kernels(problem_id: str, path: Path) -> None:
    result = run(path, problem_id, size="standard")
    assert result.correct, result.error
    assert result.flags == []
    kernels = result.record.kernels
    assert kernels["custom_kernels"] >= 1 and kernels["coverage"] > 0.5, kernels
    assert result.record.device["capability"] == "9.0"
    assert result.record.timing["profiler_busy_us"] <= result.runtime_us * 1.15 + 20


def test_workdir_relu_is_correct(tmp_path: Path) -> None:
    result = run(workdir(tmp_path, "relu_launch"), size="standard")
    assert result.correct, result.error
    assert result.flags == []


def test_work_on_another_stream_is_rejected(tmp_path: Path) -> None:
    result = run(workdir(tmp_path, "relu_escape"), size="standard")
    assert result.reward == -1.0
    assert "work_outside_timed_stream" in result.flags, (result.flags, result.error)


def test_joined_side_stream_is_timed_honestly(tmp_path: Path) -> None:
    result = run(workdir(tmp_path, "relu_joined"), size="standard")
    assert result.correct, result.error
    assert result.flags == []


def test_illegal_memory_access_costs_one_evaluation(tmp_path: Path) -> None:
    result = run(workdir(tmp_path, "out_of_bounds"))
    assert result.reward == -1.0 and result.error is not None
    assert "illegal memory access" in result.error.message or "crashed" in result.flags
    assert run(workdir(tmp_path / "again", "relu_launch")).correct


def test_gpu_out_of_memory_is_a_verdict(tmp_path: Path) -> None:
    path = tmp_path / "oom.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.empty(1 << 46, device=x.device)\n"
    )
    result = run(path, policy="off")
    assert result.reward == -1.0 and result.error is not None
    assert "out of memory" in result.error.message.lower()


def test_enabling_tf32_is_a_violation(tmp_path: Path) -> None:
    forward = "torch.backends.cuda.matmul.allow_tf32 = True\n        return cuda_extension.run(x)"
    result = run(workdir(tmp_path, "relu_launch", forward=forward))
    assert "global_state_changed:cuda_matmul_tf32" in result.flags
    assert result.reward == -1.0


def test_torch_op_called_from_cpp_is_seen_by_the_dispatcher(tmp_path: Path) -> None:
    result = run(workdir(tmp_path, "relu_launch", body="return at::relu(x);"))
    assert "forbidden_op:relu" in result.flags


def test_profile_stage_tables() -> None:
    (relu_example,) = [p for pid, p in example_solutions("cuda") if pid == "relu"]
    result = run(relu_example, size="standard", baselines=("eager", "compile"), profile=True)
    assert result.correct, result.error
    profile = result.shown_details()["profile"]
    assert any(row["custom"] for row in profile["candidate"]["table"])
    assert profile["eager"]["table"] and not any(r["custom"] for r in profile["eager"]["table"])
    assert profile["compile"]["table"]
    assert "kernels" in profile["ncu"] or "error" in profile["ncu"]
    print("ncu:", profile["ncu"])
    assert result.compile_us is not None and result.speedup_compile is not None


PERSIST_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A matrix-vector product over a 40 MB table: memory bound, and the table fits in L2."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(10240, 1024))

    def forward(self, x):
        return torch.mv(self.table, x)


def get_inputs():
    return [torch.randn(1024)]


def get_init_inputs():
    return []
'''

# Exploit B5: pin the table in L2 with a persisting access-policy window (set again on every
# call, since a harness may reset the carve-out), so that a flush that only writes over the
# cache leaves the table resident and every timed call after the first reads it from L2.
PERSIST_CANDIDATE = '''import ctypes

import torch
import torch.nn as nn

for _name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
    try:
        _rt = ctypes.CDLL(_name)
        break
    except OSError:
        _rt = None


class _Window(ctypes.Structure):  # cudaStreamAttrValue.accessPolicyWindow (a 64-byte union)
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hit_ratio", ctypes.c_float), ("hit_prop", ctypes.c_int),
                ("miss_prop", ctypes.c_int), ("pad", ctypes.c_char * 36)]


def pin(tensor):
    """Returns the CUDA error codes of the three calls (0 = accepted)."""
    device = ctypes.c_int(torch.cuda.current_device())
    most = ctypes.c_int(0)
    _rt.cudaDeviceGetAttribute(ctypes.byref(most), 108, device)  # MaxPersistingL2CacheSize
    nbytes = tensor.numel() * tensor.element_size()
    a = _rt.cudaDeviceSetLimit(6, ctypes.c_size_t(most.value))  # cudaLimitPersistingL2CacheSize
    window = _Window(tensor.data_ptr(), nbytes, min(1.0, most.value / nbytes), 2, 1)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    b = _rt.cudaStreamSetAttribute(stream, 1, ctypes.byref(window))  # AccessPolicyWindow
    return a, b, most.value


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(10240, 1024))

    def forward(self, x):
        pin(self.table)
        return torch.mv(self.table, x)
'''


def _control_without_reset(tmp_path: Path) -> tuple[float, float, tuple[int, int, int]]:
    """What the trick buys against a flush that only overwrites L2 (no persisting reset):
    median CUDA-event times of the pinned call after such a flush, and after a full one."""
    import importlib.util
    import statistics

    import torch

    from cuda_agent.evaluator.worker.device import CudaDevice

    spec = importlib.util.spec_from_file_location("persist_candidate", tmp_path / "cand.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew().cuda()
    x = torch.randn(1024, device="cuda")
    codes = module.pin(model.table)
    device = CudaDevice()
    plain = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, device="cuda")

    def median(flush) -> float:
        samples = []
        for _ in range(50):
            flush()
            torch.cuda.synchronize()
            samples.append(device.time_call(lambda: model(x))[0])
        return statistics.median(samples)

    overwrite_only = median(lambda: plain.fill_(1.0))
    ours = median(device.flush_cache)
    return overwrite_only, ours, codes


def test_persisting_l2_window_earns_nothing(tmp_path: Path) -> None:
    """B5: the harness resets persisting lines and the carve-out before its flush, so the
    pinned table is read from memory on every timed call: scored honestly, at its true time
    (the pinning calls included), never faster than the reference."""
    problem = tmp_path / "persist_problem.py"
    problem.write_text(PERSIST_PROBLEM)
    candidate = tmp_path / "cand.py"
    candidate.write_text(PERSIST_CANDIDATE)
    overwrite_only, full_flush, codes = _control_without_reset(tmp_path)
    print(
        f"B5 control: pinned call after an overwrite-only flush {overwrite_only:.2f} us, "
        f"after our flush {full_flush:.2f} us (cuda codes {codes})"
    )
    assert codes[:2] == (0, 0) and codes[2] > 0, "the window was not accepted: no exploit to test"
    result = run(candidate, str(problem), size="standard", policy="off")
    assert result.correct, result.error
    speedup = result.speedup_eager
    print(f"B5 verdict: speed-up {speedup:.3f} (candidate {result.runtime_us:.2f} us)")
    # No gain: on the H200 (2026-11-29) the control read 55 us after an overwrite-only flush
    # against 82 us after ours, and the verdict was 0.44x (the pinning calls are timed too).
    assert speedup is not None and speedup <= 1.05


def test_cudnn_benchmark_threads_are_not_the_candidates(tmp_path: Path) -> None:
    """A policy that allows ``cudnn.benchmark`` must not flag a solution that sets it as
    ``threads_started`` (CUDA-L1's were, on the H200: cores - 1 threads, started when the
    harness set every switch back, ``torch.set_num_threads`` included; see
    tests/evaluator/test_host_thread_pool.py), while a thread the candidate starts still is."""
    model_new = (
        "import threading, time\nimport torch\nimport torch.nn as nn\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, in_channels, out_channels, kernel_size):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size,\n"
        "                              padding=kernel_size // 2)\n"
        "        self.pool = nn.MaxPool2d(2)\n\n"
        "    def forward(self, x):\n"
        "        torch.backends.cudnn.benchmark = True\n"
        "%s"
        "        return self.pool(torch.relu(self.conv(x)))\n"
    )
    honest = tmp_path / "honest.py"
    honest.write_text(model_new % "")
    result = run(honest, "conv_relu_maxpool", policy="off")
    assert result.correct, (result.flags, result.error)
    assert "threads_started" not in result.flags
    spawning = tmp_path / "spawning.py"
    sleeper = "        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    spawning.write_text(model_new % sleeper)
    result = run(spawning, "conv_relu_maxpool", policy="off")
    assert "threads_started" in result.flags, (result.flags, result.error)


HOST_HOG = (
    "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    "        held = []\n"
    "        while True:  # host memory, 256 MiB more and touched, until someone stops it\n"
    "            block = bytearray(256 << 20)\n"
    "            block[::4096] = b'x' * len(block[::4096])\n"
    "            held.append(block)\n"
)


def test_a_cuda_worker_past_its_host_memory_cap_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_WORKER_MEMORY_GB", "6")
    honest = run(workdir(tmp_path, "relu_launch"), size="standard")
    assert honest.correct, (honest.flags, honest.error)  # an honest cuda worker fits in 6 GiB
    path = tmp_path / "hog.py"
    path.write_text(HOST_HOG)
    result = run(path, policy="off")
    assert result.error is not None and "memory_cap" in result.flags, (result.flags, result.error)
    assert "past its memory cap of 6 GiB" in result.error.message
    assert "crashed" not in result.flags
