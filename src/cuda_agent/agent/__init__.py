"""The agent: model clients, workspace tools, the command sandbox and the ReAct loop.

HTTP clients (``openai``) are imported only here, lazily. The agent never computes rewards:
the workspace commands it runs are served by the harness (``tool_server``), and an episode's
reward comes from the harness's own evaluation of the final workdir (``cuda_agent.rollout``).
"""
