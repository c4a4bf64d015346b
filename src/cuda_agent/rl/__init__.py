"""RL training, by driver: ``trl/`` (GRPO on one node with TRL), ``verl/`` (the paper's PPO
stages through verl on a Ray cluster), ``models/`` (the models a stage starts from, as local
folders) and ``curriculum/`` (single-turn tasks a small model can climb).

Shared by the drivers: ``recipe`` (the stages: configuration files in, engine commands out),
``rft`` (rejection fine-tuning data from agent trajectories), ``advantages`` (token-level
rewards, masked GAE and PPO's aggregations), ``reply`` (a single-turn reply's solution file and
score record), ``service_reward`` (rewards through the reward service, for TRL and verl).
``configs/`` (the stages' settings) and ``templates/`` (chat templates) are package data.
"""
