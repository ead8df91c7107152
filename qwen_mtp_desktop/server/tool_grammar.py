"""Where the API found the forced-call grammar before it moved to core (the chat forces calls
too): `core.tools.grammar` is its home; this name keeps server imports working."""

from qwen_mtp_desktop.core.tools.grammar import ToolGrammarError, tool_call_grammar

__all__ = ["ToolGrammarError", "tool_call_grammar"]
