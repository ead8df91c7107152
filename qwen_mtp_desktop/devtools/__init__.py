"""Developer tools (optional export toolkit): builds the offline tiny Qwen3.5 + MTP demo model.

Only this package imports torch, transformers and tokenizers; the chat runtime never does.
"""
