"""Chat export file names made from hostile titles are valid on every OS and stay in the folder."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.store.chat_file_names import MAX_NAME_BYTES, export_filename

WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]) *(\..*)?$", re.I)

hostile_titles = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from(list('<>:"/\\|?*. -\x00\x1f\u202e\u200b\ud800éあ𝔘'))),
    st.sampled_from(["CON", "con.txt", "LPT1", "COM¹", "nul .", "..", ".", "../../etc/passwd"]),
    st.builds(lambda a, b: a + " " + b, st.sampled_from(["con", "AUX", "com3"]), st.text()),
    st.builds(lambda a, b: a + b, st.sampled_from(["AUX", "Prn", ""]), st.text(max_size=4)),
    st.text(min_size=200, max_size=400),
)


def check_name(name: str, suffix: str) -> None:
    assert name.endswith(suffix)
    stem = name[: -len(suffix)]
    assert stem and stem == stem.strip() and not stem.endswith(".")
    assert not stem.startswith((".", "-"))
    assert not set('<>:"/\\|?*') & set(name)
    assert all(unicodedata.category(c)[0] != "C" for c in name)
    assert not WINDOWS_RESERVED.match(stem) and not WINDOWS_RESERVED.match(name)
    assert len(name.encode("utf-8")) <= MAX_NAME_BYTES
    assert name == unicodedata.normalize("NFC", name)


@settings(max_examples=400, deadline=None)
@given(title=hostile_titles, suffix=st.sampled_from([".md", ".json"]))
def test_any_title_gives_a_valid_name_that_stays_in_the_folder(
    title: str, suffix: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    name = export_filename(title, suffix)
    check_name(name, suffix)
    folder = tmp_path_factory.mktemp("export")
    target = folder / name
    target.write_text("x", encoding="utf-8")
    assert [p.name for p in folder.iterdir()] == [name]  # written where asked, as named
    assert export_filename(name[: -len(suffix)], suffix) == name  # stable


def test_readable_titles_stay_readable() -> None:
    assert export_filename("Count from 1 to 5.", ".md") == "Count from 1 to 5.md"
    assert export_filename("a/b\\c: d?", ".json") == "a b c d.json"
    assert export_filename("../../etc/passwd", ".md") == "etc passwd.md"
    assert export_filename("CON", ".md") == "CON_.md"
    assert export_filename("con.txt", ".md") == "con_.txt.md"
    assert export_filename("nul .. x", ".md") == "nul_ .. x.md"
    assert export_filename("  \u202e\x00 ", ".md") == "chat.md"
    assert export_filename("你好，世界", ".md") == "你好，世界.md"
    long = export_filename("é" * 300, ".md")
    assert long == "é" * ((MAX_NAME_BYTES - 3) // 2) + ".md"
    assert Path(long).name == long
