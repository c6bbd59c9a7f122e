"""wgpu's binding-layout errors are read in one place: each kind is provoked
here on the pinned wgpu (lavapipe), its text must be exactly the one captured in
tests/data/wgpu_layout_errors.json (so a wgpu release that words it differently fails loudly,
here), and ``parse_layout_error`` reads it into a ``LayoutProblem``. Real wgpu, no mocks."""
import json
from pathlib import Path

import pytest
import wgpu

from studio.engine.device.layout_errors import KINDS, LayoutProblem, parse_layout_error
from studio.engine.errors import StudioError

FIXTURES = json.loads((Path(__file__).parents[1] / "data" / "wgpu_layout_errors.json").read_text())

KERNEL = """
struct P { n: u32, w: u32, }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x; if (i >= p.n) { return; } y[i] = x[i] * f32(p.w);
}
"""
X = {"binding": 0, "kind": "storage", "access": "read", "min_size": 0}
Y = {"binding": 1, "kind": "storage", "access": "read_write", "min_size": 0}
P = {"binding": 2, "kind": "uniform", "access": "read", "min_size": 8}
WIDE = KERNEL.replace("struct P { n: u32, w: u32, }", "struct P { n: u32, w: u32, a: u32, b: u32, c: u32, d: u32, "
                                                       "e: u32, f: u32, }")
TYPED = (KERNEL.replace("var<storage, read> x: array<f32>", "var<storage, read> x: array<u32>")
         .replace("x[i] * f32", "f32(x[i]) * f32")
         + "@compute @workgroup_size(1) fn probe() { let _v: f32 = x[0]; y[0] = _v; }\n")

# name: (kernel, layout, entry point, what it is read as)
CASES = {
    "access": (KERNEL, [dict(X, access="read_write"), Y, P], "main",
               LayoutProblem("binding_type", 0, 0, layout="storage read_write", shader="storage read")),
    "address_space": (KERNEL, [X, Y, dict(P, kind="storage", min_size=0)], "main",
                      LayoutProblem("binding_type", 0, 2, layout="storage read", shader="uniform")),
    "slot": (KERNEL, [X, dict(Y, binding=3), P], "main", LayoutProblem("missing_binding", 0, 1)),
    "undeclared": (KERNEL, [X, Y], "main", LayoutProblem("missing_binding", 0, 2)),
    "struct_size": (WIDE, [X, Y, P], "main", LayoutProblem("struct_size", 0, 2, struct_size=32, min_binding_size=8)),
    "entry_point": (KERNEL, [X, Y, P], "nope", LayoutProblem("entry_point", entry="nope")),
    "element_type": (TYPED, [X, Y, P], "probe", LayoutProblem("element_type", expected="f32", got="u32")),
}


def provoke(device, name: str) -> str:
    src, entries, entry, _ = CASES[name]
    try:
        device.pipeline(src, entry, {0: entries}, file="k.wgsl")
    except StudioError as e:            # naga's errors come already placed at the author's line
        return e.message
    except Exception as e:               # noqa: BLE001 (wgpu's validation error: its text is all it carries)
        return str(e)
    raise AssertionError(f"{name}: the pipeline was accepted")


def without_cause(p: LayoutProblem) -> LayoutProblem:
    return LayoutProblem(**{**p.__dict__, "cause": ""})


def test_the_fixtures_are_of_the_pinned_wgpu():
    assert FIXTURES["wgpu"] == wgpu.__version__, \
        "wgpu changed: re-capture tests/data/wgpu_layout_errors.json from provoke() and check parse_layout_error"


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_kind_is_read_from_the_pinned_wgpus_own_text(device, name):
    text = provoke(device, name)
    assert text == FIXTURES["errors"][name], f"wgpu words '{name}' differently now: {text!r}"
    got = parse_layout_error(text)
    assert got is not None and without_cause(got) == CASES[name][3]
    assert got.cause and got.cause in text


def test_every_kind_is_covered():
    assert {c[3].kind for c in CASES.values()} | {"unavailable"} == set(KINDS)


def test_a_text_worded_otherwise_is_not_misread():
    """The controls: the same facts in other words are not read as the kind they were."""
    access = FIXTURES["errors"]["access"]
    assert parse_layout_error("Validation Error\n\nCaused by:\n  buffer too small") is None
    assert parse_layout_error("") is None
    moved = parse_layout_error(access.replace("ResourceBinding { group: 0, binding: 0 }", "ResourceBinding(0, 0)"))
    assert moved.kind == "binding_type" and moved.group is None and moved.slot == "a binding"
    other = parse_layout_error(access.replace("Storage class", "Storage kind"))
    assert other.kind == "unavailable" and other.cause.startswith("Storage kind")
    size = FIXTURES["errors"]["struct_size"]
    assert parse_layout_error(size.replace("min_binding_size", "minimum size")).kind == "unavailable"
    assert parse_layout_error(FIXTURES["errors"]["access"].replace("LOAD | STORE", "STORE")).layout == \
        "Storage { access: StorageAccess(STORE) }"          # an access it does not know stays in wgpu's words


@pytest.mark.parametrize("edits,needle", [
    ({"op__toml": [('entry = "main"', 'entry = "nope"')]}, "entry point 'nope' not found in the kernel"),
    ({"forward__wgsl": [("    w: u32,", "    w: u32,\n    extra: u32,")]},
     "binding 'p': "),                       # its wording names the missing pad; the kind is read here
    ({"forward__wgsl": [("var<storage, read> x: array<f32>", "var<storage, read_write> x: array<f32>")]},
     "binding 'x': the descriptor says storage read, the kernel declares storage read_write"),
])
def test_the_checker_words_each_problem_from_the_parsed_error(ctx, pkg_copy, edits, needle):
    from studio.engine.contract.package import load_package
    from studio.engine.proof.checker import check_package
    errs = check_package(ctx, load_package(pkg_copy(**edits))).errors
    assert any(needle in e.message for e in errs), [e.format() for e in errs]
