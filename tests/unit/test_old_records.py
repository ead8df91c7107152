"""What main wrote before DecodingMethod still loads and renders (tests/unit/data/main_records:
real reports, recommendation and acceptance-reference stores and message stats from main at
dd7232b). An existing user's data folder holds these files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.store.records import stats_summary
from qwen_mtp_desktop.core.chat.store.stats import clean_stats, stats_method
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.measure.acceptance_health import (
    load_lookup_references,
    load_reference,
    reference_file,
    save_reference,
)
from qwen_mtp_desktop.core.measure.recommendations import (
    depth_recommendation,
    model_fingerprint,
    recommendations_file,
)
from qwen_mtp_desktop.core.measure.report_markdown import report_markdown
from qwen_mtp_desktop.core.measure.reports import (
    REPORT_SCHEMA_VERSION,
    list_reports,
    load_report,
    reports_dir,
)
from qwen_mtp_desktop.core.measure.verdicts import method_verdict, row_method

DATA = Path(__file__).parent / "data" / "main_records"
MAIN_MODEL = "/work/main/resources/demo-model/openvino"
mtp = DecodingMethod.mtp


def _main(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    for name in ("openvino_language_model", "openvino_mtp_model"):
        (model / f"{name}.xml").write_text("<net/>")
        (model / f"{name}.bin").write_bytes(b"\0" * 16)
    return model


def _saved_report(name: str, model: Path) -> Path:
    """Main's report, as it lies in the data folder's history of `model`."""
    report = _main(name)
    assert report["schema_version"] == 1  # what main writes
    report["model"]["path"] = str(model)
    folder = reports_dir(model)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{report['id']}.json"
    path.write_text(json.dumps(report))
    return path


def _rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [*report["runs"], *report["modes"], *report["comparison"], report["recommendation"]]
    for entry in report["per_set"]:
        rows += [*entry["modes"], entry["winner"]]
    return rows


@pytest.mark.parametrize("name", ["bench_exact_compare.json", "validate_mtp.json"])
def test_a_schema_2_report_names_the_apps_decoder_app(
    tmp_path: Path, app_home: Path, name: str
) -> None:
    """Schema 2 called the app's decoder "fast"; it loads as "app", everything else as it was."""
    model = _model(tmp_path)
    current = load_report(_saved_report(name, model))
    text = json.dumps(current)
    assert '"fast"' not in text
    older = json.loads(
        text.replace('"decoder": "app"', '"decoder": "fast"')
        .replace('"mtp_decoder": "app"', '"mtp_decoder": "fast"')
        .replace('"plain": "app"', '"plain": "fast"')
        .replace('"mtp": "app"', '"mtp": "fast"')
    )
    older["schema_version"] = 2
    assert older != current
    path = reports_dir(model) / f"{current['id']}.json"
    path.write_text(json.dumps(older))
    assert load_report(path) == current


def test_a_bench_report_of_main_loads_in_the_current_shape(tmp_path: Path, app_home: Path) -> None:
    model = _model(tmp_path)
    report = load_report(_saved_report("bench_two_sets.json", model))
    assert report["schema_version"] == REPORT_SCHEMA_VERSION
    for row in _rows(report):
        assert {"mode", "depth"}.isdisjoint(row), row
        row_method(row).check()
    lookup = DecodingMethod.lookup(4, 3)  # "depth" 4, the report's max_ngram_size 3
    assert [(row_method(m), m["decoder"]) for m in report["modes"]] == [
        (PLAIN, "genai"),
        (mtp(1), "app"),
        (mtp(2), "app"),
        (lookup, "genai"),  # its decoder was "lookup": it runs on openvino-genai's pipeline
    ]
    assert [(row_method(m), m["decoder"]) for m in report["comparison"]] == [(PLAIN, "app")]
    assert report["settings"]["lookup"] == lookup.to_record()
    assert "lookup_tokens" not in report["settings"]
    # Main recommended "baseline" (depth None): plain decoding, in the one word.
    assert row_method(report["recommendation"]) == PLAIN
    assert report["recommendation"]["label"] == "plain"
    winners = {e["prompt_set"]: e["winner"] for e in report["per_set"]}
    assert row_method(winners["demo"]) == lookup and row_method(winners["edit"]) == PLAIN
    overall = method_verdict(report)["overall"]
    assert row_method(overall) == lookup and overall["speedup"] == pytest.approx(1.18, abs=0.01)
    # Every row of one run names the method that ran.
    assert {row_method(r) for r in report["runs"]} == {PLAIN, mtp(1), mtp(2), lookup}


def test_main_reports_render_and_list(tmp_path: Path, app_home: Path) -> None:
    model = _model(tmp_path)
    for name in ("bench_two_sets.json", "bench_exact_compare.json"):
        _saved_report(name, model)
    _saved_report("validate_mtp.json", model)
    _saved_report("validate_lookup.json", model)
    entries = list_reports(model)
    assert len(entries) == 4  # none skipped as unreadable
    headlines = {e.headline for e in entries}
    assert "identical 5/5 · MTP n=1 · 98% accepted" in headlines
    assert "identical 4/4 · lookup K=1 · 8% accepted" in headlines
    assert any(h.startswith("best: prompt lookup K=4 (1.18x)") for h in headlines), headlines
    texts = {e.path.name: report_markdown(load_report(e.path)) for e in entries}
    bench = next(t for n, t in texts.items() if "bench" in n and "| Numerics | default |" in t)
    assert "**Recommendation: plain decoding.**" in bench
    assert "## Winner per workload" in bench and "| demo | prompt lookup K=4 |" in bench
    assert "| Method | Decode tok/s |" in bench
    assert any("| MTP n=1 · openvino-genai |" in t for t in texts.values())
    validations = [t for n, t in texts.items() if "validate" in n]
    assert any(t.startswith("# MTP validation") and "MTP n=1)." in t for t in validations)
    assert any(
        t.startswith("# Prompt lookup validation") and "prompt lookup K=1, n-gram 3)." in t
        for t in validations
    )
    for text in texts.values():
        assert "Recommendation: baseline" not in text


def test_main_validations_give_acceptance_references(tmp_path: Path, app_home: Path) -> None:
    model = _model(tmp_path)
    mtp_ref = save_reference(load_report(_saved_report("validate_mtp.json", model)))
    assert mtp_ref is not None and mtp_ref.method == mtp(1)
    assert save_reference(load_report(_saved_report("validate_lookup.json", model))) is None
    assert load_lookup_references(model, "CPU")["list"].method == DecodingMethod.lookup(1, 3)


def test_a_damaged_row_in_an_old_report_is_a_bad_report(tmp_path: Path, app_home: Path) -> None:
    from qwen_mtp_desktop.core.errors import MeasurementError

    model = _model(tmp_path)
    path = _saved_report("bench_two_sets.json", model)
    report = json.loads(path.read_text())
    report["modes"][2]["mode"] = "warp"
    path.write_text(json.dumps(report))
    with pytest.raises(MeasurementError, match="damaged") as caught:
        load_report(path)
    assert caught.value.code == "BAD_REPORT"
    assert list_reports(model) == []  # skipped, not a crash


def _store_file(name: str, model: Path, path: Path) -> None:
    """Main's store file with its entries moved to `model` (whose files they describe)."""
    data = _main(name)
    entries = {}
    for key, entry in data["entries"].items():
        entry["model_path"] = str(model)
        entry["fingerprint"] = model_fingerprint(model)
        entries[key.replace(MAIN_MODEL, str(model.resolve()))] = entry
    data["entries"] = entries
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("name", "start", "label"),
    [("mtp_depth_plain.json", PLAIN, "plain"), ("mtp_depth_mtp.json", mtp(2), "MTP n=2")],
)
def test_main_recommendations_load(
    tmp_path: Path, app_home: Path, name: str, start: DecodingMethod, label: str
) -> None:
    model = _model(tmp_path)
    _store_file(name, model, recommendations_file())
    found = depth_recommendation(model, "CPU")
    assert found is not None and found.start == start and found.label == label


def test_main_acceptance_references_load(tmp_path: Path, app_home: Path) -> None:
    model = _model(tmp_path)
    _store_file("acceptance_reference.json", model, reference_file())
    reference = load_reference(model, "CPU")
    # Main kept no depth with an MTP reference (its first-draft share does not depend on it).
    assert reference is not None and reference.method == mtp(1)
    lookups = load_lookup_references(model, "CPU")
    assert sorted(lookups) == ["demo", "edit", "list"]
    # A benchmark's lookup reference had no n-gram size: the default it ran with.
    assert lookups["demo"].method == DecodingMethod.lookup(4, 3)
    assert lookups["list"].method == DecodingMethod.lookup(1, 3)  # the validation's K=1
    assert lookups["list"].compares_workloads


def test_main_message_stats_read_as_methods(tmp_path: Path) -> None:
    rows = _main("message_stats.json")
    expected = {
        "mtp_fixed": mtp(2),
        "lookup": DecodingMethod.lookup(3, 2),
        "plain": PLAIN,
        "sampled": PLAIN,
        "auto_0": mtp(1),
        "auto_1": PLAIN,
        "auto_2": PLAIN,
    }
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conversation = store.create_conversation("old")
        ids = {}
        for name, row in rows.items():
            store.add_message(conversation.id, "user", name)
            answer = store.begin_assistant_message(conversation.id)
            store.finish_message(answer.id, row, model="demo")
            ids[name] = answer.id
        for name, method in expected.items():
            stats = store.get_message(ids[name]).stats
            assert stats is not None
            assert stats["method"] == method.to_record(), name
            assert {"mode", "num_assistant_tokens", "max_ngram_size"}.isdisjoint(stats)
            assert stats_method(stats) == method
            assert clean_stats(stats) == stats
    assert stats_summary(rows["mtp_fixed"]).startswith("Demo model · CPU · MTP n=2 · ")
    assert " · plain decoding · " in stats_summary(rows["plain"])
    assert "Auto: plain: " in stats_summary(rows["auto_1"])


_values = st.none() | st.booleans() | st.integers(-5, 40) | st.text(max_size=6) | st.floats()
_old_rows = st.dictionaries(
    st.sampled_from(
        ["mode", "num_assistant_tokens", "max_ngram_size", "method", "generated_tokens", "x"]
    ),
    _values
    | st.sampled_from(["baseline", "mtp", "lookup", "plain"])
    | st.builds(lambda m: m.to_record(), st.sampled_from([PLAIN, mtp(3)])),
    max_size=6,
)


@given(_old_rows)
@settings(max_examples=300)
def test_cleaning_any_row_is_stable_and_loses_nothing_it_cannot_read(row: dict[str, Any]) -> None:
    cleaned = clean_stats(dict(row))
    assert clean_stats(dict(cleaned)) == cleaned
    method = stats_method(row)
    assert stats_method(cleaned) == method
    if method is None:  # keys that name no method stay as they were
        for key in ("mode", "num_assistant_tokens", "max_ngram_size"):
            assert cleaned.get(key) == row.get(key)
    else:
        method.check()
        assert cleaned["method"] == method.to_record()


def test_the_recorded_files_are_mains(tmp_path: Path) -> None:
    """The samples are what main wrote, untouched (their README says how they were made)."""
    for name in ("bench_two_sets.json", "validate_lookup.json"):
        assert _main(name)["schema_version"] == 1
    assert _main("mtp_depth_plain.json")["entries"][f"{MAIN_MODEL}::CPU"]["label"] == "baseline"
    assert all("mode" in row for row in _main("message_stats.json").values())
    shutil.rmtree(tmp_path, ignore_errors=True)
