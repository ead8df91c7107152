"""The project's documents hold together: every relative link (and `#anchor` into a Markdown
file) in the README, docs/, benchmarks/README.md and benchmarks/results/ resolves; the README
stays a first screen; every docs page opens with its contents; dated runs live only in
benchmarks/results/, each with its command and machine; and docs/architecture.md states the
import contracts of pyproject.toml and names exactly the modules on disk. (The benchmarks
README's table once linked to a "Multi-turn" section nobody had written.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "qwen_mtp_desktop"
DOCS = sorted((ROOT / "docs").glob("*.md"))
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.md"))
#: Every Markdown file whose links are checked.
LINKED = [
    ROOT / "README.md",
    *DOCS,
    ROOT / "benchmarks" / "README.md",
    *RESULTS,
    ROOT / "packaging" / "README.md",
]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
README_MAX_LINES = 250


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def without_code(text: str) -> str:
    """The text without fenced code blocks and inline code (no headings or links there)."""
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a file's headings (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#+ (.+)$", without_code(text), re.M):
        slug = anchor(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(text: str) -> list[str]:
    """The targets of the Markdown links and images in `text`, outside code."""
    return re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", without_code(text))


def broken_links(path: Path) -> list[str]:
    """The relative links of one file that lead nowhere: a missing file or folder, or an
    anchor that no heading of the Markdown file it points into has."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        file, _, fragment = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            problems.append(f"{target}: no such file or folder")
            continue
        if (
            fragment
            and resolved.suffix == ".md"
            and fragment not in anchors(resolved.read_text(encoding="utf-8"))
        ):
            problems.append(f"{target}: no heading #{fragment}")
    return problems


def test_anchor_follows_github() -> None:
    assert anchor("Sampling exactness and speed") == "sampling-exactness-and-speed"
    why = "why-the-decoding-loop-is-the-apps-own"
    assert anchor("Why the decoding loop is the app's own") == why
    assert anchor("Results: a quiet machine (2026-12-03)") == "results-a-quiet-machine-2026-12-03"
    assert anchor("Qwen3.5-0.8B INT4 (2026-12-04)") == "qwen35-08b-int4-2026-12-04"
    assert anchors("# A\n## A\n```\n# B\n```\n") == {"a", "a-1"}


def test_the_documents_are_found() -> None:
    names = {p.name for p in DOCS}
    assert {"README.md", "user-guide.md", "api-server.md", "architecture.md"} <= names
    assert len(RESULTS) >= 5
    assert sum(len(links(p.read_text(encoding="utf-8"))) for p in LINKED) > 100


@pytest.mark.parametrize("path", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    """The check itself: a missing file, a missing anchor, a missing anchor in another file."""
    (tmp_path / "other.md").write_text("# Other\n## Part two\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n## Here\n[ok](#here) [ok](other.md#part-two) [ok](https://example.org/x)\n"
        "[bad](#nowhere) [bad](missing.md) [bad](other.md#part-three)\n"
        "`[not a link](nowhere.md)`\n",
        encoding="utf-8",
    )
    found = broken_links(page)
    assert len(found) == 3, found
    assert any("#nowhere" in p for p in found) and any("missing.md" in p for p in found)
    assert any("part-three" in p for p in found)


def test_the_readme_is_a_first_screen() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    # The two commands stay the README's setup and test commands.
    block = re.search(r"^```sh\n(.*?)^```", text, re.M | re.S)
    assert block is not None
    assert [line.split()[:2] for line in block.group(1).splitlines()[:2]] == [
        ["make", "run"],
        ["make", "test"],
    ]
    assert re.search(r"!\[[^\]]+\]\(docs/images/[^)]+\.png\)", text), "no screenshot"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_docs_page_opens_with_its_contents(page: Path) -> None:
    """Before its first section, a page lists links to every section (the index: every page)."""
    text = page.read_text(encoding="utf-8")
    head, _, body = without_code(text).partition("\n## ")
    listed = set(re.findall(r"^\s*- \[[^\]]+\]\(([^)]+)\)", head, re.M))
    if page.name == "README.md":
        expected = {p.name for p in DOCS if p.name != "README.md"}
        assert expected <= listed
        return
    assert body, f"{page.name} has no sections"
    sections = {anchor(h) for h in re.findall(r"^## (.+)$", "## " + body, re.M)}
    assert {f"#{s}" for s in sections} <= listed, sorted(sections - {t[1:] for t in listed})


DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


@pytest.mark.parametrize(
    "path",
    [ROOT / "README.md", *DOCS, ROOT / "benchmarks" / "README.md"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_dated_run_outside_the_results(path: Path) -> None:
    """Dates of runs belong to benchmarks/results/ (links into it may name them)."""
    text = re.sub(r"\]\([^)]*\)", "]()", path.read_text(encoding="utf-8"))
    assert DATE.findall(text) == []


@pytest.mark.parametrize(
    "page", [p for p in RESULTS if p.name != "README.md"], ids=lambda p: p.name
)
def test_every_results_page_names_its_commands_and_machine(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "**Command" in text and "**Machine**" in text
    assert DATE.search(text), "a results page is dated"


def _contracts() -> list[dict[str, object]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = data["tool"]["importlinter"]["contracts"]
    return contracts


def _section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _names(text: str) -> list[str]:
    return re.findall(r"`([\w.]+)`", text)


def test_the_architecture_states_the_import_contracts() -> None:
    """docs/architecture.md's "Layers" lists every contract of pyproject.toml, and nothing else."""
    section = _section(ARCHITECTURE.read_text(encoding="utf-8"), "Layers")
    layers_doc = {
        container: [re.sub(r"\s+", "", layer) for layer in rest.rstrip(".").split(";")]
        for container, rest in re.findall(r"^- `([\w.]+)`: (.+)$", section, re.M)
    }
    forbidden_doc = set()
    forbidding = r"^- ((?:`[\w.]+`(?:, )?)+) imports? none of: (.+)$"
    for sources, rest in re.findall(forbidding, section, re.M):
        forbidden_doc.add((frozenset(_names(sources)), frozenset(_names(rest))))
    layers, forbidden, kinds = {}, set(), set()
    for contract in _contracts():
        kinds.add(contract["type"])
        if contract["type"] == "layers":
            containers = contract.get("containers", ["qwen_mtp_desktop"])
            assert isinstance(containers, list) and len(containers) == 1
            names = [
                re.sub(r"\s+", "", str(layer)).replace("qwen_mtp_desktop.", "")
                for layer in contract["layers"]  # type: ignore[attr-defined]
            ]
            layers[containers[0]] = names
        elif contract["type"] == "forbidden":
            forbidden.add(
                (
                    frozenset(contract["source_modules"]),  # type: ignore[arg-type]
                    frozenset(contract["forbidden_modules"]),  # type: ignore[arg-type]
                )
            )
    assert layers and forbidden
    assert layers_doc == layers
    assert forbidden_doc == forbidden
    assert kinds <= {"layers", "forbidden", "acyclic_siblings"}
    if "acyclic_siblings" in kinds:
        assert "No import cycles" in section


def _listed_modules(text: str) -> dict[str, set[str]]:
    """The module listing of docs/architecture.md: {package folder: {module file names}}."""
    block = _section(text, "The code, package by package").split("```", 2)[1]
    listed: dict[str, set[str]] = {}
    package = None
    for line in block.splitlines():
        if match := re.match(r"^(\S+)/(\s|$)", line):
            package = "" if match.group(1) == "qwen_mtp_desktop" else match.group(1)
            listed.setdefault(package, set())
        elif (match := re.match(r"^  (\w+\.py)\s", line)) and package is not None:
            listed[package].add(match.group(1))
    return listed


def test_the_architecture_lists_every_module() -> None:
    """One line per module, per package: a module added, moved or removed must be listed."""
    on_disk: dict[str, set[str]] = {}
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent
        package = folder.relative_to(PACKAGE).as_posix().replace(".", "")
        on_disk[package] = {
            p.name for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
        }
    listed = _listed_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    missing = {k: sorted(v - listed.get(k, set())) for k, v in on_disk.items()}
    extra = {k: sorted(v - on_disk.get(k, set())) for k, v in listed.items()}
    assert {k: v for k, v in missing.items() if v} == {}, "modules not in docs/architecture.md"
    assert {k: v for k, v in extra.items() if v} == {}, "listed modules that do not exist"
    assert set(listed) == set(on_disk)
