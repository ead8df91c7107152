"""Measuring MTP: validation (MTP must equal plain decoding), benchmarks and their verdicts.

`measurement` is what `validate` and `bench` share; `verdicts` and `recommendations` turn
results into where Auto starts; `reports` and `report_markdown` keep and render them;
`prompt_sets` are the workloads; `acceptance_health` watches acceptance in real chats;
`fullsize_figures` are the full-size model's measured numbers the app quotes."""
