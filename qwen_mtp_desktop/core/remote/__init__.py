"""Remote models: OpenAI-compatible servers (another PC's `serve`, OVMS, vLLM, llama.cpp) that the
chat and `generate --remote` use like a local model.

`endpoints` keeps the list of servers (no secrets), `keys` keeps their API keys in the OS
keychain (or in memory only, when there is none), `client` streams an answer with the same
iteration surface as a local `Generation`.
"""
