"""RL training: recipes, rejection fine-tuning data, advantages; engines behind adapters."""
