"""Decoding: the app's own decoder (decoder.py, on the IRs changed in memory by graphs.py),
prompt lookup's candidate replay (prompt_lookup.py), sampling and the exact speculative
acceptance rule (sampling.py), token ids to text (text.py) and what an answer measured
(stats.py). No Qt; OpenVINO is imported inside the functions that need it."""
