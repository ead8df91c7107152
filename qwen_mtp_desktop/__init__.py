"""Qwen MTP Desktop: local Qwen3.5 chat on OpenVINO, sped up by MTP speculative decoding."""

__version__ = "0.1.0"
APP_NAME = "Qwen MTP Desktop"
APP_ID = "qwen-mtp-desktop"
