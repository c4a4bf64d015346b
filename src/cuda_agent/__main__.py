"""``python -m cuda_agent`` runs the CLI."""

from cuda_agent.cli.app import main

main()
