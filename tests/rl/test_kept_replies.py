"""Replies kept before scoring: read back only for the same model, settings and prompts."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.rl.curriculum.generation import Reply, SamplingSettings
from cuda_agent.rl.curriculum.kept_replies import keep, kept, model_fingerprint, replies_key

PROMPTS = [[{"role": "user", "content": "y = relu(x)"}], [{"role": "user", "content": "y = -x"}]]
REPLIES = [[Reply("a", 3, False), Reply("b", 9, True)], [Reply("c", 1, False)] * 2]


def test_kept_replies_come_back_for_their_key_only(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\x00" * 10)
    path = tmp_path / "replies.jsonl"
    key = replies_key(str(model), SamplingSettings(), PROMPTS)
    assert kept(path, key) is None  # nothing kept yet
    keep(path, key, REPLIES)
    assert kept(path, key) == REPLIES
    others = [
        replies_key(str(model), SamplingSettings(seed=1), PROMPTS),  # another seed
        replies_key(str(model), SamplingSettings(), PROMPTS[:1]),  # other prompts
    ]
    (model / "weights.bin").write_bytes(b"\x01" * 10)  # fine-tuned again, at the same path
    others.append(replies_key(str(model), SamplingSettings(), PROMPTS))
    assert key not in others and all(kept(path, other) is None for other in others)
    assert model_fingerprint("qwen-coder-0.5b") == "qwen-coder-0.5b"  # a name, not a folder


def test_a_file_cut_short_is_not_read_back(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    keep(path, "k", REPLIES)
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")  # one prompt lost
    assert kept(path, "k") is None
