"""The full tool set of an episode, in the order the model sees it."""

from __future__ import annotations

from cuda_agent.agent.tools.base import ToolRegistry
from cuda_agent.agent.tools.bash import BASH_TOOL
from cuda_agent.agent.tools.files import FILE_TOOLS


def default_tools() -> ToolRegistry:
    return ToolRegistry([BASH_TOOL, *FILE_TOOLS])
