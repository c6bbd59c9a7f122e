"""Trust and the reference cache key on the code that runs, all of it.

The attacks: (1) keep the ``.py`` files of a package the victim trusted, put new code in
``evil.md`` (or ``evil.wgsl``) and point ``[reference] file`` at it — the trust hash left those out,
so ``scellis conform`` ran the stranger's code; (2) package S1 (a window-max kernel, a max
reference) passes and is cached; S2 (the same kernel, an honest median reference, the same
reference file name) then passed from the cache in the victim's home, and ``receipts`` said valid.
Now the reference must be a ``.py`` file of the package (refused at its line:col in op.toml
otherwise), and the reference hash (trust/code.py) covers the reference file's path and bytes,
every file the reference process receives and the ``[reference]`` table."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MEDIAN, REPO, copy_package

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.services.standing import receipt_status
from studio.engine.services.actions import conform as conform_service
from studio.engine.trust.code import code_hash

EVIL = 'import sys\nsys.stderr.write("EVIL-RAN\\n")\n\ndef forward(x, *, w):\n    return x[: len(x) - w + 1]\n'
REF_LINE = 'file = "reference.py"'


def _where(text: str, needle: str) -> tuple[int, int]:
    """Where the string value ``needle`` starts in op.toml (its first character, past the quote)."""
    for n, line in enumerate(text.split("\n"), 1):
        if f'"{needle}"' in line:
            return n, line.index(f'"{needle}"') + 2
    raise AssertionError(needle)


def _point_reference_at(root: Path, name: str) -> str:
    toml = root / "op.toml"
    text = toml.read_text().replace(REF_LINE, f'file = "{name}"')
    toml.write_text(text)
    return text


@pytest.mark.parametrize("name", ["evil.md", "evil.wgsl", "../evil.py", "/tmp/evil.py", "sub/../evil.py",
                                  ".hidden.py", "receipts/evil.py", "evil.pyc"])
def test_a_reference_that_is_not_a_python_file_of_the_package_is_refused_at_its_line(pkg_copy, ctx, name):
    root = pkg_copy(MEDIAN, "victim")                  # authored here: trusted
    (root / "evil.md").write_text(EVIL)
    (root / "evil.wgsl").write_text(EVIL)
    text = _point_reference_at(root, name)
    calls = ctx.references.host_calls
    with pytest.raises(StudioError) as info:
        load_package(root)
    e = info.value
    assert (e.line, e.col) == _where(text, name) and e.field == "reference.file"
    assert e.file == str(root / "op.toml") and "must be a Python file (.py) inside the package" in e.message
    assert "reference.py" in e.hint
    assert ctx.references.host_calls == calls


def test_a_symlinked_reference_is_refused_even_to_a_file_inside(pkg_copy):
    root = pkg_copy(MEDIAN, "victim")
    (root / "evil.md").write_text(EVIL)
    (root / "link.py").symlink_to("evil.md")
    text = _point_reference_at(root, "link.py")
    with pytest.raises(StudioError) as info:
        load_package(root)
    assert "is a symlink" in info.value.message and info.value.field == "reference.file"
    assert (info.value.line, info.value.col) == _where(text, "link.py")
    (root / "link.py").unlink()                         # the control: a real .py file of the package loads
    (root / "link.py").write_text(EVIL)
    assert load_package(root).contract.reference_file == "link.py"


def test_scellis_conform_refuses_evil_md_and_never_runs_it(pkg_copy, _isolated_home):
    """Attack 1 as it was made: the victim's trusted package, its .py files kept, evil.md added and
    named as the reference; through the CLI: exit 2, the op.toml line:col, the code never ran."""
    root = pkg_copy(MEDIAN, "victim")
    (root / "evil.md").write_text(EVIL)
    text = _point_reference_at(root, "evil.md")
    env = {**os.environ, "SCELLIS_HOME": str(_isolated_home)}
    out = subprocess.run([sys.executable, "-m", "studio.cli", "conform", str(root)], capture_output=True,
                         text=True, env=env, cwd=REPO, timeout=120)
    line, col = _where(text, "evil.md")
    assert out.returncode == 2, out.stderr
    assert f"op.toml:{line}:{col} [reference.file]" in out.stderr and "Traceback" not in out.stderr
    assert "EVIL-RAN" not in out.stderr + out.stdout
    assert len([ln for ln in out.stderr.splitlines() if not ln.startswith("  hint:")]) == 1


def test_the_reference_hash_covers_the_reference_table_path_and_bytes():
    toml = b'id = "user/a/b@1"\n[reference]\nfile = "reference.py"\nforward = "forward"\n'
    files = {"op.toml": toml, "reference.py": b"def forward(x): return x\n", "helper.py": b"h",
             "forward.wgsl": b"k", "notes.md": b"n"}
    base = code_hash(files)
    assert code_hash({**files, "forward.wgsl": b"K", "notes.md": b"N",
                      "op.toml": b'summary = "a kernel-side edit"\n' + toml}) == base       # not code: trust kept
    for changed in ({"op.toml": toml.replace(b'"forward"\n', b'"argmedian"\n')},           # another function
                    {"op.toml": toml + b'precision = "f32"\n'},                             # another precision
                    {"op.toml": toml.replace(b'"reference.py"', b'"helper.py"')},           # another file
                    {"reference.py": b"def forward(x): return -x\n"},                       # its bytes
                    {"helper.py": b"H"}):                                                   # what it imports
        assert code_hash({**files, **changed}) != base, changed
    # the filed collision: a reference kept in a file the rule above leaves out is still hashed
    named = {**files, "op.toml": toml.replace(b'"reference.py"', b'"ref.md"'), "ref.md": b"max"}
    assert code_hash(named) != code_hash({**named, "ref.md": b"median"})


def test_running_another_function_of_a_trusted_reference_is_untrusted_again(ctx, pkg_copy):
    root = pkg_copy(MEDIAN, "victim")
    assert ctx.trust.status(load_package(root)).ok
    toml = root / "op.toml"
    toml.write_text(toml.read_text().replace('forward = "forward"', 'forward = "argmedian"'))
    assert ctx.trust.status(load_package(root)).level == "untrusted"


# ------------------------------------------------------------------ attack 2: the cache
MAX_KERNEL = [("y[i] = win[p.w / 2u];", "y[i] = win[p.w - 1u];")]
IMPORTS = [("def forward(x, *, w):", "from impl import forward as _impl\n\n\ndef forward(x, *, w):\n"
                                     "    return _impl(x, w=w)\n\n\ndef _unused(x, *, w):")]
MAX_IMPL = ("import numpy as np\nfrom numpy.lib.stride_tricks import sliding_window_view\n\n\n"
            "def forward(x, *, w):  # the kernel's stable sort, the last element: the max\n"
            "    return np.sort(sliding_window_view(np.asarray(x), int(w)), axis=-1, kind=\"stable\")[:, -1]\n")
MEDIAN_IMPL = ("import numpy as np\nfrom numpy.lib.stride_tricks import sliding_window_view\n\n\n"
               "def forward(x, *, w):\n    return np.median(sliding_window_view(np.asarray(x), int(w)), axis=-1)"
               ".astype(np.float32)\n")


def _package(tmp: Path, name: str, impl: str) -> Path:
    """A window-max kernel whose reference.py (byte for byte the same in S1 and S2) runs impl.py."""
    root = tmp / name
    copy_package(MEDIAN, root, {"forward.wgsl": MAX_KERNEL, "reference.py": IMPORTS})
    text = (root / "op.toml").read_text()
    text = text[:text.index("[backward]")] + '[backward]\ntext = "nondifferentiable"\n'
    (root / "op.toml").write_text(text)
    (root / "backward.wgsl").unlink()
    (root / "impl.py").write_text(impl)
    copy_package(root, tmp / (name + "-authored"))       # recorded as authored by the copy
    return tmp / (name + "-authored")


@pytest.mark.slow
def test_an_honest_package_never_passes_from_another_packages_cached_results(ctx, tmp_path):
    """Attack 2: S1 passes and its reference results are cached in this home; S2 — the same kernel,
    the same reference file name and bytes, an honest median behind it — must fail here, from its
    own reference, and its receipt must not say valid."""
    s1 = load_package(_package(tmp_path, "s1", MAX_IMPL))
    out1 = conform_service(ctx, s1, mutants=0)
    assert out1.verdict == "pass" and out1.receipt, out1.failures[:1]
    assert any((ctx.trust.home / "cache" / "reference").rglob("*.npz"))      # cached on disk
    s2 = load_package(_package(tmp_path, "s2", MEDIAN_IMPL))
    assert s2.files["reference.py"] == s1.files["reference.py"] and s2.kernel_source == s1.kernel_source
    calls = ctx.references.host_calls
    out2 = conform_service(ctx, s2, mutants=0)
    assert out2.verdict == "fail" and out2.failed > 0 and not out2.receipt
    assert ctx.references.host_calls > calls                     # its own reference ran
    assert receipt_status(s2, ctx.device.profile.id, ctx.seal) != "valid"
    assert receipt_status(s1, ctx.device.profile.id, ctx.seal) == "valid"     # the control


def test_the_filed_cache_collision_cannot_be_built(tmp_path):
    """As filed, S1 and S2 kept their references in a file the old hash left out, so both had the
    same reference hash: such a package no longer loads."""
    for name, impl in (("s1", MAX_IMPL), ("s2", MEDIAN_IMPL)):
        root = copy_package(MEDIAN, tmp_path / name)
        (root / "ref.md").write_text(impl)
        _point_reference_at(root, "ref.md")
        with pytest.raises(StudioError, match="must be a Python file"):
            load_package(root)
