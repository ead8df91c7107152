"""Auto: the policy that picks plain decoding or an MTP depth per turn, and its evidence.

`policy` decides from what turns measured (`turn_record`, `turn_costs`, `step_context`,
`lookup_evidence`, `sampling_bands`) and falls back within a turn (`within_turn`); `turns`
applies it to a chat's turns, starting from a benchmark's verdict. Qt-free."""
