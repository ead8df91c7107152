"""Tool calling: the model's tool-call markup, the grammar that constrains it, and MCP.

`calls` reads tool calls from model output (streamed or whole, linear time); `grammar` builds
the grammar that forces a call's shape; `mcp` connects to Model Context Protocol servers."""
