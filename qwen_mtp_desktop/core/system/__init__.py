"""This computer and this process: the environment, devices, memory budget, logs and crashes.

`environment` names the installed runtimes; `devices` lists OpenVINO devices; `state_budget`
sizes the conversation-state memory; `buildinfo` says which build runs; `logs` and `crash`
write the log and crash reports; `privacy` keeps library telemetry off."""
