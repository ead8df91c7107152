"""Discover (dialog.DiscoverDialog): the Qwen3.5 family sized for this computer."""
