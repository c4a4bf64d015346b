from cuda_agent.evaluator.checks.ncu_metrics import parse_ncu_csv

OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
CSV = f"""==PROF== Connected to process 1
"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"
"0","1","relu_kernel(const float *, float *, long, long)","gpu__time_duration.sum","ns","556,128"
"0","1","relu_kernel(const float *, float *, long, long)","dram__bytes.sum","Gbyte","2.13"
"0","1","relu_kernel(const float *, float *, long, long)","{OCC}","%","70.0"
"1","1","relu_kernel(const float *, float *, long, long)","gpu__time_duration.sum","usecond","554.0"
"1","1","relu_kernel(const float *, float *, long, long)","dram__bytes.sum","Gbyte","2.11"
"1","1","relu_kernel(const float *, float *, long, long)","{OCC}","%","69.9"
==PROF== Disconnected from process 1
"""


def test_ncu_details_are_averaged_per_kernel_with_units() -> None:
    (kernel,) = parse_ncu_csv(CSV)
    assert kernel["launches"] == 2
    assert abs(kernel["duration_us"] - 555.064) < 1e-6
    assert abs(kernel["dram_bytes"] - 2.12e9) < 1.0
    assert abs(kernel["occupancy_pct"] - 69.95) < 1e-9


def test_no_rows_no_kernels() -> None:
    assert parse_ncu_csv("==ERROR== profiling is not supported\n") == []
