"""An image named by path is served only from its session's own scratchpad: every way out of
it (``..``, an absolute path elsewhere, a symlink, a control character) is refused (ADR 0056)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.service.edge.errors import Forbidden
from pentrace.service.web.media import scratchpad_file

SID = "session-2026-12-01-10-00-00-0123abcd"


@pytest.fixture
def place(tmp_path: Path) -> tuple[DataRoot, SessionRef, Path]:
    root = DataRoot(tmp_path / "data")
    ref = SessionRef("proj", "agent", SID, ())
    scratchpad = root.scratchpad_dir("proj", "agent", SID)
    (scratchpad / "pasted").mkdir(parents=True)
    (scratchpad / "pasted" / "a.png").write_bytes(b"x")
    (tmp_path / "elsewhere.png").write_bytes(b"x")
    (scratchpad / "pasted" / "link.png").symlink_to(tmp_path / "elsewhere.png")
    return root, ref, scratchpad


@pytest.mark.parametrize(
    "address",
    [
        "pasted/a.png",
        f"/home/someone/other-host/data/proj/agents/agent/scratchpad/{SID}/pasted/a.png",
    ],
)
def test_a_path_in_the_scratchpad_from_any_host_names_the_file_here(
    place: tuple[DataRoot, SessionRef, Path], address: str
) -> None:
    root, ref, scratchpad = place
    assert scratchpad_file(root, ref, address, "here") == scratchpad / "pasted" / "a.png"


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("/etc/passwd", "outside the session's scratchpad"),
        ("../../../../etc/passwd", "leaves the session's scratchpad"),
        (f"/x/scratchpad/{SID}/../../../etc/passwd", "leaves the session's scratchpad"),
        (f"/x/scratchpad/{SID}/pasted/../../../a.png", "leaves the session's scratchpad"),
        ("pasted\\..\\..\\..\\etc\\passwd", "leaves the session's scratchpad"),
        ("pasted/a.png\x00.txt", "leaves the session's scratchpad"),
        (f"/x/scratchpad/{SID}/", "leaves the session's scratchpad"),
        ("pasted/link.png", "goes through a symlink"),
        ("/x/scratchpad/other-session/pasted/a.png", "outside the session's scratchpad"),
    ],
)
def test_every_way_out_of_the_scratchpad_is_refused(
    place: tuple[DataRoot, SessionRef, Path], address: str, why: str
) -> None:
    root, ref, _scratchpad = place
    with pytest.raises(Forbidden, match=f"record 3: .*{why}"):
        scratchpad_file(root, ref, address, "record 3")


def test_a_scratchpad_that_is_itself_a_symlink_is_refused(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "data")
    scratchpad = root.scratchpad_dir("proj", "agent", SID)
    scratchpad.parent.mkdir(parents=True)
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.png").write_bytes(b"x")
    scratchpad.symlink_to(tmp_path / "real")
    with pytest.raises(Forbidden, match="symlink"):
        scratchpad_file(root, SessionRef("proj", "agent", SID, ()), "a.png", "here")
