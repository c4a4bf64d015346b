import json
from pathlib import Path

from cuda_agent.agent.trajectory import Trajectory, assistant_turns, load_messages, read_events
from cuda_agent.agent.truncate import truncate_output


def test_short_output_is_untouched() -> None:
    assert truncate_output("abc", 10) == "abc"


def test_long_output_keeps_errors_head_and_tail() -> None:
    text = "\n".join(
        [f"noise {i}" for i in range(2000)]
        + ['kernels/k.cu(12): error: identifier "x" is undefined']
        + [f"tail {i}" for i in range(2000)]
    )
    out = truncate_output(text, 2000)
    assert len(out) <= 2100
    assert out.startswith("[first errors]\nkernels/k.cu(12): error")
    assert "noise 0" in out and "tail 1999" in out and "characters omitted" in out


def test_trajectory_survives_a_torn_line_and_drops_an_unfinished_turn(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.jsonl"
    traj = Trajectory(path)
    traj.event("message", message={"role": "system", "content": "s"})
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    traj.event("message", message={"role": "assistant", "content": "", "tool_calls": [call]})
    traj.event("tool_result", message={"role": "tool", "tool_call_id": "c1", "content": "ok"})
    call2 = dict(call, id="c2")
    traj.event("message", message={"role": "assistant", "content": "", "tool_calls": [call2]})
    traj.close()
    with open(path, "a") as handle:
        handle.write('{"kind": "tool_res')  # a crash mid-write
    events = read_events(path)
    assert len(events) == 4
    messages = load_messages(events)
    assert [m["role"] for m in messages] == ["system", "assistant", "tool"]
    turns = assistant_turns(events)
    assert [t["tool_calls"][0]["id"] for t in turns] == ["c1", "c2"]
    assert json.loads(path.read_text().splitlines()[0])["kind"] == "message"
