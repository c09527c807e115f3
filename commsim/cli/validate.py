"""TEMPORARY: ``commsim validate`` until commsim.bench lands (then rewritten on its API)."""

from commsim._cli_validate import DESCRIPTION, EXAMPLES, HELP, add_arguments, main

__all__ = ["DESCRIPTION", "EXAMPLES", "HELP", "add_arguments", "main"]
