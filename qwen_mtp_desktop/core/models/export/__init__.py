"""Export a Qwen3.5 checkpoint to an OpenVINO model directory with its MTP head.

The exporter (optimum-intel) runs as a subprocess in its own process group: it imports torch and
transformers, which the app process never does, and a crash or a cancel there cannot take the app
down. Cancelling escalates SIGINT -> SIGTERM -> SIGKILL to the whole group. Output goes to a
staging folder beside the destination (`.NAME.exporting-XXXX`, which also holds the exporter's
TMPDIR) and is moved into place only when the export succeeded and verified; a staging folder
left by a crash is removed by `cleanup_stale_exports()` at the next start.

A job (`ExportJob.run`) is: [download from the hub] -> export -> verify (files, the precision of
every component read from the IR, and MTP greedy output == plain greedy output in a subprocess)
-> manifest (`model_folders.manifest.MANIFEST_NAME`) -> move into place. Progress arrives as
`ProgressEvent`s parsed from the subprocess output (see `ProgressParser`).

Modules: options (what and where), command (subprocess command lines), progress (parsing
the exporter output), supervisor (`SupervisedProcess`), staging, verify, manifest, job,
child (the generation check's subprocess), optimum_cli (the exporter's subprocess), guard (what
an export may replace), preflight/ (checks before an export), hub (Hugging Face hub checkpoints
and their download). Ready OpenVINO models (downloads, the MTP head graft) are core.models.ready,
and OpenVINO Model Server repositories core.models.ovms: neither needs the export toolkit.
"""
