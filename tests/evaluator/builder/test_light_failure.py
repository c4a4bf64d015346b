"""light_failure.is_own_failure on compiler logs as g++ and nvcc print them (no compiler run)."""

from __future__ import annotations

from cuda_agent.evaluator.builder.light_failure import is_own_failure, own_labels, without_hints

LABELS = frozenset({"cpp_sources"})
HEADERS = frozenset({"sigmoid", "Tensor", "relu"})

UNDECLARED = """\
cpp_sources: In function 'void pybind11_init_m(pybind11::module_&)':
cpp_sources:4:49: error: ‘foo_kernel’ was not declared in this scope; did you mean ‘PyInit_m’?
cpp_sources:4:70: error: ‘bar_kernel’ was not declared in this scope
"""

REDEFINED = """\
In file included from /torch/include/pybind11/attr.h:13,
                 from /cache/pch/ca_prelude.h:1:
cpp_sources:6:1: error: redefinition of ‘PyObject* PyInit_m()’
cpp_sources:4:1: note: ‘PyObject* PyInit_m()’ previously defined here
"""

REDEFINED_FROM_A_HEADER = """\
cpp_sources:6:1: error: redefinition of ‘int helper(int)’
/torch/include/ATen/ops/helper.h:12:1: note: ‘int helper(int)’ previously defined here
"""


def test_names_no_header_mentions_are_the_sources_own() -> None:
    assert is_own_failure(UNDECLARED, LABELS, HEADERS)


def test_a_name_some_header_mentions_is_retried_with_stock() -> None:
    log = "cpp_sources:5:53: error: ‘sigmoid’ was not declared in this scope\n"
    assert not is_own_failure(log, LABELS, HEADERS)
    assert not is_own_failure(UNDECLARED + log, LABELS, HEADERS)  # every error must qualify


def test_two_definitions_in_the_sources_are_their_own() -> None:
    assert is_own_failure(REDEFINED, LABELS, HEADERS)
    assert not is_own_failure(REDEFINED_FROM_A_HEADER, LABELS, HEADERS)


def test_nvcc_undefined_identifier() -> None:
    log = 'cuda_sources(5): error: identifier "launch_missing_kernel" is undefined\n'
    assert is_own_failure(log, frozenset({"cuda_sources"}), HEADERS)
    assert not is_own_failure(log, LABELS, HEADERS)  # not at a line of this unit's own text


def test_other_errors_and_empty_logs_are_retried() -> None:
    for log in (
        "cpp_sources:3:5: error: expected ‘;’ before ‘return’\n",
        "cpp_sources:3:5: error: ‘at::not_an_op’ has not been declared\n",
        "/torch/include/c10/x.h:1:1: error: ‘foo’ was not declared in this scope\n",
        "cpp_sources:1:10: fatal error: missing.h: No such file or directory\n",
        "build timed out\n",
        "",
    ):
        assert not is_own_failure(log, LABELS, HEADERS), log


def test_ascii_quotes_of_a_c_locale() -> None:
    log = "cpp_sources:4:49: error: 'foo_kernel' was not declared in this scope\n"
    assert is_own_failure(log, LABELS, HEADERS)


def test_hints_removed_and_labels_read_from_line_markers() -> None:
    assert "did you mean" not in without_hints(UNDECLARED)
    assert "‘foo_kernel’ was not declared in this scope\n" in without_hints(UNDECLARED)
    body = '#line 1 "cpp_sources"\nint x;\n#line 1 "cuda_sources"\n'
    assert own_labels(body) == frozenset({"cpp_sources", "cuda_sources"})
