"""Where the API's modules found the tool-call parser before it moved to core (the chat's MCP
tools read calls too): `core.tools.calls` is its home; this name keeps server imports working."""

from qwen_mtp_desktop.core.tools.calls import (
    CALL_CLOSE,
    CALL_OPEN,
    Calls,
    Malformed,
    Parsed,
    Text,
    ToolCall,
    new_call_id,
    parameter_types,
    parse,
    render_calls,
)

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "Calls",
    "Malformed",
    "Parsed",
    "Text",
    "ToolCall",
    "new_call_id",
    "parameter_types",
    "parse",
    "render_calls",
]
