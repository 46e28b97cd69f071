"""Review of issue 17 ("hostile inputs"): each bullet reproduced through the CLI; every case must exit
1 or 2 with a one-line reason, no traceback, and nothing executed, read or echoed."""

import copy
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

from dpspec.certificate.model import Certificate

GAUSS = """privacy people { unit record  data dataset(t)  dataset_size 100 }
release total { mechanism gaussian  query sum(a, bounds = [0, 99])  guarantee dp(epsilon = 1, delta = 1e-6) }
"""
PLAIN = """privacy people { unit record  dataset_size 100 }
release total { mechanism gaussian  query sum(a, bounds = [0, 99])  guarantee dp(epsilon = 1, delta = 1e-6) }
"""


def cli(*args, cwd=None, env=None, timeout=120):
    r = subprocess.run([sys.executable, "-m", "dpspec", *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=timeout)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and r.returncode in (0, 1, 2), out
    return r.returncode, out


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    d = tmp_path_factory.mktemp("cert")
    (d / "s.dps").write_text(PLAIN, encoding="utf-8")
    rc, out = cli("compile", d / "s.dps", "-o", d / "c.json")
    assert rc == 0, out
    return json.loads((d / "c.json").read_text(encoding="utf-8"))


def sealed(doc):
    return json.loads(Certificate.model_validate(doc).sealed().model_dump_json())


def with_spec(doc, text):
    d = copy.deepcopy(doc)
    d["spec"]["canonical_text"] = text
    d["spec"]["sha256"] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return sealed(d)


def verify_text(tmp_path, text, *extra):
    p = tmp_path / "h.json"
    p.write_text(text, encoding="utf-8")
    return cli("verify", *extra, p)


def test_genuine_verifies(tmp_path, genuine):
    assert verify_text(tmp_path, json.dumps(genuine))[0] == 0


# --- 1. nothing from a certificate is executed -------------------------------------------------------------


@pytest.mark.parametrize("reseal", [False, True])
def test_1_formula_text_is_not_executed(tmp_path, genuine, reseal):
    canary = tmp_path / "pwned"
    d = copy.deepcopy(genuine)
    d["results"][0]["formulas"][0]["sympy"] = f"__import__('pathlib').Path({str(canary)!r}).write_text('pwned')"
    rc, _ = verify_text(tmp_path, json.dumps(sealed(d) if reseal else d))
    assert rc == 1 and not canary.exists()


@pytest.mark.parametrize("hook", ['prior  sampler("shutil:rmtree", samples = 200)',
                                  'prior  sampler("dpspec.pufferfish.examples:draw_groups", samples = 200)'])
def test_1_code_hooks_are_not_imported_without_trust(tmp_path, genuine, hook):
    victim = tmp_path / "victim"
    victim.mkdir()
    spec = ("scenario s {\n  secret group in {A, B}\n  " + hook + "\n}\n\nrelease r {\n  mechanism swm\n"
            '  query     callable(target = "os:system", dimension = 2, bounds = [0, 10])\n  slices    axes\n'
            "  guarantee ave_srpp(alpha = 4, epsilon = 1, gamma = 0.05)\n}\n")
    rc, out = verify_text(tmp_path, json.dumps(with_spec(genuine, spec)))
    assert rc == 1 and "--trust-code" in out and victim.exists()


# --- 2. forged certificates -------------------------------------------------------------------------------


def _forged_first(g):
    d = copy.deepcopy(g)
    f = copy.deepcopy(d["results"][0])
    f["guarantee"]["target"]["epsilon"] = f["guarantee"]["epsilon"] = f["guarantee"]["dp"][0]["epsilon"] = 0.01
    f["mechanism"]["parameters"]["sigma"] *= 100
    d["results"].insert(0, f)
    return sealed(d)


def _lower_eps(g):
    d = copy.deepcopy(g)
    d["results"][0]["guarantee"]["epsilon"] *= 1 - 5e-10
    d["results"][0]["guarantee"]["dp"][0]["epsilon"] *= 1 - 5e-10
    return sealed(d)


def _lower_error(g):
    d = copy.deepcopy(g)
    d["results"][0]["numerics"]["abs_error_bound"] = 1e-15
    return sealed(d)


def _without(key):
    def f(g):
        d = copy.deepcopy(g)
        if key == "warnings":
            del d["results"][0]["warnings"]
        else:
            del d[key]
        return d
    return f


@pytest.mark.parametrize("forge", [_forged_first, _lower_eps, _lower_error, _without("warnings"),
                                   _without("content_hash")])
def test_2_forged_certificates_fail(tmp_path, genuine, forge):
    assert verify_text(tmp_path, json.dumps(forge(genuine)))[0] == 1


def test_2_duplicate_keys_path_only_and_dev_zero(tmp_path, genuine):
    t = json.dumps(genuine)
    i = t.index('"epsilon": ')
    assert verify_text(tmp_path, t[:i] + '"epsilon": 0.001, ' + t[i:])[0] == 1
    good = tmp_path / "good.json"
    good.write_text(t, encoding="utf-8")
    assert verify_text(tmp_path, str(good))[0] == 1
    assert cli("verify", "/dev/zero")[0] == 1


# --- 3. data paths ------------------------------------------------------------------------------------------


@pytest.fixture
def data_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.csv").write_text("a\n1\n", encoding="utf-8")
    os.symlink("/etc/passwd", root / "link.csv")
    os.symlink("/etc", root / "dirlink")
    os.mkfifo(root / "fifo.csv")
    return root


@pytest.mark.parametrize("src", ['"/etc/passwd", separator = ":"', '"../../../../etc/passwd", separator = ":"',
                                 '"link.csv", separator = ":"', '"dirlink/passwd", separator = ":"', '"fifo.csv"'])
def test_3_data_paths_are_refused_without_echo(tmp_path, data_root, genuine, src):
    env = {**os.environ, "DPSPEC_DATA_DIR": str(data_root)}
    spec = tmp_path / "d.dps"
    spec.write_text(PLAIN.replace("dataset_size 100", f"data csv({src})"), encoding="utf-8")
    rc, out = cli("compile", spec, "-o", tmp_path / "o.json", env=env, timeout=30)
    assert rc == 1 and "DPS010" in out and "root:" not in out and not (tmp_path / "o.json").exists()
    # the same path in a certificate's embedded spec
    text = (f"privacy people {{\n  unit record\n  data csv({src})\n}}\n\nrelease total {{\n  mechanism gaussian\n"
            "  query     sum(a, bounds = [0, 99])\n  guarantee dp(epsilon = 1, delta = 1e-6)\n}\n")
    p = tmp_path / "h.json"
    p.write_text(json.dumps(with_spec(genuine, text)), encoding="utf-8")
    rc, out = cli("verify", p, env=env, timeout=30)
    assert rc == 1 and "root:" not in out


# --- 4./5. sizes and numbers ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, rule", [
    ("privacy p { unit record  dataset_size 1e15 }\n", "DPS"),
    ("privacy people { unit record  dataset_size 1000000000000000 }\n" + PLAIN.split("\n", 1)[1], "DPS009"),
    (PLAIN.replace("epsilon = 1,", "epsilon = 1e308,"), "DPS205"),
    (PLAIN.replace("epsilon = 1,", "epsilon = 1e-300,"), "DPS205"),
    (PLAIN.replace("[0, 99]", "[0, 1e308]"), "DPS205"),
    (PLAIN.replace("[0, 99]", "[0, 5e-324]"), "DPS205"),
    (PLAIN.replace("[0, 99]", "[0, 9007199254740993]"), "DPS106"),
    (PLAIN.replace("[0, 99]", "[0, 1e99]").replace("epsilon = 1,", "epsilon = 1e-99,"), "DPS206"),
    (PLAIN.replace("[0, 99]", "[0, 9**9**9**9]"), "DPS001"),
])
def test_4_5_sizes_and_numbers_are_located_errors(tmp_path, text, rule):
    p = tmp_path / "n.dps"
    p.write_text(text, encoding="utf-8")
    rc, out = cli("compile", p, "-o", tmp_path / "o.json", timeout=60)
    assert rc == 1 and rule in out and "hint" in out and not (tmp_path / "o.json").exists()


def test_4_power_tower_in_a_certificate_formula_does_not_hang(tmp_path, genuine):
    d = copy.deepcopy(genuine)
    d["results"][0]["formulas"][0]["sympy"] = "9**9**9**9"
    # the CLI runs in a subprocess whose timeout (cli's 120 s) fails the test if verify hangs
    assert verify_text(tmp_path, json.dumps(sealed(d)))[0] == 1


# --- 6. front end -------------------------------------------------------------------------------------------


def test_6_check_is_linear(tmp_path):
    block = ("release r{} {{ mechanism gaussian  query sum(a, bounds = [0, 1])  "
             "guarantee dp(epsilon = 1, delta = 1e-6) }}\n")
    times = {}
    for n in (1000, 6000):
        p = tmp_path / f"b{n}.dps"
        p.write_text("privacy p { unit record  dataset_size 100 }\n" + "".join(block.format(i) for i in range(n)),
                     encoding="utf-8")
        t = time.process_time()
        from dpspec.frontend import load

        assert load(str(p)).ok
        times[n] = time.process_time() - t
    assert times[6000] < 12 * times[1000] + 1.0, times  # linear, not quadratic (36×)


def test_6_escaped_backslash_does_not_hide_brackets(tmp_path):
    p = tmp_path / "n.dps"
    p.write_text('privacy p { unit record  description "a\\\\" dataset_size ' + "[" * 100 + "1" + "]" * 100 + " }\n",
                 encoding="utf-8")
    rc, out = cli("check", p)
    assert rc == 1 and "DPS007" in out and "nested too deeply" in out


@pytest.mark.parametrize("target", ["loop", "/dev/zero", "fifo"])
def test_6_use_of_hostile_files(tmp_path, target):
    os.symlink("loop2.dps", tmp_path / "loop1.dps")
    os.symlink("loop1.dps", tmp_path / "loop2.dps")
    os.mkfifo(tmp_path / "fifo.dps")
    name = {"loop": "loop1.dps", "fifo": "fifo.dps"}.get(target, target)
    p = tmp_path / "u.dps"
    p.write_text(f'use "{name}"\nprivacy p {{ unit record  dataset_size 10 }}\n', encoding="utf-8")
    rc, out = cli("check", p, timeout=30)
    assert rc == 1 and "DPS004" in out and "hint" in out


# --- 7. fmt -------------------------------------------------------------------------------------------------


def test_7_fmt_keeps_a_late_use_in_place_and_big_integers_parse(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "q.dps").write_text("privacy q { unit record  dataset_size 10 }\n", encoding="utf-8")
    src = (PLAIN + 'use "shared/q.dps"\n'
           "privacy big { unit record  dataset_size 9007199254740992 }\n")
    p = tmp_path / "a.dps"
    p.write_text(src, encoding="utf-8")
    rc, once = cli("fmt", p)
    assert rc == 0
    assert once.index("release total") < once.index('use "shared/q.dps"') < once.index("privacy big")
    assert "9007199254740992" in once
    q = tmp_path / "b.dps"
    q.write_text(once, encoding="utf-8")
    assert cli("fmt", q)[1] == once
