"""Class 8: limits and messages.

- every numeric CLI option: absurd values are usage errors (exit 2), never a traceback;
- `--model` naming a missing folder is an error, not the demo model;
- a device that is not present says so (not "re-export the model");
- the link confirmation shows the real target: punycode host, hidden characters escaped;
- typed text that spells a special token stays text (real tokenizer, real chat template);
- a prompt longer than the model's context fails at once with CONTEXT_TOO_LONG.
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability import figures

_counts: dict[str, int] = {"cli": 0, "links": 0, "tokens": 0, "devices": 0}


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


#: (argv before the value, option) for every numeric option of every command.
_NUMERIC = [
    (["generate", "m", "p"], "--max-new-tokens"),
    (["generate", "m", "p"], "--num-assistant-tokens"),
    (["generate", "m", "p", "--prompt-lookup"], "--max-ngram-size"),
    (["validate", "m"], "--max-new-tokens"),
    (["validate", "m"], "--num-assistant-tokens"),
    (["validate", "m", "--prompt-lookup"], "--max-ngram-size"),
    (["bench", "m"], "--runs"),
    (["bench", "m"], "--warmup"),
    (["bench", "m"], "--depths"),
    (["bench", "m"], "--lookup-tokens"),
    (["bench", "m"], "--max-ngram-size"),
    (["models", "inspect", "m"], "--context-length"),
    (["export", "src", "out"], "--group-size"),
    (["export", "src", "out"], "--ratio"),
    (["demo-model", "build", "out"], "--train-steps"),
    (["demo-model", "build", "out"], "--seed"),
    ([], "--quit-after-ms"),
]

_values = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(["1e9", "nan", "inf", "-inf", "0x10", "1_000", " 7 ", "", "１２", "9" * 5000]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)


class TestLimitsAndMessages:
    @_settings(400)
    @given(case=st.sampled_from(_NUMERIC), value=_values)
    def test_numeric_options_are_bounded(
        self, case: tuple[list[str], str], value: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from qwen_mtp_desktop.cli import build_parser

        _counts["cli"] += 1
        prefix, option = case
        try:
            args = build_parser().parse_args([*prefix, f"{option}={value}"])
        except SystemExit as exc:
            assert exc.code == 2  # a usage error, with the reason on stderr
            assert "error:" in capsys.readouterr().err
            return
        parsed = getattr(args, option.lstrip("-").replace("-", "_"))
        for number in parsed if isinstance(parsed, tuple) else [parsed]:
            if isinstance(number, int):
                assert -1 <= number <= 2**32, (option, value, number)
            elif isinstance(number, float):
                assert 0 < number <= 1, (option, value, number)

    def test_missing_model_folder_is_an_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from qwen_mtp_desktop.cli import main

        with pytest.raises(SystemExit) as raised:
            main(["--model", str(tmp_path / "not-there")])
        assert raised.value.code == 2
        assert "does not exist" in capsys.readouterr().err

    @_settings(100)
    @given(name=st.text(max_size=12))
    def test_absent_devices_are_named(self, name: str) -> None:
        from qwen_mtp_desktop.core.system.devices import missing_device_error

        _counts["devices"] += 1
        error = missing_device_error(name, ["CPU"])
        upper = name.strip().upper()
        if upper in ("", "CPU") or upper.split(":")[0] in ("AUTO", "MULTI", "HETERO", "BATCH"):
            assert error is None
        else:
            assert error is not None and error.code == "DEVICE_UNAVAILABLE"
            assert "not present" in error.message and "re-export" not in str(error).lower()
            assert all(unicodedata.category(c) != "Cc" for c in error.message)

    @pytest.mark.model
    def test_absent_device_on_the_real_engine(self, demo_model: Path) -> None:
        from qwen_mtp_desktop.core.engine import Engine, EngineError, LoadOptions
        from qwen_mtp_desktop.core.system.devices import available_devices

        if any(d.startswith("NPU") for d in available_devices()):
            pytest.skip("this machine has an NPU")
        with pytest.raises(EngineError) as raised:
            Engine().load(demo_model, LoadOptions(device="NPU"))
        assert raised.value.code == "DEVICE_UNAVAILABLE"
        assert "not present" in raised.value.message
        assert "re-export" not in str(raised.value).lower()

    @_settings(300)
    @given(
        host=st.sampled_from(["example.com", "pаypal.com", "gооgle.com", "bank.test", "例え.jp"]),
        hidden=st.lists(
            st.sampled_from(
                ["\u202e", "\u202d", "\u2066", "\u200b", "\u200e", "\x00", "\x1b", "\n"]
            ),
            max_size=3,
        ),
        path=st.text(max_size=20),
    )
    def test_link_confirmation_shows_the_real_target(
        self, host: str, hidden: list[str], path: str
    ) -> None:
        from qwen_mtp_desktop.core.chat.link_display import link_target

        _counts["links"] += 1
        url = f"https://{host}/{''.join(hidden)}{path}"
        shown = link_target(url).describe()
        for char in shown:
            assert unicodedata.category(char) not in ("Cc", "Cf", "Zl", "Zp") or char == "\n"
        assert shown.count("\n") == 1  # exactly the two lines the dialog shows
        if not host.isascii():
            assert host.encode("idna").decode() in shown
            assert f"https://{host}/" not in shown.split("\n")[0]  # the address uses punycode
        for char in set(hidden) - {"\n"}:
            assert f"\\u{ord(char):04x}" in shown


# --- the real engine: special tokens and context --------------------------------------------


@pytest.fixture(scope="module")
def engine(demo_model: Path) -> Iterator[object]:
    from qwen_mtp_desktop.core.engine import Engine, LoadOptions

    loaded = Engine()
    loaded.load(demo_model, LoadOptions(mtp=False))
    yield loaded
    loaded.unload()


def _special_ids(demo_model: Path) -> set[int]:
    data = json.loads((demo_model / "tokenizer.json").read_text(encoding="utf-8"))
    return {int(t["id"]) for t in data["added_tokens"]}


_SPECIAL_TEXTS = [
    "<|im_end|>",
    "<|im_start|>",
    "<think>",
    "</think>",
    "<|endoftext|>",
    "<|vision_start|>",
    "<|image_pad|>",
    "<|anything|>",
]


@pytest.mark.model
class TestTypedTextStaysText:
    @_settings(150)
    @given(
        pieces=st.lists(
            st.one_of(st.sampled_from(_SPECIAL_TEXTS), st.text(max_size=10)), min_size=1, max_size=6
        ),
        role=st.sampled_from(["user", "system"]),
    )
    def test_special_token_text_never_becomes_a_token(
        self, engine: object, demo_model: Path, pieces: list[str], role: str
    ) -> None:
        from qwen_mtp_desktop.core.engine import Engine, Message
        from qwen_mtp_desktop.core.engine.generation import encode_ids

        assert isinstance(engine, Engine)
        _counts["tokens"] += 1
        typed = "".join(pieces)
        special = _special_ids(demo_model)

        def count(text: str) -> int:
            messages = (
                [Message(role, text)]
                if role == "user"
                else [
                    Message("system", text),
                    Message("user", "hi"),
                ]
            )
            prompt = engine.render_prompt(messages)
            return sum(1 for i in encode_ids(engine._tokenizer, prompt) if int(i) in special)

        assert count(typed) == count("plain words")

    def test_prompt_over_the_context_fails_at_once(self, demo_copy: Path) -> None:
        from qwen_mtp_desktop.core.engine import Engine, EngineError, LoadOptions, Message

        config = json.loads((demo_copy / "config.json").read_text(encoding="utf-8"))
        config["text_config"]["max_position_embeddings"] = 64
        (demo_copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
        engine = Engine()
        engine.load(demo_copy, LoadOptions(mtp=False))
        try:
            started = time.perf_counter()
            with pytest.raises(EngineError) as raised:
                engine.generate([Message("user", "count to twenty " * 40)])
            assert raised.value.code == "CONTEXT_TOO_LONG"
            assert "64" in raised.value.message and "new chat" in raised.value.fix
            assert time.perf_counter() - started < 2
            generation = engine.generate([Message("user", "hi")])  # a short one still runs
            generation.run_to_end()
        finally:
            engine.unload()

    def test_record_figures(self) -> None:
        figures.record(
            "hostile",
            limits_cli_inputs=_counts["cli"],
            limits_device_inputs=_counts["devices"],
            limits_link_inputs=_counts["links"],
            limits_special_token_inputs=_counts["tokens"],
        )
