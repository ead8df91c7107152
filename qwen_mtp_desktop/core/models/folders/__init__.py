"""Model folders: discover them, inspect them, diagnose problems, estimate memory, verify.

Nothing here compiles a model or imports openvino: IRs are read by `core.models.ir` (XML + file
sizes), the rest comes from the folder's JSON files. So inspecting costs about as much as reading
the
.xml files (the weights are never read), and it works even when the runtime is broken, which is
when the diagnostics matter most. Checksum verification, which does read everything, is a
separate, cancellable call.

Every result is a plain dataclass with a `to_json_dict()` whose field names are stable (the CLI
prints them and the UI reads them); `ModelReport.to_json_dict` documents the schema.

Modules: report (the dataclasses), manifest (our record of an export), discovery, memory
(geometry and the memory estimate), diagnostics (what can be wrong, each with a fix),
inspection (`inspect_model`: one folder, start to finish), checksums (`verify_checksums`).
"""
