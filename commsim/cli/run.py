"""TEMPORARY: ``commsim run`` until commsim.bench lands (then rewritten on its API)."""

from commsim._cli_run import DESCRIPTION, EXAMPLES, HELP, add_arguments, main

__all__ = ["DESCRIPTION", "EXAMPLES", "HELP", "add_arguments", "main"]
