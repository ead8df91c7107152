"""The transcript: the scrolling list of messages (`view`), one message (`message`) with its
text views, Markdown, drafted spans, tool calls and version controls, and how links in answers
open."""
