"""Damage a real model export the ways disks, copies and people do (hypothesis strategies)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

#: The files of an export that matter to the runtime, by kind.
IR_STEMS = (
    "openvino_language_model",
    "openvino_text_embeddings_model",
    "openvino_mtp_model",
    "openvino_tokenizer",
    "openvino_detokenizer",
    "openvino_vision_embeddings_model",
    "openvino_vision_embeddings_merger_model",
    "openvino_vision_embeddings_pos_model",
)
IR_FILES = tuple(f"{stem}{ext}" for stem in IR_STEMS for ext in (".xml", ".bin"))
JSON_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json")
MANIFEST = "qwen_mtp_export.json"

KINDS = ("truncate", "delete", "corrupt", "garble_xml", "swap", "dir_in_place", "link_loop")


@dataclass(frozen=True)
class Mutation:
    kind: str
    target: str
    #: truncate: fraction kept; corrupt / garble: position as a fraction of the file.
    where: float = 0.0
    payload: bytes = b""
    other: str = ""

    def describe(self) -> str:
        extra = f" <-> {self.other}" if self.other else ""
        return f"{self.kind} {self.target}{extra} @{self.where:.3f}"

    def files(self) -> tuple[str, ...]:
        return (self.target, self.other) if self.other else (self.target,)


XML_JUNK = (
    b"<<",
    b"</layer>",
    b"<layer id='x' type='Const'><data offset='-5' size='zz'/></layer>",
    b"&undefined;",
    b"\x00\xff\xfe",
    b"<!DOCTYPE net [<!ENTITY a 'aaaa'>]>",
    b"]]>",
    b"<data element_type='f32' shape='99999999999,99999999999' offset='0' size='8'/>",
)


@st.composite
def mutations(draw: st.DrawFn, *, kinds: tuple[str, ...] = KINDS) -> Mutation:
    kind = draw(st.sampled_from(kinds))
    if kind == "garble_xml":
        target = draw(st.sampled_from([f for f in IR_FILES if f.endswith(".xml")]))
        return Mutation(kind, target, draw(st.floats(0.0, 1.0)), draw(st.sampled_from(XML_JUNK)))
    if kind == "swap":
        a, b = draw(
            st.lists(st.sampled_from(IR_FILES + JSON_FILES), min_size=2, max_size=2, unique=True)
        )
        return Mutation(kind, a, other=b)
    target = draw(st.sampled_from(IR_FILES + JSON_FILES + (MANIFEST,)))
    if kind == "truncate":
        return Mutation(kind, target, draw(st.floats(0.0, 0.999)))
    if kind == "corrupt":
        if target == MANIFEST:  # a flipped digit in a recorded duration changes nothing
            target = "config.json"
        payload = draw(st.binary(min_size=1, max_size=16))
        return Mutation(kind, target, draw(st.floats(0.0, 1.0)), payload)
    return Mutation(kind, target)


def apply(folder: Path, mutation: Mutation) -> bool:
    """Damage `folder`; False when the mutation happens to change nothing."""
    path = folder / mutation.target
    if not path.is_file() or path.is_symlink():
        return False  # an earlier mutation already took it away
    data = path.read_bytes()
    if mutation.kind == "truncate":
        keep = int(len(data) * mutation.where)
        path.write_bytes(data[:keep])
        return keep < len(data)
    if mutation.kind == "delete":
        path.unlink()
        return True
    if mutation.kind in ("corrupt", "garble_xml"):
        at = min(int(len(data) * mutation.where), len(data))
        if mutation.kind == "corrupt":
            new = data[:at] + mutation.payload + data[at + len(mutation.payload) :]
        else:
            new = data[:at] + mutation.payload + data[at:]
        path.write_bytes(new)
        return new != data
    if mutation.kind == "swap":
        other = folder / mutation.other
        if not other.is_file() or other.is_symlink():
            return False
        other_data = other.read_bytes()
        if other_data == data:
            return False
        path.write_bytes(other_data)
        other.write_bytes(data)
        return True
    if mutation.kind == "dir_in_place":
        path.unlink()
        path.mkdir()
        (path / "stray.txt").write_text("a folder where a file should be")
        return True
    if mutation.kind == "link_loop":
        path.unlink()
        path.symlink_to(path.name)  # a link to itself
        return True
    raise AssertionError(mutation.kind)


def fresh_copy(source: Path, target: Path) -> Path:
    if target.exists() or target.is_symlink():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return target


def damaged_files(original: Path, folder: Path) -> list[str]:
    """The files of `original` that are gone, replaced or different in `folder`."""
    out = []
    for source in sorted(original.iterdir()):
        copy = folder / source.name
        if copy.is_symlink() or not copy.is_file() or copy.read_bytes() != source.read_bytes():
            out.append(source.name)
    return out
