"""The exported package's runtime, in this process: the operator, ModelNew, the size checks.

The runtime does not care whether ``forward`` calls compiled kernels, so these tests give it a
plain PyTorch solution (no build); the installed packages are tested in ``test_install.py``.
"""

from __future__ import annotations

import copy
import secrets
import warnings
from typing import Any

import pytest
import torch
from torch import nn

from cuda_agent.export.runtime import ExportedProblem, UnverifiedCallError


class Reference(nn.Module):
    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bias) * self.scale


class Solution(nn.Module):
    calls = 0

    def __init__(self, dim: int, scale: float) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.empty(dim))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        Solution.calls += 1
        return (x + self.bias).clamp_min(0.0) * self.scale


class Identity(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def shape(label: str, verdict: str, dim: int, rows: int) -> dict[str, Any]:
    return {
        "label": label,
        "kind": "base" if label == "base" else "doubled",
        "sizes": {"rows": rows, "dim": dim},
        "verdict": verdict,
        "error": None if verdict == "pass" else "verify: output mismatch",
        "init_args": [dim, 2.0],
        "inputs": [{"shape": [rows, dim], "dtype": "float32"}],
        "state": {"bias": {"shape": [dim], "dtype": "float32"}},
        "output": {"kind": "tensor", "tensors": [{"shape": [rows, dim], "dtype": "float32"}]},
    }


def verified(generalizes: bool | None) -> dict[str, Any]:
    shapes = [shape("base", "pass", 8, 4), shape("rows=2", "pass", 8, 2)]
    shapes.append(shape("dim=16", "pass" if generalizes else "fail", 16, 4))
    return {
        "problem": {"id": "toy"},
        "backend": "cpu",
        "device": {"device": "x86_64"},
        "shapes": shapes,
        "generalizes": generalizes,
    }


def export(
    generalizes: bool | None = False, solution: type = Solution, reference: type = Reference
) -> ExportedProblem:
    namespace = f"rt_{secrets.token_hex(4)}"  # an operator can be defined once per process
    return ExportedProblem(
        package=namespace,
        namespace=namespace,
        op="forward",
        solution=solution,
        reference=reference,
        verified=verified(generalizes),
    )


def pair(exported: ExportedProblem, dim: int = 8) -> tuple[nn.Module, nn.Module]:
    reference = Reference(dim, 2.0)
    model = exported.model_class(dim, 2.0)
    model.load_state_dict(reference.state_dict())  # strict: the same keys
    return model, reference


def test_model_has_the_reference_constructor_and_state() -> None:
    model, reference = pair(export())
    assert type(model).__name__ == "ModelNew"
    assert list(model.state_dict()) == list(reference.state_dict()) == ["bias"]
    x = torch.randn(4, 8)
    torch.testing.assert_close(model(x), reference(x))
    x = torch.randn(2, 8)  # another verified size
    torch.testing.assert_close(model(x), reference(x))


def test_unverified_size_is_an_error_that_names_the_verified_sizes() -> None:
    model, _ = pair(export(generalizes=False))
    with pytest.raises(UnverifiedCallError) as err:
        model(torch.randn(3, 8))
    message = str(err.value)
    assert "inputs (3, 8) float32" in message and "never verified" in message
    assert "rows=4, dim=8 ((4, 8) float32)" in message and "rows=2, dim=8" in message
    assert "failed at dim=16" in message
    assert "set_unverified_policy('allow')" in message
    wide, _ = pair(export(generalizes=False), dim=16)  # the constructor's size failed
    with pytest.raises(UnverifiedCallError, match=r"constructed with \(16, 2.0\)"):
        wide(torch.randn(4, 16))


def test_a_verified_call_is_remembered_but_never_widens_what_passes() -> None:
    exported = export(generalizes=False)
    model, reference = pair(exported)
    for _ in range(3):  # the second and third calls take the remembered verdict
        x = torch.randn(4, 8)
        torch.testing.assert_close(model(x), reference(x))
    assert len(exported._approved) == 1
    with pytest.raises(UnverifiedCallError):
        model(torch.randn(3, 8))
    with pytest.raises(UnverifiedCallError):  # same sizes, another dtype
        model(torch.randn(4, 8, dtype=torch.float64))
    other, _ = pair(exported, dim=16)  # another model: its own verdicts
    with pytest.raises(UnverifiedCallError):
        other(torch.randn(4, 16))
    assert len(exported._approved) == 1


def test_policies_warn_once_or_allow() -> None:
    exported = export(generalizes=False)
    model, reference = pair(exported)
    x = torch.randn(3, 8)
    exported.set_policy("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.testing.assert_close(model(x), reference(x))
        model(x)  # the same size again: no second warning
    assert len(caught) == 1 and "never verified" in str(caught[0].message)
    exported.set_policy("allow")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(torch.randn(5, 8))
    with pytest.raises(ValueError, match="unknown policy"):
        exported.set_policy("maybe")


def test_generalizing_kernels_warn_by_default_and_env_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert export(generalizes=True).policy == "warn"
    assert export(generalizes=False).policy == "error"
    namespace = f"rt_{secrets.token_hex(4)}"
    monkeypatch.setenv(f"{namespace.upper()}_UNVERIFIED", "allow")
    exported = ExportedProblem(
        package=namespace,
        namespace=namespace,
        op="forward",
        solution=Solution,
        reference=Reference,
        verified=verified(False),
    )
    assert exported.policy == "allow"


def test_operator_has_a_fake_implementation_from_the_reference() -> None:
    exported = export()
    model, reference = pair(exported)
    x = torch.randn(4, 8)
    op = exported.op
    state = [model.bias.detach()]
    torch.testing.assert_close(op(model._ca_handle, state, x)[0], reference(x))
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    fake_x, fake_bias = mode.from_tensor(torch.randn(4, 8)), mode.from_tensor(state[0])
    with mode:
        (out,) = op(model._ca_handle, [fake_bias], fake_x)
    assert out.shape == (4, 8) and out.dtype == torch.float32


def test_operator_outputs_never_alias_inputs_and_have_no_backward() -> None:
    exported = ExportedProblem(
        package="rt_identity",
        namespace=f"rt_{secrets.token_hex(4)}",
        op="forward",
        solution=Identity,
        reference=Identity,
        verified={**verified(True), "shapes": [{**shape("base", "pass", 8, 4), "init_args": []}]},
    )
    model = exported.model_class()
    x = torch.randn(4, 8)
    (out,) = exported.op(model._ca_handle, [], x)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()
    (out,) = exported.op(model._ca_handle, [], x.clone().requires_grad_())
    with pytest.raises(RuntimeError, match="inference-only"):
        out.sum().backward()


def test_a_copy_is_a_model_of_its_own() -> None:
    exported = export()
    model, reference = pair(exported)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.bias.add_(1.0)
    assert twin._ca_handle != model._ca_handle
    x = torch.randn(4, 8)
    state = [twin.bias.detach()]
    expected = torch.relu(x + reference.bias + 1.0) * 2.0  # the copy's own weights
    torch.testing.assert_close(exported.op(twin._ca_handle, state, x)[0], expected)
    torch.testing.assert_close(exported.op(model._ca_handle, [], x)[0], reference(x))


@pytest.mark.slow
def test_compiled_model_runs_the_operator_without_graph_break() -> None:
    exported = export(generalizes=False)
    model, reference = pair(exported)
    compiled = torch.compile(model, fullgraph=True)  # a graph break would raise
    x = torch.randn(4, 8)
    before = Solution.calls
    torch.testing.assert_close(compiled(x), reference(x))  # parameters require grad here
    assert Solution.calls == before + 1  # the solution ran once, inside the operator
    with pytest.raises(UnverifiedCallError):
        compiled(torch.randn(3, 8))
