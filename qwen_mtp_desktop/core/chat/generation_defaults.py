"""The model's own sampling defaults, from its `generation_config.json` (Qwen ships the values it
recommends there): what a chat decodes with until the user changes a sampling setting.

The file comes with a downloaded model, so it is untrusted: it is read bounded (size, depth,
numbers; core.files.safe_files), each value is checked against the range the chat's settings accept,
and whatever is ignored is said in a note the chat shows; nothing in it can make a chat fail.

Hugging Face's meaning is kept: without `"do_sample": true` a model decodes greedily, whatever
temperature it names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.core.decoding.method import Sampling
from qwen_mtp_desktop.core.files.safe_files import FileKind, UnsafeFileError, read_json_object

FILE_NAME = "generation_config.json"
#: A real generation_config.json is well under 1 KB.
MAX_BYTES = 64 * 1024
_KIND = FileKind(
    f"The model's {FILE_NAME}",
    "The chat uses its own sampling settings; fix or delete the file to use the model's.",
)

#: What the chat's settings panel can hold, so a default is shown as it runs: (low, high,
#: whether low itself is allowed, words for the range).
LIMITS: dict[str, tuple[float, float, bool, str]] = {
    "temperature": (0.0, 2.0, True, "0 to 2"),
    "top_p": (0.0, 1.0, False, "above 0 and at most 1"),
    "top_k": (0, 1000, True, "a whole number from 0 to 1000"),
    "repetition_penalty": (0.5, 2.0, True, "0.5 to 2"),
    "presence_penalty": (-2.0, 2.0, True, "-2 to 2"),
}
#: Keys that mean sampling to Hugging Face but that the chat has no setting for.
_UNUSED = ("min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "frequency_penalty")


@dataclass(frozen=True)
class ModelSampling:
    """The model's sampling defaults (None: its folder names none the chat can use) and what
    was ignored, in words."""

    sampling: Sampling | None
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """ "the model's own (temperature 0.7, top-p 0.8, top-k 20)", or "" without defaults."""
        if self.sampling is None:
            return ""
        return f"the model's own ({self.sampling.describe()})"


def _checked(name: str, value: object, notes: list[str]) -> float | None:
    """`value` if it is a number within the chat's range for `name` (top_k: a whole number),
    else None with a note."""
    low, high, with_low, allowed = LIMITS[name]
    number: float | None = None
    if not isinstance(value, bool) and isinstance(value, int | float):
        number = float(value)
        if name == "top_k" and not isinstance(value, int):
            number = None
    ok = (
        number is not None
        and math.isfinite(number)
        and (number >= low if with_low else number > low)
        and number <= high
    )
    if not ok:
        shown = repr(value)
        notes.append(
            f"{FILE_NAME}: {name} is {shown[:40]}{'…' if len(shown) > 40 else ''}; "
            f"it must be {allowed}, so it was ignored."
        )
        return None
    return number


def parse_generation_config(raw: Mapping[str, object]) -> ModelSampling:
    """The sampling defaults `raw` (a parsed generation_config.json) names."""
    notes: list[str] = []
    do_sample = raw.get("do_sample")
    if do_sample is not None and not isinstance(do_sample, bool):
        notes.append(f"{FILE_NAME}: do_sample is not true or false, so it was ignored.")
        do_sample = None
    values: dict[str, float] = {}
    for name in LIMITS:
        if name in raw:
            checked = _checked(name, raw[name], notes)
            if checked is not None:
                values[name] = checked
    unused = [key for key in _UNUSED if key in raw]
    if unused:
        notes.append(f"{FILE_NAME}: {', '.join(unused)} has no chat setting and is not used.")
    repetition = values.get("repetition_penalty", 1.0)
    presence = values.get("presence_penalty", 0.0)
    if do_sample is not True or values.get("temperature", 1.0) == 0:
        # Hugging Face decodes greedily unless do_sample is true; penalties still apply.
        if not values and do_sample is None:
            return ModelSampling(None, tuple(notes))
        greedy = Sampling(repetition_penalty=repetition, presence_penalty=presence)
        return ModelSampling(greedy, tuple(notes))
    sampling = Sampling(
        temperature=values.get("temperature", 1.0),
        top_p=values.get("top_p", 1.0),
        top_k=int(values.get("top_k", 50)),  # Hugging Face's default top_k
        repetition_penalty=repetition,
        presence_penalty=presence,
    )
    if sampling.problems():  # cannot happen within LIMITS; never hand on what cannot run
        return ModelSampling(None, (*notes, *sampling.problems()))
    return ModelSampling(sampling, tuple(notes))


def read_generation_defaults(model_dir: Path) -> ModelSampling:
    """The model folder's sampling defaults; no file: none; a damaged file: none, with a note
    that says so (it never raises for what the file holds). Reads the disk: not on the GUI
    thread."""
    path = model_dir / FILE_NAME
    try:
        raw = read_json_object(path, kind=_KIND, max_bytes=MAX_BYTES)
    except FileNotFoundError:
        return ModelSampling(None)
    except UnsafeFileError as exc:
        return ModelSampling(None, (f"{exc.message} The chat's own sampling settings apply.",))
    except (OSError, ValueError, RecursionError) as exc:
        return ModelSampling(
            None,
            (f"{FILE_NAME} could not be read ({exc}); the chat's own sampling settings apply.",),
        )
    return parse_generation_config(raw)
