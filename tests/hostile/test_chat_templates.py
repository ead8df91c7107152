"""Class 4: chat templates are bounded in time, depth and output size.

Hypothesis composes templates from hostile building blocks (self- and mutual recursion,
nested loops, string repetition and doubling, wide filters and format widths, huge output)
mixed with ordinary template text. The guard must return a prompt within its limits or
raise CHAT_TEMPLATE, in bounded time, under a 2 GB address-space limit. Then the real engine:
a model whose template recurses gets a CHAT_TEMPLATE error instead of a native crash, and
`models inspect` reports a template exactly when the runtime has one.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.isolation import run_isolated
from tests.reliability import figures

EXAMPLES = 150

_BLOCKS = [
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(1) }}",
    "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}x{% endif %}{% endmacro %}{{ f(N) }}",
    "{% for a in range(N) %}{% for b in range(N) %}{% endfor %}{% endfor %}",
    "{% for a in range(N) %}{% for b in range(N) %}ab{% endfor %}{% endfor %}",
    "{{ 'x' * N }}",
    "{{ N * 'ab' }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(N) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{{ 'x'|center(N) }}",
    "{{ 'x'|indent(N) }}",
    "{{ 'x'.ljust(N) }}",
    "{{ '%*d' % (N, 1) }}",
    "{{ ('%' ~ N ~ 'd') % 1 }}",
    "{{ '{:>N}'.format(1) }}",
    "{{ [1] * N }}",
    "{{ messages|tojson }}",
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
    "{{ raise_exception('no') }}",
    "{{ 2 ** N }}",
    "{% for m in messages * N %}{{ m.content }}{% endfor %}",
]


@st.composite
def hostile_template(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(st.sampled_from(_BLOCKS), min_size=1, max_size=4))
    size = draw(st.sampled_from([3, 30, 1000, 100_000, 10**7, 10**9, 10**15]))
    filler = draw(st.text(alphabet="abc \n{}%#", max_size=20)).replace("{", "(").replace("}", ")")
    return filler.join(b.replace("N", str(size)) for b in blocks)


def template_case(examples: int) -> dict[str, Any]:
    """Runs in the child: every template renders within limits or raises CHAT_TEMPLATE."""
    from qwen_mtp_desktop.core.prompt.template import (
        MAX_OUTPUT_CHARS,
        TIME_LIMIT_S,
        ChatTemplateError,
        TemplateGuard,
    )

    counts = {"tried": 0, "refused": 0, "rendered": 0}
    slowest = 0.0
    messages = [{"role": "user", "content": "hello " * 50}, {"role": "assistant", "content": "hi"}]

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(template=hostile_template())
    def case(template: str) -> None:
        nonlocal slowest
        counts["tried"] += 1
        started = time.perf_counter()
        try:
            out = TemplateGuard(template).render(messages, extra_context={"enable_thinking": True})
        except ChatTemplateError as exc:
            assert exc.code == "CHAT_TEMPLATE" and exc.message
            counts["refused"] += 1
        else:
            assert len(out) <= MAX_OUTPUT_CHARS
            counts["rendered"] += 1
        elapsed = time.perf_counter() - started
        slowest = max(slowest, elapsed)
        assert elapsed < TIME_LIMIT_S + 1.5, f"{elapsed:.1f} s for {template[:200]!r}"

    case()
    return {**counts, "slowest_s": round(slowest, 2)}


def engine_case(model: str) -> dict[str, Any]:
    """Runs in the child: a recursive template must give CHAT_TEMPLATE, not SIGSEGV."""
    from qwen_mtp_desktop.core.engine import Engine, EngineError, LoadOptions, Message

    engine = Engine()
    engine.load(Path(model), LoadOptions(mtp=False))
    started = time.perf_counter()
    try:
        engine.generate([Message("user", "hi")])
    except EngineError as exc:
        return {"code": exc.code, "message": exc.message, "seconds": time.perf_counter() - started}
    finally:
        engine.unload()
    return {"code": None}


def _strip_rt_template(model: Path) -> None:
    xml = model / "openvino_tokenizer.xml"
    text = xml.read_text(encoding="utf-8")
    xml.write_text(re.sub(r'<chat_template value="[^"]*"\s*/>', "", text), encoding="utf-8")


@pytest.mark.parametrize(
    "template",
    ["{{ '{:>1000000000}'.format(1) }}", "{{ '{x:>1000000000}'.format_map({'x': 1}) }}"],
)
def test_a_huge_format_width_is_refused_before_it_allocates(template: str) -> None:
    """The format string is checked when the method is looked up (Jinja wraps `str.format`,
    so a check at the call saw no string): refused for its width, not for a 1 GB result."""
    from qwen_mtp_desktop.core.prompt.template import ChatTemplateError, TemplateGuard

    with pytest.raises(ChatTemplateError) as caught:
        TemplateGuard(template).render([{"role": "user", "content": "hi"}])
    assert caught.value.code == "CHAT_TEMPLATE"
    assert "a format width of millions of characters" in caught.value.message


class TestChatTemplatesBounded:
    @pytest.mark.subprocess
    def test_hostile_templates_are_bounded(self) -> None:
        started = time.perf_counter()
        result = run_isolated(
            "tests.hostile.test_chat_templates:template_case",
            timeout_s=EXAMPLES * 5 + 120,
            memory_mb=2048,
            limit="as",
            examples=EXAMPLES,
        )
        assert result["tried"] >= EXAMPLES * 0.9
        assert result["refused"] > 0 and result["rendered"] > 0
        figures.record(
            "hostile",
            template_inputs=result["tried"],
            template_refused=result["refused"],
            template_slowest_s=result["slowest_s"],
            template_suite_s=round(time.perf_counter() - started, 1),
            template_crashes=0,
            template_hangs=0,
        )

    @pytest.mark.subprocess
    def test_recursive_template_is_an_error_not_a_crash(self, demo_copy: Path) -> None:
        _strip_rt_template(demo_copy)
        (demo_copy / "chat_template.jinja").write_text(
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", encoding="utf-8"
        )
        result = run_isolated(
            "tests.hostile.test_chat_templates:engine_case",
            timeout_s=300,
            memory_mb=8192,
            model=str(demo_copy),
        )
        assert result["code"] == "CHAT_TEMPLATE"
        assert "levels deep" in result["message"]
        assert result["seconds"] < 3

    def test_inspect_agrees_with_the_runtime(self, demo_copy: Path, tmp_path: Path) -> None:
        """For each way a template can be present or broken, `models inspect` says "has a
        template" exactly when the runtime's tokenizer loads with a non-blank one."""
        import openvino_genai

        from qwen_mtp_desktop.core.models.folders.inspection import inspect_model

        variants = {
            "ir_only": (True, None),
            "ir_and_side": (True, b"SIDE {{ messages[0].content }}"),
            "side_only": (False, b"{{ messages[0].content }}"),
            "side_empty": (False, b""),
            "side_blank": (False, b"  \n"),
            "side_not_utf8": (False, b"\xff\xfe{{ x }}"),
            "side_folder": (False, "folder"),
            "none": (False, None),
        }
        agreed = 0
        for name, (keep_ir, side) in variants.items():
            folder = tmp_path / name
            shutil.copytree(demo_copy, folder, symlinks=True)
            if not keep_ir:
                _strip_rt_template(folder)
            (folder / "chat_template.jinja").unlink()
            if side == "folder":
                (folder / "chat_template.jinja").mkdir()
            elif isinstance(side, bytes):
                (folder / "chat_template.jinja").write_bytes(side)
            try:
                runtime = bool(openvino_genai.Tokenizer(str(folder)).chat_template.strip())
            except Exception:
                runtime = False  # the tokenizer does not even load
            report = inspect_model(folder)
            assert report.chat_template == runtime, name
            if not runtime and side is not None and keep_ir is False:
                codes = report.codes()
                assert "CHAT_TEMPLATE" in codes or "NO_CHAT_TEMPLATE" in codes, (name, codes)
            agreed += 1
        figures.record("hostile", template_inspect_variants_agreeing=agreed)
