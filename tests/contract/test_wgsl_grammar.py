"""The product's WGSL grammar (resources/grammars/wgsl.lark) against naga, the compiler wgpu runs
at create_shader_module: every shipped and ported kernel naga accepts parses, and texts naga
refuses for their syntax are refused too, at the line where the grammar stops."""
from pathlib import Path

import pytest

from studio.engine.errors import StudioError
from studio.engine.proof.wgsl_reader import parse_wgsl, read_module

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("resources/ops", "resources/examples", "resources/templates", "tests/fixtures/porting",
         "tests/fixtures/races", "shaders", "examples")
KERNELS = sorted({p for root in ROOTS for p in (REPO / root).rglob("*.wgsl")})
STORY = (REPO / "examples" / "windowed_median" / "forward.wgsl").read_text()

# (what is broken, old, new, the line the grammar stops at)
BROKEN = [
    ("a missing semicolon", "    let i = gid.x + gid.y * nwg.x * 64u;", "    let i = gid.x + gid.y * nwg.x * 64u", 16),
    ("an unclosed parameter list", "vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
     "vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32> {", 13),
    ("a declaration without a name", "    var win: array<f32, 31>;", "    var : array<f32, 31>;", 17),
    ("an assignment without a value", "    y[i] = win[p.w / 2u];", "    y[i] = ;", 31),
    ("an unclosed template list", "var<storage, read_write> y: array<f32>;", "var<storage, read_write> y: array<f32;", 9),
    ("a stray closing brace", "        win[b] = v;\n    }", "        win[b] = v;\n    }}", 31),
    ("else without an if", "    if (i >= p.n - p.w + 1u) { return; }", "    else { return; }", 16),
]


def test_the_corpus_of_kernels_is_the_whole_product():
    assert len(KERNELS) >= 60 and any(p.name == "bf16.wgsl" for p in KERNELS)


def test_every_kernel_naga_accepts_parses(device):
    accepted = 0
    for path in KERNELS:
        source = path.read_text()
        try:
            device.compile(source, file=str(path))
        except StudioError:
            continue                       # naga refuses it (a deliberately broken twin): not judged here
        accepted += 1
        read_module(source, file=str(path))    # raises at line:col if the grammar refused it
    assert accepted >= 60


@pytest.mark.parametrize("what, old, new, line", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_syntax_error_naga_refuses_is_refused_at_its_line(device, what, old, new, line):
    assert old in STORY
    source = STORY.replace(old, new)
    with pytest.raises(StudioError):
        device.compile(source, file="forward.wgsl")
    with pytest.raises(StudioError) as e:
        parse_wgsl(source, file="forward.wgsl")
    assert e.value.file == "forward.wgsl" and e.value.line == line, e.value.format()
    assert e.value.message.startswith("unexpected ")


def test_nested_template_lists_and_shifts_read_apart():
    """`>>` is never one token: it closes two template lists, or it is a right shift."""
    m = read_module("@group(0) @binding(0) var<storage, read_write> h: array<atomic<u32>>;\n"
                    "var<private> m: array<vec4<f32>, 4>;\n"
                    "fn f(a: u32) -> u32 { var b = a >> 2u; b >>= 1u; return b << 1u; }\n")
    assert m.storage == {"h": "read_write"} and set(m.globals) == {"h", "m"} and "f" in m.functions
