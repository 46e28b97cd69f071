"""The data root is a sandbox: a spec reads regular files inside it, no larger than a limit, and a
refused file's content never appears in a message."""

import os
import signal
import subprocess
import sys

import pytest

import dpspec
from dpspec import limits
from dpspec.data import (DataAccessError, DataNotFoundError, FileRefused, read_bounded, read_data_text,
                         resolve_data_path)

SECRET_LINE = "root:x:0:0:secret-marker:/root:/bin/bash"


def swm_spec(path: str, separator: str | None = None) -> str:
    sep = f', separator = "{separator}"' if separator else ""
    return (f'scenario s {{ data csv("{path}"{sep})  secret g in {{A, B}} }}\n'
            "release r { protect s  mechanism swm  query mean(v, bounds = [0, 1])  slices axes  "
            "guarantee ave_srpp(alpha = 4, epsilon = 1) }\n")


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "root"
    r.mkdir()
    (r / "ok.csv").write_text("g,v\n" + "A,0.1\nB,0.9\n" * 20)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET_LINE + "\n")
    monkeypatch.setenv("DPSPEC_DATA_DIR", str(r))
    return r


def compile_rules(text):
    spec = dpspec.loads(text, name="s.dps")
    if not spec.ok:
        return spec.errors
    with pytest.raises(dpspec.SpecError) as e:
        dpspec.compile(spec)
    return e.value.diagnostics


def test_a_file_inside_the_root_is_read(root):
    spec = dpspec.loads(swm_spec("ok.csv"), name="s.dps")
    assert spec.ok, spec.diagnostics
    assert dpspec.compile(spec).certificate.results[0].name == "r"


@pytest.mark.parametrize("path,reason", [
    ("/etc/passwd", "absolute"), ("../outside/passwd", "leaves the data root"), ("a/../../outside/passwd", "leaves"),
    ("~/x.csv", "absolute"), ("C:/x.csv", "absolute"), ("a\\\\b.csv", "backslash"), ("", "empty"),
])
def test_paths_that_cannot_be_inside_the_root_are_check_errors(root, path, reason):
    spec = dpspec.loads(swm_spec(path, ":"), name="s.dps")
    d = [d for d in spec.errors if d.rule == "DPS010"]
    assert d and reason in d[0].message and d[0].hint and d[0].span.line == 1
    assert SECRET_LINE not in repr(spec.diagnostics)


def test_etc_passwd_is_never_read_and_never_echoed(root, tmp_path):
    p = tmp_path / "spec.dps"
    p.write_text(swm_spec("/etc/passwd", ":"))
    for cmd in (["check", str(p)], ["compile", str(p), "-o", str(tmp_path / "c.json")]):
        r = subprocess.run([sys.executable, "-m", "dpspec", *cmd], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "DPSPEC_DATA_DIR": str(root)})
        assert r.returncode == 1 and "DPS010" in r.stdout + r.stderr
        assert "root:x" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "c.json").exists()


def test_a_symlink_out_of_the_root_is_refused_and_not_echoed(root, tmp_path):
    (root / "link.csv").symlink_to(tmp_path / "outside" / "passwd")
    (root / "dir").mkdir()
    (root / "dir" / "link.csv").symlink_to("../../outside/passwd")
    for path in ("link.csv", "dir/link.csv"):
        diags = compile_rules(swm_spec(path, ":"))
        assert [d.rule for d in diags] == ["DPS010"], diags
        assert "outside the data root" in diags[0].message and diags[0].hint
        assert "secret-marker" not in repr(diags)


def test_a_symlink_inside_the_root_is_followed(root):
    (root / "alias.csv").symlink_to(root / "ok.csv")
    assert resolve_data_path("alias.csv") == (root / "ok.csv").resolve()


def test_a_symlink_loop_is_refused(root):
    (root / "loop.csv").symlink_to(root / "loop.csv")
    with pytest.raises(DataAccessError):
        resolve_data_path("loop.csv")
    assert [d.rule for d in compile_rules(swm_spec("loop.csv"))] == ["DPS010"]


def test_a_fifo_is_refused_without_blocking(root):
    os.mkfifo(root / "pipe.csv")  # nobody writes: opening it for reading the usual way blocks forever
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("reading a FIFO blocked"))
    signal.alarm(60)
    try:
        diags = compile_rules(swm_spec("pipe.csv"))
    finally:
        signal.alarm(0)
    assert [d.rule for d in diags] == ["DPS010"] and "FIFO" in diags[0].message


def test_a_device_behind_a_link_is_refused(root):
    (root / "zero.csv").symlink_to("/dev/zero")
    assert [d.rule for d in compile_rules(swm_spec("zero.csv"))] == ["DPS010"]


def test_a_folder_is_refused(root):
    (root / "folder.csv").mkdir()
    diags = compile_rules(swm_spec("folder.csv"))
    assert [d.rule for d in diags] == ["DPS010"] and "folder" in diags[0].message


def test_a_missing_file_is_not_available(root):
    assert [d.rule for d in compile_rules(swm_spec("nope.csv"))] == ["DPS419"]


def test_a_file_above_the_size_limit_is_refused_before_reading(root, monkeypatch):
    monkeypatch.setenv("DPSPEC_MAX_DATA_FILE_BYTES", "100")
    diags = compile_rules(swm_spec("ok.csv"))
    assert [d.rule for d in diags] == ["DPS009"]
    assert "DPSPEC_MAX_DATA_FILE_BYTES" in diags[0].hint and "100" in diags[0].message


def test_a_file_that_is_not_utf8_is_refused(root):
    (root / "bin.csv").write_bytes(b"g,v\n\xff\xfe\x00A,1\n")
    diags = compile_rules(swm_spec("bin.csv"))
    assert [d.rule for d in diags] == ["DPS010"] and "UTF-8" in diags[0].message


def test_read_bounded_never_reads_past_the_limit(monkeypatch):
    monkeypatch.setenv("DPSPEC_MAX_DATA_FILE_BYTES", "4096")
    with pytest.raises(FileRefused):  # a device is not a regular file
        read_bounded("/dev/zero", "data_file_bytes")
    with pytest.raises(limits.LimitExceeded):  # read on request, still never past the limit
        read_bounded("/dev/zero", "data_file_bytes", regular_only=False)


def test_the_named_loaders_read_through_the_sandbox(tmp_path):
    r = tmp_path / "root"
    (r / "adult").mkdir(parents=True)
    (r / "adult" / "adult.data").symlink_to("/etc/passwd")
    from dpspec.data.tabular import load_adult

    with pytest.raises(DataAccessError):
        load_adult("train", root=r)
    with pytest.raises(DataNotFoundError):
        read_data_text("adult/adult.test", r)
