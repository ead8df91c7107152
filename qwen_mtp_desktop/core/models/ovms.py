"""Write an OpenVINO Model Server (OVMS) model repository for an exported model folder.

Layout written (one servable; OVMS serves it under `/v3/chat/completions`)::

    OUT/
      config.json            model_config_list entry: {"name": NAME, "base_path": NAME}
      README.md              docker run line, curl example, what was and was not run here
      kserve.yaml            a KServe ServingRuntime + InferenceService example
      NAME/
        graph.pbtxt          MediaPipe graph with the HttpLLMCalculator node
        generation_config.json   the export's, plus num_assistant_tokens (a new file, never linked)
        openvino_*.xml/.bin, tokenizer and config files   hard links to the export, else copies

Where each field comes from (openvinotoolkit/model_server, the snapshot read for this module,
commit 7e4df0c7a of 2026-08-21, and release notes v2026.4.0 / v2026.4.1):

- graph.pbtxt layout: `demos/common/export_models/export_model.py` (text_generation_graph_template)
  and `src/test/llm/lm_cb_speculative.pbtxt`.
- LLMCalculatorOptions fields and types: `src/llm/llm_calculator.proto` (models_path = 1,
  cache_size = 3, device = 6, enable_prefix_caching = 10, draft_models_path = 11,
  draft_device = 12, pipeline_type = 19). Relative paths are resolved against the graph's
  folder: `src/llm/servable_initializer.cpp` parseModelsPath and
  `src/llm/language_model/continuous_batching/servable_initializer.cpp` (draft path).
- VLM vs LLM: `src/llm/servable_initializer.cpp` determinePipelineType (VLM when
  openvino_text_embeddings_model.xml and openvino_vision_embeddings_model.bin exist; VLM_CB and
  LM_CB share the continuous-batching initializer, which is where the draft model is attached).
- num_assistant_tokens: a request / generation_config.json parameter, not a graph option:
  `docs/model_server_rest_api_chat.md` (request body, then generation_config.json, then 5).
- config.json: `export_model.py` add_servable_to_config, `docs/mediapipe.md` (base_path relative
  to config.json, graph_path defaulting to base_path/graph.pbtxt).
- docker run: `demos/continuous_batching/speculative_decoding/README.md`; image tag from the
  v2026.4.1 release notes.
- KServe: `extras/kserve/kserve-openvino.yaml` and `docs/deploying_server_kubernetes.md`.

Not confirmed from OVMS's sources: an MTP-specific graph option. The snapshot's proto has none
(only draft_eagle3_mode for EAGLE3), and OVMS calls `ov::genai::draft_model(path, draft_device,
scheduler_config)` without an MTP flag; openvino-genai 2026.4.1 run here detects the MTP head in
such a draft folder by itself. OVMS 2026.4's "preview support for MTP" (PR #4498) may add an
option we could not read; the README says so.

Atomicity: everything is staged in a hidden sibling folder and renamed into place in one step,
so OUT either does not exist (or is still empty) or is complete. A non-empty OUT is refused;
nothing of the user's is deleted or changed (generation_config.json is written as a new file,
not through a hard link).

Symbolic links in the model folder (issue 29): a link is followed only while its target stays
inside the model folder (or a Hugging Face cache snapshot's `blobs`), and the repository gets
the target's content, never a link. A link leading anywhere else is refused with its target
named: the repository is meant to be shipped to a server, and would carry that file with it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import (
    FileKind,
    UnsafeFileError,
    read_json_object,
    resolve_inside,
    special_file_kind,
)
from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
from qwen_mtp_desktop.core.models.folders.report import ModelReport

OVMS_IMAGE = "openvino/model_server:2026.4.1"
OVMS_SOURCE_COMMIT = "7e4df0c7a"
REST_PORT = 8000
#: OVMS's own fallback when neither request nor generation_config.json sets it
#: (docs/model_server_rest_api_chat.md).
OVMS_DEFAULT_ASSISTANT_TOKENS = 5
DEFAULT_ASSISTANT_TOKENS = 3
MAX_ASSISTANT_TOKENS = 32
#: OVMS device names this command writes (llm_calculator.proto `device` is a free string; these
#: are the ones OVMS's docs use).
DEVICES = ("CPU", "GPU", "NPU", "AUTO")
STAGING_MARK = ".qwen-mtp-ovms-staging"
#: A servable name is written into JSON, pbtxt, YAML, a URL path and shell lines; limiting it to
#: these characters makes it safe in all of them without per-format escaping.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: Files of the export that the repository does not need or that are regenerated here.
_GENERATED = {"graph.pbtxt", "generation_config.json"}


class OvmsDeployError(UserFacingError):
    code = "OVMS_DEPLOY"


@dataclass(frozen=True)
class OvmsOptions:
    num_assistant_tokens: int = DEFAULT_ASSISTANT_TOKENS
    device: str = "CPU"
    #: The servable name clients send as "model"; derived from the folder name when None.
    name: str | None = None


@dataclass
class OvmsDeployment:
    """What was written, for the CLI, the GUI and the tests."""

    out: Path
    name: str
    servable_dir: Path
    layout: str  # "vlm" | "llm"
    pipeline_type: str  # "VLM_CB" | "LM_CB"
    kind_label: str
    moe: bool
    mtp: bool
    num_assistant_tokens: int | None
    device: str
    linked_files: int = 0
    copied_files: int = 0
    total_bytes: int = 0
    docker_command: str = ""
    curl_command: str = ""
    not_run: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "out": str(self.out),
            "name": self.name,
            "servable_dir": str(self.servable_dir),
            "layout": self.layout,
            "pipeline_type": self.pipeline_type,
            "kind_label": self.kind_label,
            "moe": self.moe,
            "mtp": self.mtp,
            "num_assistant_tokens": self.num_assistant_tokens,
            "device": self.device,
            "linked_files": self.linked_files,
            "copied_files": self.copied_files,
            "total_bytes": self.total_bytes,
            "docker_command": self.docker_command,
            "curl_command": self.curl_command,
            "not_run": list(self.not_run),
            "unconfirmed": list(self.unconfirmed),
        }


# --- names and paths ---------------------------------------------------------------------------


def servable_name(folder_name: str) -> str:
    """A safe OVMS servable name from a folder name: unsafe characters become '-'."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", folder_name).strip("-._")[:63]
    return cleaned if cleaned and _NAME_RE.fullmatch(cleaned) else "model"


def default_name(model_dir: Path) -> str:
    """The servable name for an export: its folder's name, or the parent's when the folder is
    just called "openvino" (the demo model's layout)."""
    folder = model_dir.name
    if folder.lower() in ("openvino", "ov", "model") and model_dir.parent.name:
        folder = model_dir.parent.name
    return servable_name(folder)


def check_name(name: str) -> str:
    if not _NAME_RE.fullmatch(name):
        raise OvmsDeployError(
            f"{name!r} cannot be an OVMS model name.",
            "Use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit.",
            code="BAD_NAME",
        )
    return name


def _check_printable_path(path: Path, what: str) -> None:
    # The path goes into README shell lines; a control character (a newline above all) would
    # split a command in two when pasted, so it is refused rather than escaped.
    text = str(path)
    bad = next((ch for ch in text if ord(ch) < 32 or ord(ch) == 127), None)
    if bad is not None:
        raise OvmsDeployError(
            f"{what} {text!r} contains a control character ({bad!r}).",
            "Choose a folder whose path has no newlines, tabs or other control characters.",
            code="BAD_PATH",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OvmsDeployError(
            f"{what} {text!r} is not valid UTF-8.",
            "Choose a folder with a plain name.",
            code="BAD_PATH",
        ) from None


def _is_within(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def _check_out(out: Path, model_dir: Path) -> None:
    _check_printable_path(out, "The output folder")
    if out.is_symlink():
        raise OvmsDeployError(
            f"The output folder {out} is a symbolic link; nothing was written.",
            "Name a new folder.",
            code="NOT_REGULAR",
        )
    if out.exists():
        if not out.is_dir():
            raise OvmsDeployError(
                f"{out} exists and is not a folder; nothing was written.",
                "Name a new folder (it is created) or an empty one.",
                code="OUT_NOT_EMPTY",
            )
        if any(out.iterdir()):
            raise OvmsDeployError(
                f"The output folder {out} is not empty; nothing was written or deleted.",
                "Name a new folder (it is created) or an empty one.",
                code="OUT_NOT_EMPTY",
            )
    if _is_within(out.resolve(), model_dir.resolve()):
        raise OvmsDeployError(
            f"The output folder {out} is inside the model folder {model_dir}.",
            "Write the OVMS repository somewhere outside the model folder.",
            code="OUT_INSIDE_MODEL",
        )
    if not out.parent.is_dir():
        raise OvmsDeployError(
            f"The folder {out.parent} does not exist.",
            "Create it first, or name an output folder in an existing folder.",
            code="OUT_PARENT_MISSING",
        )


# --- the generated files -------------------------------------------------------------------------


def pbtxt_string(text: str) -> str:
    """`text` as a protobuf text-format string literal (C escapes, double quotes)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif code < 32 or code == 127:
            out.append(f"\\{code:03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def graph_pbtxt(*, pipeline_type: str, device: str, mtp: bool) -> str:
    """The MediaPipe graph OVMS loads for the servable (see the module docstring for sources)."""
    draft = (
        "          # MTP speculative decoding: the MTP head sits in the same folder as the\n"
        "          # model; openvino-genai 2026.4.1 detects it in the draft folder by itself.\n"
        f"          draft_models_path: {pbtxt_string('./')},\n"
        f"          draft_device: {pbtxt_string(device)},\n"
        if mtp
        else ""
    )
    return (
        "# OVMS_GRAPH_QUEUE_MAX_SIZE: AUTO\n"
        "# Written by Qwen MTP Desktop for OpenVINO Model Server 2026.4. Layout from\n"
        "# model_server demos/common/export_models/export_model.py; options from\n"
        "# src/llm/llm_calculator.proto (LLMCalculatorOptions).\n"
        'input_stream: "HTTP_REQUEST_PAYLOAD:input"\n'
        'output_stream: "HTTP_RESPONSE_PAYLOAD:output"\n'
        "\n"
        "node: {\n"
        '  name: "LLMExecutor"\n'
        '  calculator: "HttpLLMCalculator"\n'
        '  input_stream: "LOOPBACK:loopback"\n'
        '  input_stream: "HTTP_REQUEST_PAYLOAD:input"\n'
        '  input_side_packet: "LLM_NODE_RESOURCES:llm"\n'
        '  input_side_packet: "LLM_NODE_EXECUTION_CONTEXTS:llm_ctx"\n'
        '  output_stream: "LOOPBACK:loopback"\n'
        '  output_stream: "HTTP_RESPONSE_PAYLOAD:output"\n'
        "  input_stream_info: {\n"
        "    tag_index: 'LOOPBACK:0',\n"
        "    back_edge: true\n"
        "  }\n"
        "  node_options: {\n"
        "      [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {\n"
        f"          pipeline_type: {pipeline_type},\n"
        f"          models_path: {pbtxt_string('./')},\n"
        # Linear-attention (Qwen3.5) speculative decoding refuses prefix caching in
        # openvino-genai 2026.4.1 ("requires enable_prefix_caching=false"; RUNTIME-NOTES).
        f"          enable_prefix_caching: false,\n"
        # 0 = let the KV cache grow as needed (servable_initializer.cpp: cache_size == 0).
        "          cache_size: 0,\n"
        f"          device: {pbtxt_string(device)},\n"
        f"{draft}"
        "      }\n"
        "  }\n"
        "  input_stream_handler {\n"
        '    input_stream_handler: "SyncSetInputStreamHandler",\n'
        "    options {\n"
        "      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {\n"
        "        sync_set {\n"
        '          tag_index: "LOOPBACK:0"\n'
        "        }\n"
        "      }\n"
        "    }\n"
        "  }\n"
        "}\n"
    )


def config_json(name: str) -> str:
    payload = {"model_config_list": [{"config": {"name": name, "base_path": name}}]}
    return json.dumps(payload, indent=4) + "\n"


def _yaml_str(text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar, with every special character escaped.
    return json.dumps(text, ensure_ascii=False)


def kserve_yaml(name: str, device: str) -> str:
    runtime = "qwen-mtp-ovms"
    k8s_name = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:50] or "model"
    gpu_note = (
        "        # GPU: use the -gpu image tag and request the node's GPU resource.\n"
        if device == "GPU"
        else ""
    )
    return f"""# KServe example for OpenVINO Model Server 2026.4 (NOT applied or tested here).
# Modelled on model_server extras/kserve/kserve-openvino.yaml and
# docs/deploying_server_kubernetes.md. Upload the folder {_yaml_str(name)} (the one holding
# graph.pbtxt) to your storage and set storageUri to it; KServe mounts it at /mnt/models.
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: {runtime}
spec:
  supportedModelFormats:
    - name: openvino
      version: "1"
      autoSelect: false
  protocolVersions:
    - v2
  containers:
    - name: kserve-container
      image: {_yaml_str(OVMS_IMAGE + ("-gpu" if device == "GPU" else ""))}
      args:
        - --model_name={{{{.Name}}}}
        - --model_path=/mnt/models
        - --rest_port=8080
        - --file_system_poll_wait_seconds=0
      ports:
        - containerPort: 8080
          protocol: TCP
      startupProbe:
        periodSeconds: 5
        failureThreshold: 9999
        httpGet:
          path: /v2/health/ready
          port: 8080
      securityContext:
        allowPrivilegeEscalation: false
        runAsNonRoot: true
        runAsUser: 5000
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: {_yaml_str(k8s_name)}
spec:
  predictor:
    model:
      runtime: {runtime}
      modelFormat:
        name: openvino
      storageUri: {_yaml_str("s3://YOUR-BUCKET/" + name)}
      resources:
{gpu_note}        requests:
          cpu: "4"
          memory: 8Gi
        limits:
          cpu: "4"
          memory: 8Gi
"""


def docker_command(out: Path, name: str, device: str) -> str:
    image = OVMS_IMAGE + ("-gpu" if device == "GPU" else "")
    gpu = (
        "--device /dev/dri --group-add $(stat -c '%g' /dev/dri/render* | head -n1) "
        if (device == "GPU")
        else ""
    )
    return (
        f"docker run -d --rm -p {REST_PORT}:{REST_PORT} {gpu}"
        f"-v {shlex.quote(str(out))}:/workspace:ro {image} "
        f"--rest_port {REST_PORT} --rest_workers 2 --config_path /workspace/config.json"
    )


def curl_command(name: str) -> str:
    body = json.dumps(
        {
            "model": name,
            "messages": [{"role": "user", "content": "Count from 1 to 10."}],
            "max_tokens": 100,
            "temperature": 0,
            "stream": False,
        }
    )
    return (
        f"curl -s http://localhost:{REST_PORT}/v3/chat/completions "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )


def _readme(d: OvmsDeployment, report: ModelReport) -> str:
    if d.mtp:
        spec = (
            f'MTP speculative decoding: on. graph.pbtxt sets `draft_models_path: "./"` (the MTP '
            f"head `openvino_mtp_model.xml` is in the same folder) and "
            f"`{d.name}/generation_config.json` sets `num_assistant_tokens: "
            f"{d.num_assistant_tokens}` as the server-wide default (a request may send its own; "
            f"OVMS's built-in default is {OVMS_DEFAULT_ASSISTANT_TOKENS})."
        )
    else:
        spec = (
            "MTP speculative decoding: off. This export has no usable MTP head, so the graph has "
            "no draft model and the server decodes one token per step."
        )
    files = (
        f"{d.linked_files} model files are hard links to the export (they share disk space "
        f"with it: do not edit them in place) and {d.copied_files} are copies"
    )
    moe = " (mixture of experts)" if d.moe else ""
    not_run = "\n".join(f"- {line}" for line in d.not_run)
    unconfirmed = "\n".join(f"- {line}" for line in d.unconfirmed)
    return f"""# {d.name}: OpenVINO Model Server repository

Written by Qwen MTP Desktop from `{report.path}`: {d.kind_label}{moe}, {d.layout.upper()} layout,
served by OVMS as pipeline `{d.pipeline_type}` on `{d.device}`. {files}.

{spec}

## Start the server

```sh
{d.docker_command}
```

(From OVMS's speculative-decoding demo. `--rest_workers 2` as that demo advises for speculative
pipelines. For GPU use the `-gpu` image and pass the render device, see OVMS's accelerators guide.)

## Ask it something (OpenAI-compatible API)

```sh
{d.curl_command}
```

`temperature: 0`: MTP in openvino-genai 2026.4 drafts for greedy decoding. OVMS reports token
counts but no speculative-decoding statistics (acceptance), so measure speed client-side.

## Kubernetes

`kserve.yaml` is a KServe ServingRuntime + InferenceService example; upload `{d.name}/` and set
`storageUri`.

## What was and was not run here

{not_run}

## Not confirmed from OVMS's sources

{unconfirmed}

## Sources (openvinotoolkit/model_server, commit {OVMS_SOURCE_COMMIT}, and release notes)

- `graph.pbtxt`: demos/common/export_models/export_model.py (graph template),
  src/llm/llm_calculator.proto (field names and types), src/test/llm/lm_cb_speculative.pbtxt.
- `pipeline_type`: src/llm/servable_initializer.cpp (determinePipelineType).
- `models_path` / `draft_models_path` relative to this folder: src/llm/servable_initializer.cpp
  (parseModelsPath), src/llm/language_model/continuous_batching/servable_initializer.cpp.
- `num_assistant_tokens` in generation_config.json: docs/model_server_rest_api_chat.md.
- `config.json`: export_model.py (add_servable_to_config), docs/mediapipe.md.
- `docker run`: demos/continuous_batching/speculative_decoding/README.md; image tag from the
  OVMS v2026.4.1 release notes (2026.4.0 notes: "preview support for MTP and DFlash").
- `kserve.yaml`: extras/kserve/kserve-openvino.yaml, docs/deploying_server_kubernetes.md.
"""


# --- writing ------------------------------------------------------------------------------------


def _generation_config(model_dir: Path, num_assistant_tokens: int | None) -> str:
    source = model_dir / "generation_config.json"
    data: dict[str, Any] = {}
    if source.is_file():
        try:
            data = read_json_object(
                source, kind=FileKind("generation_config.json", "Repair or re-export the model.")
            )
        except UnsafeFileError as exc:
            raise OvmsDeployError(
                f"{source} cannot be read ({exc.message}).",
                "Repair or re-export the model.",
                code="IR_CORRUPT",
            ) from exc
    if num_assistant_tokens is not None:
        data["num_assistant_tokens"] = num_assistant_tokens
    return json.dumps(data, indent=2) + "\n"


def _write(path: Path, text: str) -> None:
    # Readable by everyone: OVMS's container runs as its own user (runAsUser 5000 in
    # kserve-openvino.yaml) and must read these through a read-only mount. The staging folder
    # makes the whole repository atomic, so a plain write is enough here.
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    path.chmod(0o644)


def _place_file(source: Path, target: Path) -> bool:
    """Hard-link `source` at `target` (True) or copy it when links are impossible (False)."""
    try:
        os.link(source, target)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
            raise
    shutil.copy2(source, target)
    return False


def _model_files(model_dir: Path, sources: list[Path]) -> list[tuple[str, Path]]:
    """(name, real file) for every file the repository takes. A symbolic link is followed only
    while it stays inside the model folder (or, for a Hugging Face cache snapshot, inside its
    repository's `blobs`); one that leads elsewhere is refused, since its target would travel
    with the repository. Sub-folders are not deployed."""
    real_dir = model_dir.resolve()
    roots = [real_dir]
    if real_dir.parent.name == "snapshots":  # <cache>/models--org--name/snapshots/<revision>
        roots.append(real_dir.parent.parent / "blobs")
    files: list[tuple[str, Path]] = []
    for path in sources:
        try:
            real = resolve_inside(path, roots) if path.is_symlink() else path
        except UnsafeFileError as exc:
            raise OvmsDeployError(
                f"{exc.message} Nothing was written.", exc.fix, code=exc.code
            ) from exc
        kind = special_file_kind(real)
        if kind is not None:
            raise OvmsDeployError(
                f"{path} is {kind}, not a regular file; nothing was written.",
                "Repair or re-export the model.",
                code="NOT_REGULAR",
            )
        if real.is_file():
            files.append((path.name, real))
    return files


def _remove_stale_staging(out: Path) -> None:
    """Remove staging folders a killed earlier run left beside OUT: only ours (marked), and only
    when the process that wrote the mark is gone (a run still writing keeps its folder)."""
    for entry in out.parent.glob(f".{out.name}.ovms-partial-*"):
        mark = entry / STAGING_MARK
        if entry.is_symlink() or not entry.is_dir() or not mark.is_file():
            continue
        try:
            pid = int(mark.read_text(encoding="utf-8").split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if not _process_alive(pid):
            shutil.rmtree(entry, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    # psutil, not os.kill(pid, 0): on Windows signal 0 is CTRL_C_EVENT.
    import psutil

    return pid == os.getpid() or psutil.pid_exists(pid)


def _usable_report(model_dir: Path) -> ModelReport:
    report = inspect_model(model_dir, measure_memory=False)
    errors = [d for d in report.diagnostics if d.severity == "error"]
    if errors:
        first = errors[0]
        raise OvmsDeployError(
            f"{model_dir} is not a model the app can read: {first.message}",
            first.fix or "Check it with `qwen-mtp-desktop models inspect`.",
            code="MODEL_NOT_USABLE",
        )
    if report.kind not in ("qwen3_5_dense", "qwen3_5_moe"):
        raise OvmsDeployError(
            f"{model_dir} is not a Qwen3.5 export ({report.kind_label}).",
            "Deploy a folder this app exported (or the demo model).",
            code="MODEL_NOT_USABLE",
        )
    return report


def _layout(model_dir: Path) -> tuple[str, str]:
    # The same test OVMS uses to pick the VLM pipeline (determinePipelineType).
    vlm = (model_dir / "openvino_text_embeddings_model.xml").is_file() and (
        model_dir / "openvino_vision_embeddings_model.bin"
    ).is_file()
    return ("vlm", "VLM_CB") if vlm else ("llm", "LM_CB")


ProgressFn = Callable[[int, int], None]


def deploy_ovms(
    model_dir: Path,
    out: Path,
    options: OvmsOptions | None = None,
    *,
    progress: ProgressFn | None = None,
) -> OvmsDeployment:
    """Write an OVMS model repository for `model_dir` at `out` (see the module docstring).

    Raises OvmsDeployError (a UserFacingError) for every problem the user can act on; on any
    failure nothing is left at `out` and the export is untouched."""
    options = options or OvmsOptions()
    model_dir = Path(model_dir).absolute()
    out = Path(out).absolute()
    if not 1 <= options.num_assistant_tokens <= MAX_ASSISTANT_TOKENS:
        raise OvmsDeployError(
            f"num_assistant_tokens must be 1 to {MAX_ASSISTANT_TOKENS}, "
            f"got {options.num_assistant_tokens}.",
            "1 to 3 pays off on CPU (see the benchmark).",
            code="BAD_OPTION",
        )
    if options.device not in DEVICES:
        raise OvmsDeployError(
            f"Unknown device {options.device!r}.",
            f"Use one of {', '.join(DEVICES)}.",
            code="BAD_OPTION",
        )
    if not model_dir.is_dir():
        raise OvmsDeployError(
            f"{model_dir} is not a folder.",
            "Name an exported model folder.",
            code="MODEL_NOT_USABLE",
        )
    name = check_name(options.name) if options.name else default_name(model_dir)
    report = _usable_report(model_dir)
    _check_out(out, model_dir)
    layout, pipeline_type = _layout(model_dir)
    mtp = report.mtp_usable
    deployment = OvmsDeployment(
        out=out,
        name=name,
        servable_dir=out / name,
        layout=layout,
        pipeline_type=pipeline_type,
        kind_label=report.kind_label,
        moe=report.kind == "qwen3_5_moe",
        mtp=mtp,
        num_assistant_tokens=options.num_assistant_tokens if mtp else None,
        device=options.device,
        docker_command=docker_command(out, name, options.device),
        curl_command=curl_command(name),
    )
    deployment.not_run = [
        "OpenVINO Model Server itself: it cannot run on this machine (no Docker / OVMS here). "
        "The docker, curl and Kubernetes lines are untested.",
        "Checked here: the model folder was inspected with the app's checks. The app's tests "
        "check these generated files field by field against OVMS's documented format and load "
        "such a repository with the openvino-genai calls OVMS's source makes "
        "(ContinuousBatchingPipeline with the draft model from draft_models_path).",
    ]
    deployment.unconfirmed = [
        "An MTP-specific graph option. OVMS's LLMCalculatorOptions (as read) has none; OVMS "
        "2026.4 announces preview MTP support (PR #4498), which may add one. This graph relies on "
        "openvino-genai detecting the MTP head in the draft folder, as 2026.4.1 does here.",
        "MTP with VLM_CB in OVMS (the continuous-batching initializer attaches the draft model "
        "for both LM_CB and VLM_CB in the source read).",
    ]
    if deployment.moe:
        deployment.unconfirmed.append(
            "MTP on a mixture-of-experts model in OVMS (its EAGLE3 demo lists MoE as "
            "unsupported; nothing is said about MTP)."
        )

    sources = [
        p
        for p in sorted(model_dir.iterdir())
        if p.name not in _GENERATED and not p.name.startswith(".")
    ]
    files = _model_files(model_dir, sources)
    total = sum(real.stat().st_size for _name, real in files)
    deployment.total_bytes = total

    _remove_stale_staging(out)
    staging = out.parent / f".{out.name}.ovms-partial-{secrets.token_hex(4)}"
    try:
        staging.mkdir()
        (staging / STAGING_MARK).write_text(
            f"{os.getpid()} Qwen MTP Desktop: incomplete OVMS repository\n", encoding="utf-8"
        )
        servable = staging / name
        servable.mkdir()
        done = 0
        for file_name, real in files:
            if _place_file(real, servable / file_name):
                deployment.linked_files += 1
            else:
                deployment.copied_files += 1
            done += real.stat().st_size
            if progress is not None:
                progress(done, total)
        _write(
            servable / "generation_config.json",
            _generation_config(model_dir, deployment.num_assistant_tokens),
        )
        _write(
            servable / "graph.pbtxt",
            graph_pbtxt(pipeline_type=pipeline_type, device=options.device, mtp=mtp),
        )
        _write(staging / "config.json", config_json(name))
        _write(staging / "kserve.yaml", kserve_yaml(name, options.device))
        _write(staging / "README.md", _readme(deployment, report))
        (staging / STAGING_MARK).unlink()
        _move_into_place(staging, out)
    except BaseException as exc:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise OvmsDeployError(
                f"Writing the OVMS repository beside {out} failed ({exc.strerror or exc}); "
                "nothing was left behind.",
                "Check free space and the folder's permissions.",
                code="WRITE_FAILED",
            ) from exc
        raise
    return deployment


def _move_into_place(staging: Path, out: Path) -> None:
    try:
        # rename(2) replaces only an empty folder, so a folder the user filled meanwhile
        # makes this fail instead of losing anything.
        staging.rename(out)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            raise OvmsDeployError(
                f"The output folder {out} was filled while writing; nothing was replaced.",
                "Name a new folder.",
                code="OUT_NOT_EMPTY",
            ) from exc
        raise OvmsDeployError(
            f"The repository could not be moved to {out} ({exc.strerror or exc}).",
            "Check the folder's permissions and free space.",
            code="WRITE_FAILED",
        ) from exc
