"""`python -m qwen_mtp_desktop.core.models.export.optimum_cli ARGS`: optimum-cli with telemetry
blocked.

The export subprocess runs through this entry point, so exports stay as private as chat. It adds
two things optimum-cli does not have:

* progress markers: one `[qmtp] {json}` line per stage (loading, converting each submodel,
  tokenizer, compressing each submodel with nncf's percentage, saving), printed from small
  wrappers around optimum-intel / nncf functions. The wrappers are best-effort: if a function
  moved in a future release, the export still runs, only with coarser progress.
* `--mtp-weight-format same|none|int8|int4`: optimum-cli has no per-submodel switch, so the
  export then goes through optimum-intel's own API (`main_export` + `_main_quantize`) with an
  `OVPipelineQuantizationConfig` that names `lm_model` and `mtp_model` separately. "default"
  (or no flag) is plain optimum-cli.

Nothing here is imported by the app process except the constants: heavy imports live inside
functions that only the subprocess calls.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.system.privacy import block_telemetry

#: Prefix of the machine-readable progress lines (the rest of the line is a JSON object).
MARKER = "[qmtp] "
MTP_OPTION = "--mtp-weight-format"
MTP_CHOICES = ("default", "same", "none", "int8", "int4")
#: Keeps the MTP head's RoPE frequencies (a channel of size 1) out of our own MTP compression
#: configs: INT8 would store them with up to 28 % error (RUNTIME-NOTES).
MTP_ROPE_IGNORED_SCOPE: dict[str, Any] = {"patterns": [".*rotary_emb.*"], "validate": False}
#: Small non-LM parts get what optimum-intel 2.2 gives VLM parts by default.
SMALL_PART_CONFIG: dict[str, Any] = {"bits": 8, "sym": True, "weight_only": True}
#: IR file stem -> optimum-intel's OV model name (the keys of a pipeline quantization config).
LANGUAGE_MODEL_STEM = "openvino_language_model"


_emit_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """Print one progress marker line (flushed, so the supervisor sees it at once)."""
    payload = {"event": event, **fields}
    line = MARKER + json.dumps(payload, separators=(",", ":")) + "\n"
    with _emit_lock:  # download threads report concurrently
        sys.stdout.write(line)
        sys.stdout.flush()


def die_with_parent() -> None:
    """Linux: get SIGTERM when the app that started us dies (even by SIGKILL).

    The exporter runs in its own process group so that a cancel reaches all of it; that also
    means nothing would stop it if the app were killed. Elsewhere this is a no-op (the staging
    folder is still removed at the app's next start).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import os
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        parent = os.getppid()
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent or parent == 1:  # the app died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def part_name(path_or_name: str) -> str:
    """'openvino_language_model.xml' / 'lm_model' -> 'language_model'; 'mtp_model' -> 'mtp'."""
    stem = Path(path_or_name).name.removesuffix(".xml")
    stem = stem.removeprefix("openvino_")
    if stem == "lm_model":
        return "language_model"
    if stem.endswith("_model") and stem != "language_model":
        stem = stem.removesuffix("_model")
    return stem


def ov_model_name(xml_name: str) -> str:
    """IR file name -> the name optimum-intel's quantizer uses for it."""
    stem = xml_name.removesuffix(".xml")
    if stem == LANGUAGE_MODEL_STEM:
        return "lm_model"
    return stem.removeprefix("openvino_")


def split_mtp_option(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Remove `--mtp-weight-format X` (or `=X`) from argv; returns (choice, rest)."""
    rest: list[str] = []
    choice = "default"
    args = list(argv)
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == MTP_OPTION:
            if index + 1 >= len(args):
                raise SystemExit(f"{MTP_OPTION} needs a value: {', '.join(MTP_CHOICES)}")
            choice = args[index + 1]
            index += 2
            continue
        if arg.startswith(MTP_OPTION + "="):
            choice = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        index += 1
    if choice not in MTP_CHOICES:
        raise SystemExit(f"{MTP_OPTION} must be one of {', '.join(MTP_CHOICES)}, not {choice!r}")
    return choice, rest


# --- progress hooks (run in the export subprocess only) ------------------------------------


class _Throttle:
    def __init__(self, min_step: float = 0.02, min_seconds: float = 0.5) -> None:
        self.min_step = min_step
        self.min_seconds = min_seconds
        self.last_fraction = -1.0
        self.last_time = 0.0

    def due(self, fraction: float) -> bool:
        now = time.monotonic()
        if (
            fraction >= 1.0
            or fraction - self.last_fraction >= self.min_step
            or now - self.last_time >= self.min_seconds
        ):
            self.last_fraction = fraction
            self.last_time = now
            return True
        return False


_state: dict[str, Any] = {"quantizer_model": None}


def _wrap(module: Any, name: str, make: Callable[[Any], Any]) -> None:
    original = getattr(module, name, None)
    if original is None or getattr(original, "_qmtp_wrapped", False):
        return
    wrapped = make(original)
    wrapped._qmtp_wrapped = True
    setattr(module, name, wrapped)


def install_progress_hooks() -> list[str]:
    """Wrap optimum-intel / nncf functions to print stage markers; returns what was hooked."""
    hooked: list[str] = []
    try:
        from optimum.exporters.openvino import convert

        def make_export(original: Any) -> Any:
            def export(*args: Any, **kwargs: Any) -> Any:
                output = kwargs.get("output", args[2] if len(args) > 2 else "")
                emit("stage", stage="converting", part=part_name(str(output)))
                return original(*args, **kwargs)

            return export

        def make_tokenizer(original: Any) -> Any:
            def export_tokenizer(*args: Any, **kwargs: Any) -> Any:
                emit("stage", stage="tokenizer")
                return original(*args, **kwargs)

            return export_tokenizer

        _wrap(convert, "export", make_export)
        _wrap(convert, "export_tokenizer", make_tokenizer)
        hooked.append("convert")
    except Exception:  # a moved function costs progress detail, never the export
        pass
    try:
        from optimum.exporters.openvino import __main__ as export_main

        def make_quantize(original: Any) -> Any:
            def main_quantize(*args: Any, **kwargs: Any) -> Any:
                emit("stage", stage="compressing")
                return original(*args, **kwargs)

            return main_quantize

        def make_merge(original: Any) -> Any:
            def merge_move(*args: Any, **kwargs: Any) -> Any:
                emit("stage", stage="saving")
                return original(*args, **kwargs)

            return merge_move

        _wrap(export_main, "_main_quantize", make_quantize)
        _wrap(export_main, "_merge_move", make_merge)
        hooked.append("main")
    except Exception:
        pass
    try:
        from optimum.intel.openvino import quantization

        quantizer = quantization.OVQuantizer

        def make_quantize_ovbasemodel(original: Any) -> Any:
            def _quantize_ovbasemodel(self: Any, *args: Any, **kwargs: Any) -> Any:
                _state["quantizer_model"] = self.model
                try:
                    return original(self, *args, **kwargs)
                finally:
                    _state["quantizer_model"] = None

            return _quantize_ovbasemodel

        def make_weight_only(original: Any) -> Any:
            def _weight_only_quantization(model: Any, *args: Any, **kwargs: Any) -> Any:
                emit("stage", stage="compressing", part=_identify(model))
                return original(model, *args, **kwargs)

            return _weight_only_quantization

        _wrap(quantizer, "_quantize_ovbasemodel", make_quantize_ovbasemodel)
        _wrap(quantization, "_weight_only_quantization", make_weight_only)
        hooked.append("quantization")
    except Exception:
        pass
    try:
        from nncf.common.logging import track_progress

        _hook_nncf_track(track_progress.track)
        hooked.append("nncf")
    except Exception:
        pass
    return hooked


def _identify(model: Any) -> str | None:
    """The submodel nncf is about to compress, by identity with the quantizer's models."""
    owner = _state.get("quantizer_model")
    try:
        if owner is not None:
            for name, candidate in owner.ov_models.items():
                if candidate is model:
                    return part_name(name)
        inputs = {name for port in model.inputs for name in port.get_names()}
    except Exception:
        return None
    if {"hidden_states", "inputs_embeds", "beam_idx"} <= inputs:
        return "mtp"
    if {"inputs_embeds", "beam_idx"} <= inputs:
        return "language_model"
    return None


def _hook_nncf_track(track: Any) -> None:
    """nncf draws rich progress bars that print nothing live into a pipe: report fractions."""
    if getattr(track, "_qmtp_wrapped", False):
        return
    original_iter = track.__iter__
    original_update = track.update
    original_enter = track.__enter__

    def fraction_of(self: Any) -> float | None:
        total = self.total if self.total else None
        if total is None and self.sequence is not None and hasattr(self.sequence, "__len__"):
            total = len(self.sequence)
        if not total:
            return None
        return min(1.0, float(self._qmtp_done) / float(total))

    def report(self: Any) -> None:
        fraction = fraction_of(self)
        if fraction is not None and self._qmtp_throttle.due(fraction):
            emit("progress", fraction=round(fraction, 4), label=str(self.description))

    def __enter__(self: Any) -> Any:  # noqa: N807 (replaces the method)
        self._qmtp_done = 0.0
        self._qmtp_throttle = _Throttle()
        return original_enter(self)

    def __iter__(self: Any) -> Any:  # noqa: N807
        weights = self.weights
        for index, item in enumerate(original_iter(self)):
            yield item
            self._qmtp_done += weights[index] if weights is not None else 1
            report(self)

    def update(self: Any, advance: float, **kwargs: Any) -> None:
        original_update(self, advance, **kwargs)
        self._qmtp_done += advance
        report(self)

    track.__enter__ = __enter__
    track.__iter__ = __iter__
    track.update = update
    track._qmtp_wrapped = True


# --- the per-submodel export ---------------------------------------------------------------


def mtp_quantization_config(
    mtp: str, main: dict[str, Any] | None, args: Any
) -> dict[str, Any] | None:
    """The weight-compression config for `mtp_model` (None: leave it uncompressed)."""
    if mtp == "none":
        return None
    if mtp == "same":
        config = dict(main) if main is not None else None
    elif mtp == "int8":
        config = {"bits": 8, "sym": bool(args.sym), "group_size": -1, "ratio": 1.0}
        config["dtype"] = "int8"
    elif main is not None and main.get("bits") == 4:  # int4 over an int4 model: its settings
        config = dict(main)
    else:
        config = {
            "bits": 4,
            "sym": bool(args.sym),
            "group_size": args.group_size or 128,
            "ratio": args.ratio or 1.0,
            "group_size_fallback": args.group_size_fallback or "ignore",
            "dtype": "int4",
        }
    if config is not None:
        config["ignored_scope"] = dict(MTP_ROPE_IGNORED_SCOPE)
    return config


def pipeline_configs(
    xml_names: Sequence[str], main: dict[str, Any] | None, mtp: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """{ov model name: config} for every exported IR that should be compressed."""
    configs: dict[str, dict[str, Any]] = {}
    for xml_name in xml_names:
        name = ov_model_name(xml_name)
        if name in ("tokenizer", "detokenizer"):
            continue
        if name == "lm_model":
            config = main
        elif name == "mtp_model":
            config = mtp
        else:
            config = dict(SMALL_PART_CONFIG) if main is not None else None
        if config is not None:
            configs[name] = config
    return configs


def _export_with_mtp_config(argv: list[str], mtp: str) -> None:
    """optimum-cli's weight-only export, but with the MTP head's own compression config."""
    from argparse import ArgumentParser

    from optimum.commands.export.openvino import (
        no_compression_parameter_provided,
        parse_args_openvino,
        prepare_wc_config,
    )
    from optimum.exporters.openvino.__main__ import _main_quantize, main_export
    from optimum.intel.openvino.configuration import (
        _DEFAULT_4BIT_WQ_CONFIG,
        OVConfig,
        OVPipelineQuantizationConfig,
    )

    if argv[:2] != ["export", "openvino"]:
        raise SystemExit(f"{MTP_OPTION} only works with `export openvino`")
    parser = ArgumentParser(prog="optimum-cli export openvino")
    parse_args_openvino(parser)
    args = parser.parse_args(argv[2:])
    if args.quant_mode is not None:
        raise SystemExit(f"{MTP_OPTION} works with --weight-format, not --quant-mode")
    weight_format = args.weight_format
    main: dict[str, Any] | None = None
    if weight_format in ("int4", "int8"):
        if weight_format == "int4" and no_compression_parameter_provided(args):
            main = dict(_DEFAULT_4BIT_WQ_CONFIG)
        else:
            main = prepare_wc_config(args, _DEFAULT_4BIT_WQ_CONFIG)
        main["dtype"] = weight_format
    elif weight_format not in (None, "fp16", "fp32"):
        raise SystemExit(f"{MTP_OPTION} supports fp16, fp32, int8 and int4, not {weight_format}")
    mtp_config = mtp_quantization_config(mtp, main, args)
    # Like optimum-cli: a compressed export is traced without fp16 weights (compression reads
    # the original precision); an fp16 export keeps fp16 and only the MTP head is compressed.
    if main is not None:
        ov_config = OVConfig(quantization_config=dict(main))
    else:
        ov_config = OVConfig(dtype=weight_format or "fp32")
    output = Path(args.output)
    main_export(
        model_name_or_path=args.model,
        output=output,
        task=args.task,
        framework=args.framework,
        cache_dir=args.cache_dir,
        trust_remote_code=args.trust_remote_code,
        pad_token_id=args.pad_token_id,
        ov_config=ov_config,
        stateful=not args.disable_stateful,
        convert_tokenizer=not args.disable_convert_tokenizer,
        library_name=args.library or "transformers",
        variant=args.variant,
        model_kwargs=args.model_kwargs,
    )
    xml_names = sorted(p.name for p in output.glob("openvino_*.xml"))
    configs = pipeline_configs(xml_names, main, mtp_config)
    emit("plan", quantization={name: _brief(config) for name, config in configs.items()})
    if configs:
        _main_quantize(
            model_name_or_path=args.model,
            task=args.task,
            library_name=args.library or "transformers",
            quantization_config=OVPipelineQuantizationConfig(configs),
            output=output,
            cache_dir=args.cache_dir,
            trust_remote_code=args.trust_remote_code,
            model_kwargs=args.model_kwargs,
        )
    if mtp == "none":
        _mtp_to_fp16(output / "openvino_mtp_model.xml")


def _brief(config: dict[str, Any]) -> str:
    bits = config.get("bits", 8)
    sym = "sym" if config.get("sym") else "asym"
    group = config.get("group_size")
    grouped = f" g{group}" if group and group > 0 and bits == 4 else ""
    return f"int{bits} {sym}{grouped}"


def _mtp_to_fp16(xml_path: Path) -> None:
    """ "none" keeps the MTP head uncompressed in fp16 (a compressed export traces it in fp32)."""
    if not xml_path.is_file():
        return
    import openvino

    emit("stage", stage="saving", part="mtp")
    core = openvino.Core()
    model = core.read_model(str(xml_path))
    tmp = xml_path.with_name(xml_path.stem + ".fp16.xml")
    openvino.save_model(model, str(tmp), compress_to_fp16=True)
    del model
    xml_path.with_suffix(".bin").unlink()
    xml_path.unlink()
    tmp.replace(xml_path)
    tmp.with_suffix(".bin").replace(xml_path.with_suffix(".bin"))


def main(argv: Sequence[str] | None = None) -> int:
    block_telemetry()
    if argv is None:  # run as the export subprocess
        die_with_parent()
        # The app's cancel is SIGINT; a process started from a background shell or some
        # launchers inherits SIGINT ignored, which would leave only the slower SIGTERM.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    mtp, args = split_mtp_option(sys.argv[1:] if argv is None else argv)
    emit("stage", stage="loading")
    try:
        install_progress_hooks()
        if mtp == "default":
            from optimum.commands.optimum_cli import main as optimum_main

            sys.argv = ["optimum-cli", *args]
            optimum_main()
        else:
            _export_with_mtp_config(args, mtp)
    except KeyboardInterrupt:  # the app's cancel (SIGINT): no traceback in the user's log
        emit("cancelled")
        return 130
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
