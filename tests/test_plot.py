"""`dpspec plot`: pictures whose numbers are the certificate's, drawn from data only."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import dpspec  # noqa: E402
from dpspec import plot  # noqa: E402
from tests.conftest import ROOT, SPECS  # noqa: E402

GAUSSIAN = """privacy people { unit record  dataset_size 1000 }
release total { mechanism gaussian  query sum(x, bounds = [0, 1])  guarantee dp(epsilon = 1, delta = 1e-6) }
"""


@pytest.fixture(scope="module")
def certs():
    out = {"gaussian": dpspec.compile(GAUSSIAN).certificate}
    for name in ("dpsgd_records", "dpsgd_fixed_batch", "groups_swm", "digits_srpp", "sbm_gcon"):
        out[name] = dpspec.compile(dpspec.load(SPECS / f"{name}.dps")).certificate
    return out


def _axes(fig, target: str, kind: str):
    title = {"curve": f"{target}: ε(δ)", "steps": f"{target}: ε vs steps", "rdp": f"{target}: ε(α)"}[kind]
    (ax,) = [a for a in fig.axes if a.get_title() == title]
    return ax


def _line(ax, label: str):
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)


def test_the_figure_plots_the_certificates_own_numbers(certs):
    for name, cert in certs.items():
        fig = plot.figure(cert)
        for r in cert.results:
            g = r.guarantee
            if g.dp:
                label = "certified (ε, δ)" if g.pairs_notion == "approximate_dp" else "certified (ε′, δ), not DP"
                x, y = _line(_axes(fig, r.name, "curve"), label)
                assert list(x) == [p.delta for p in g.dp] and list(y) == [p.epsilon for p in g.dp], name
            if g.rdp_alphas:
                x, y = _line(_axes(fig, r.name, "rdp"), "certified ε(α)")
                assert list(x) == g.rdp_alphas and list(y) == g.rdp_epsilons, name
            else:
                assert not _axes(fig, r.name, "rdp").get_lines()


def test_dpsgd_steps_are_recomputed_and_end_at_the_certified_epsilon(certs):
    for name in ("dpsgd_records", "dpsgd_fixed_batch"):  # Poisson/(ε, δ) target; WOR substitution/RDP target
        cert = certs[name]
        r = cert.results[0]
        ax = _axes(plot.figure(cert, kinds=("steps",)), r.name, "steps")
        x, y = _line(ax, "recomputed with dpspec.accounting")
        assert x[0] == 1 and x[-1] == r.mechanism.parameters["steps"]
        assert math.isclose(y[-1], r.guarantee.epsilon, rel_tol=1e-9)
        assert np.all(np.diff(y) >= 0)  # privacy loss never shrinks with more steps
        assert _line(ax, "certified") == ([float(x[-1])], [r.guarantee.epsilon])
        assert not ax.texts  # no disagreement note


def test_the_epsilon_of_delta_line_passes_through_the_certified_points(certs):
    for name in ("gaussian", "dpsgd_records"):
        r = certs[name].results[0]
        (panel,) = plot.panels(certs[name], kinds=("curve",))
        line = next(s for s in panel.series if not s.certified)
        on_line = dict(zip(line.x, line.y))
        for p in r.guarantee.dp:
            assert math.isclose(on_line[p.delta], p.epsilon, rel_tol=1e-9), (name, p)
        assert all(a >= b for a, b in zip(line.y, line.y[1:]))  # ε falls as δ grows


def test_panels_say_what_cannot_be_drawn(certs):
    notes = {(p.target, p.kind): p.note for c in certs.values() for p in plot.panels(c)}
    assert "one-shot mechanism" in notes[("total", "steps")]
    assert "one-shot mechanism" in notes[("node_classifier", "steps")]
    assert "caps_sha256" in notes[("classifier_sa", "steps")]  # SRPP-SGD
    assert "not (ε, δ)-DP" in notes[("classifier", "curve")]
    assert "not applicable" in notes[("node_classifier", "rdp")]


def test_png_and_svg_are_written(certs, tmp_path):
    png = plot.save(certs["dpsgd_records"], tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = plot.save(certs["groups_swm"], tmp_path / "c.svg", kinds=("rdp",), targets=["group_means"])
    assert "<svg" in svg.read_text()[:1000]
    with pytest.raises(ValueError, match="use one of"):
        plot.save(certs["gaussian"], tmp_path / "c.gif")
    with pytest.raises(KeyError):
        plot.panels(certs["gaussian"], targets=["nope"])


@pytest.mark.slow
def test_relational_steps_are_recomputed_from_the_recorded_parameters():
    cert = dpspec.compile("""privacy nodes { unit node  data synthetic(generator = sbm_graph, size = 300, seed = 1) }
train enc {
  mechanism        relational_dpsgd
  sampling         coupled { positive poisson(expected_batch = 16)  negative without_replacement(per_positive = 2) }
  degree_cap       3
  clipping         per_tuple(C = 1.0)
  encoder          mlp(hidden = 16, out = 8)
  split            node_disjoint(test = 0.2, seed = 0)
  steps            50
  noise_multiplier 1.5
  guarantee        dp(delta = 1e-4)
}""").certificate
    (panel,) = plot.panels(cert, kinds=("steps",))
    line = next(s for s in panel.series if not s.certified)
    assert panel.note is None and math.isclose(line.y[-1], cert.results[0].guarantee.epsilon, rel_tol=1e-9)
    assert line.x[-1] == 50 and list(line.y) == sorted(line.y)


# --- reading a certificate: data only, bounded, strict -------------------------------------------------


def _write(tmp_path, cert, edit=None, name="cert.json"):
    d = json.loads(cert.to_json())
    if edit:
        edit(d)
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p


def test_text_from_the_certificate_is_shown_never_run(certs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    payload = "__import__('pathlib').Path('pwned').write_text('x')"

    def hostile(d):
        r = d["results"][0]
        r["name"] = "$\\frac{a}{$"  # unbalanced mathtext would raise if it were interpreted
        r["guarantee"]["pairs_notion"] = "$" + payload + "$"
        for f in r["formulas"]:
            f["sympy"] = payload

    cert = plot.read_certificate(_write(tmp_path, certs["groups_swm"], hostile))
    plot.save(cert, tmp_path / "h.png")
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("content, message", [
    (b'{"a": 1, "a": 2}', "duplicate key"),
    (b'{"schema_version": NaN}', "NaN is not a number"),
    (b"not json", "is not JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b'{"schema_version": "1.0"}', "not a dpspec certificate"),
])
def test_malformed_files_are_refused_with_a_reason(tmp_path, content, message):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(plot.CertificateReadError, match=message):
        plot.read_certificate(p)


def test_oversize_and_special_files_are_refused_without_reading_them(tmp_path, monkeypatch):
    monkeypatch.setattr(plot, "MAX_CERTIFICATE_BYTES", 100)
    big = tmp_path / "big.json"
    big.write_text(" " * 101)
    with pytest.raises(plot.CertificateReadError, match="larger than"):
        plot.read_certificate(big)
    with pytest.raises(plot.CertificateReadError, match="not a regular file"):
        plot.read_certificate(tmp_path)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(plot.CertificateReadError, match="not a regular file"):
            plot.read_certificate(tmp_path / "fifo")  # would block forever if opened
    with pytest.raises(plot.CertificateReadError, match="no such file"):
        plot.read_certificate(tmp_path / "missing.json")


# --- the command -----------------------------------------------------------------------------------------

NO_MATPLOTLIB = '''import sys


class _NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoMatplotlib())
'''


def run(*args, env=None):
    r = subprocess.run([sys.executable, "-m", "dpspec", *map(str, args)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert "Traceback" not in r.stdout + r.stderr and "internal error" not in r.stderr, r.stderr
    return r


@pytest.mark.slow
def test_cli_writes_the_picture_and_reports_bad_requests(certs, tmp_path):
    cert = _write(tmp_path, certs["gaussian"])
    r = run("plot", cert, "-o", tmp_path / "g.svg", "--kind", "curve")
    assert r.returncode == 0 and (tmp_path / "g.svg").exists() and "wrote" in r.stdout
    assert run("plot", cert, "-q").returncode == 0 and cert.with_suffix(".png").exists()
    assert run("plot", cert, "-o", tmp_path / "g.gif").returncode == 2
    r = run("plot", cert, "--target", "nope", "-o", tmp_path / "n.png")
    assert r.returncode == 2 and "it holds: total" in r.stderr
    assert run("plot", cert, "-o", tmp_path / "missing_dir" / "g.png").returncode == 1
    r = run("plot", tmp_path / "missing.json", "-o", tmp_path / "m.png")
    assert r.returncode == 1 and "no such file" in r.stderr
    edited = _write(tmp_path, certs["gaussian"], lambda d: d["results"][0]["guarantee"].update(epsilon=0.5), "e.json")
    r = run("plot", edited, "-o", tmp_path / "e.png")
    assert r.returncode == 0 and "content hash does not match" in r.stderr


def test_cli_without_matplotlib_says_how_to_install_it(certs, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_MATPLOTLIB)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = run("plot", _write(tmp_path, certs["gaussian"]), "-o", tmp_path / "g.png", env=env)
    assert r.returncode == 1
    assert "`dpspec plot` needs `matplotlib`, which is not installed" in r.stderr
    assert "pip install 'dpspec[plot]'" in r.stderr
    assert not (tmp_path / "g.png").exists()


def test_parameters_the_accountant_cannot_use_are_a_note_not_a_crash(certs, tmp_path):
    def odd(d):
        d["results"][0]["mechanism"]["parameters"]["sampling"] = "shuffle"

    cert = plot.read_certificate(_write(tmp_path, certs["dpsgd_records"], odd))
    (panel,) = plot.panels(cert, kinds=("steps",))
    assert panel.note == "cannot recompute: no accountant for sampling `shuffle`"
    assert [s.certified for s in panel.series] == [True]  # the certified point is still drawn
