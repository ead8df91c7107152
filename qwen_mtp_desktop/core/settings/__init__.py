"""The user's settings: one JSON file, validated on load and merged on write, and chat presets.

`store` reads, validates and saves the settings file (one size limit; a refused save says why and
undoes only its own change); `presets` are a name, a system prompt and sampling settings a chat
takes at once; `model_defaults` are what new chats of one model start with."""
