"""The agent's tools (OpenAI function schemas) and the registry that dispatches calls."""
