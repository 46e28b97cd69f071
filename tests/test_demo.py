"""The README's demo on a machine without the real datasets: specs that read them are skipped, not failed."""

from __future__ import annotations

import shutil
from pathlib import Path

from dpspec.demo import run

ROOT = Path(__file__).resolve().parents[1]


def test_a_composition_of_parts_reading_absent_data_is_skipped(tmp_path, monkeypatch, capsys):
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(ROOT / "specs" / "adult_statistics.dps", specs)  # parts read adult/; `survey` composes them
    empty = tmp_path / "data"
    empty.mkdir()
    monkeypatch.setenv("DPSPEC_DATA_DIR", str(empty))
    assert run(specs, tmp_path / "out", quiet=True) == 0
    out = capsys.readouterr().out
    assert "adult_statistics.dps: skipped" in out and "1 skipped (data not available)" in out
    assert "✗" not in out


def test_a_real_error_beside_absent_data_still_fails(tmp_path, monkeypatch, capsys):
    specs = tmp_path / "specs"
    specs.mkdir()
    text = (ROOT / "specs" / "adult_statistics.dps").read_text(encoding="utf-8")
    broken = text.replace("parts     [", "parts     [no_such_release, ", 1)
    assert broken != text
    (specs / "broken.dps").write_text(broken, encoding="utf-8")
    empty = tmp_path / "data"
    empty.mkdir()
    monkeypatch.setenv("DPSPEC_DATA_DIR", str(empty))
    assert run(specs, tmp_path / "out", quiet=True) != 0
    assert "✗" in capsys.readouterr().out
