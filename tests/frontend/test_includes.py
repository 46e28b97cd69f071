"""`use` includes under hostile file systems: loops, devices, FIFOs, escapes, sizes."""

import os
import signal
import subprocess
import sys

import pytest

import dpspec
from dpspec.parse.includes import load_program
from tests.guards import cpu_budget

REL = 'release r { protect p  mechanism gaussian  sensitivity 1  guarantee dp(epsilon = 1, delta = 1e-6) }\n'


@pytest.fixture
def no_hang():
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("loading the spec blocked"))
    signal.alarm(60)
    yield
    signal.alarm(0)


def rules(prog):
    return [d.rule for d in prog.diagnostics]


def test_a_symlink_loop_is_a_diagnostic(tmp_spec):
    main = tmp_spec('use "loop.dps"\n' + REL)
    (main.parent / "loop.dps").symlink_to(main.parent / "loop.dps")
    prog = load_program(path=main)
    assert rules(prog) == ["DPS004"] and "symbolic link" in prog.diagnostics[0].message
    assert prog.diagnostics[0].span.line == 1 and prog.diagnostics[0].hint


def test_a_cycle_through_a_symlink_is_found_by_real_path(tmp_spec):
    a = tmp_spec('use "alias.dps"\nprivacy p { unit record }\n', "a.dps")
    (a.parent / "alias.dps").symlink_to(a)
    assert rules(load_program(path=a)) == ["DPS005"]


def test_dev_zero_is_never_read_as_an_include(tmp_spec, no_hang):
    main = tmp_spec('use "zero.dps"\n' + REL)
    (main.parent / "zero.dps").symlink_to("/dev/zero")
    with cpu_budget(5, "loading a spec that includes /dev/zero"):
        prog = load_program(path=main)
    assert rules(prog) == ["DPS004"]


def test_a_fifo_include_is_refused_without_blocking(tmp_spec, no_hang):
    main = tmp_spec('use "pipe.dps"\n' + REL)
    os.mkfifo(main.parent / "pipe.dps")
    prog = load_program(path=main)
    assert rules(prog) == ["DPS004"] and "FIFO" in prog.diagnostics[0].message


def test_a_folder_include_is_refused(tmp_spec):
    main = tmp_spec('use "dir.dps"\n' + REL)
    (main.parent / "dir.dps").mkdir()
    assert rules(load_program(path=main)) == ["DPS004"]


@pytest.mark.parametrize("path,reason", [
    ("/etc/passwd.dps", "absolute"), ("../outside.dps", "outside the spec's folder"), ("defs.txt", ".dps"),
    ("a\\\\b.dps", "backslash"), ("", "empty"),
])
def test_includes_stay_inside_the_spec_folder(tmp_path, path, reason):
    (tmp_path / "outside.dps").write_text("privacy p { unit record }\n")
    (tmp_path / "defs.txt").write_text("privacy p { unit record }\n")
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    main = spec_dir / "main.dps"
    main.write_text(f'use "{path}"\n' + REL)
    prog = load_program(path=main)
    assert rules(prog) == ["DPS004"] and reason in prog.diagnostics[0].message, prog.diagnostics
    assert "privacy p" not in repr(prog.diagnostics)


def test_dotdot_inside_the_spec_folder_is_fine(tmp_spec):
    tmp_spec("privacy p { unit record }\n", "shared/people.dps")
    tmp_spec('use "../shared/people.dps"\n', "sub/uses.dps")
    main = tmp_spec('use "sub/uses.dps"\n' + REL)
    spec = dpspec.load(main)
    assert spec.ok, spec.diagnostics


def test_an_oversized_include_is_refused(tmp_spec, monkeypatch):
    main = tmp_spec('use "big.dps"\n' + REL)
    (main.parent / "big.dps").write_text("privacy p { unit record }\n" + "# filler\n" * 2000)
    monkeypatch.setenv("DPSPEC_MAX_SOURCE_BYTES", "5000")
    prog = load_program(path=main)
    assert rules(prog) == ["DPS004"] and "DPSPEC_MAX_SOURCE_BYTES" in prog.diagnostics[0].hint


def test_a_long_include_chain_loads(tmp_spec):
    for i in range(40):
        tmp_spec(f'use "f{i + 1}.dps"\nprivacy p{i} {{ unit record }}\n', f"f{i}.dps")
    tmp_spec("privacy p { unit record }\n", "f40.dps")
    main = tmp_spec('use "f0.dps"\n' + REL)
    spec = dpspec.load(main)
    assert spec.ok and len(spec.ir.units) == 41


def test_too_many_includes(tmp_spec, monkeypatch):
    monkeypatch.setenv("DPSPEC_MAX_INCLUDES", "3")
    for i in range(5):
        tmp_spec(f"privacy p{i} {{ unit record }}\n", f"f{i}.dps")
    main = tmp_spec("".join(f'use "f{i}.dps"\n' for i in range(5)) + REL.replace("protect p", "protect p0"))
    assert "DPS007" in rules(load_program(path=main))


def test_includes_can_be_refused_altogether(tmp_spec):
    tmp_spec("privacy p { unit record }\n", "defs.dps")
    main = tmp_spec('use "defs.dps"\n' + REL)
    prog = load_program(path=main, allow_includes=False)
    assert rules(prog) == ["DPS004"] and "not allowed" in prog.diagnostics[0].message
    spec = dpspec.loads('use "defs.dps"\n' + REL, base_dir=main.parent, includes=False)
    assert [d.rule for d in spec.errors] == ["DPS004"]


def test_check_of_dev_zero_is_bounded(no_hang):
    # the subprocess timeout is the hang guard: it fails the test when it expires
    r = subprocess.run([sys.executable, "-m", "dpspec", "check", "/dev/zero"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "DPS004" in r.stdout + r.stderr and "Traceback" not in r.stderr
