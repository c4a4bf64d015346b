"""verl's batch reward function over the reward service, called as verl's batch manager does.

    cuda-agent serve --http 127.0.0.1:8000 --backend cpu &       # or a GPU host
    python examples/service/verl_reward.py --url http://127.0.0.1:8000

In training (verl 0.9): ``reward_model.reward_manager=batch``,
``custom_reward_function.path=<cuda_agent>/rl/service_reward.py``,
``custom_reward_function.name=compute_score_batch`` and
``+custom_reward_function.reward_kwargs.service=http://HOST:8000``; rows carry the problem in
``reward_model.ground_truth`` and its size in ``extra_info.size``. The token comes from
``CUDA_AGENT_TOKEN``.
"""

from __future__ import annotations

import argparse

from cuda_agent.rl.service_reward import compute_score_batch

CORRECT = """```python
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
```"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    scores = compute_score_batch(
        data_sources=["cuda_agent"] * 2,
        solution_strs=[CORRECT, "no code here"],
        ground_truths=["relu", "relu"],
        extra_infos=[{"size": "small"}, {"size": "small"}],
        service=args.url,
        policy="off",
        baselines=["eager"],
    )
    print("scores:", [s["score"] for s in scores], "correct:", [s["correct"] for s in scores])


if __name__ == "__main__":
    main()
