"""TRL's reward function over the reward service, called as GRPOTrainer calls it.

    cuda-agent serve --http 127.0.0.1:8000 --backend cpu &       # or a GPU host
    python examples/service/trl_reward.py --url http://127.0.0.1:8000

In training: ``GRPOTrainer(model=..., reward_funcs=[ServiceReward(url)], train_dataset=ds)``
with a dataset whose ``problem`` column holds problem specs (bundled ids, files); the trainer
passes ``prompts``, ``completions`` and the dataset's columns, as below. The token comes from
``CUDA_AGENT_TOKEN``.
"""

from __future__ import annotations

import argparse

from cuda_agent.rl.service_reward import ServiceReward

CORRECT = """Here is my kernel.
```python
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
```"""
WRONG = CORRECT.replace("min=0.0", "min=0.5")
NO_CODE = "I could not write a kernel for this one."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    reward = ServiceReward(
        args.url, size="small", options={"policy": "off", "baselines": ["eager"]}
    )
    completions = [[{"role": "assistant", "content": text}] for text in (CORRECT, WRONG, NO_CODE)]
    rewards = reward(
        prompts=[[{"role": "user", "content": "Write ModelNew for relu."}]] * 3,
        completions=completions,
        problem=["relu"] * 3,
    )
    print("rewards:", rewards)


if __name__ == "__main__":
    main()
