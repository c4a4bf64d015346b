"""Names of policies and precision settings, importable without torch (CLI, options, clients)."""

POLICIES = ("strict", "kernelbench", "off")
PRECISIONS = ("ieee", "tf32", "torch-default")
