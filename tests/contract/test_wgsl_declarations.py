"""The checks that compare a kernel's WGSL with its contract (@workgroup_size, proof/geometry.py;
overrides, device/overrides.py; bindings, device/layout.py) read the WGSL with the product's grammar
(contract/wgsl.py), not a token scan. Each construct here was misread by the token scan they used
before (a comment where a token was expected, an expression for a size, an attribute after a
comment); each test has the plain spelling beside it as its control, and a wrong kernel still fails."""
import pytest

from studio.engine.contract import wgsl
from studio.engine.contract.bindings import parse_bindings
from studio.engine.device.layout import check_layout, wgsl_declarations
from studio.engine.device.overrides import check_overrides
from studio.engine.errors import StudioError
from studio.engine.proof.geometry import check_workgroup_size

BODY = "{\n    let i = gid.x;\n    if (i >= arrayLength(&y)) { return; }\n    y[i] = x[i];\n}\n"
X = "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
FN = "fn main(@builtin(global_invocation_id) gid: vec3<u32>) " + BODY


def workgroup(kernel: str, declared=64):
    return check_workgroup_size(kernel, "main", declared, kernel_file="k.wgsl", field="kernel.workgroup_size",
                                manifest_file="op.toml")


def test_a_workgroup_size_written_as_an_expression_is_read_not_taken_for_missing():
    """The token scan stopped at `*` and reported "no @workgroup_size attribute" at `fn`; the parse
    tree reads the expression and warns that it cannot compare it, at the attribute."""
    errs, warns = workgroup("@compute @workgroup_size(8 * 8)\n" + FN)
    assert errs == [] and len(warns) == 1
    assert "@workgroup_size(8 * 8) of 'main' uses a name" in warns[0].message and (warns[0].line, warns[0].col) == (1, 11)
    # controls: a number that agrees passes, one that disagrees fails at the attribute, none at all at `fn`
    assert workgroup("@compute @workgroup_size(64)\n" + FN) == ([], [])
    errs, _ = workgroup("@compute\n  // a comment: @workgroup_size(64)\n  @workgroup_size(32) /* not 64 */\n" + FN)
    assert len(errs) == 1 and "disagrees with kernel.workgroup_size = 64" in errs[0].message
    assert (errs[0].line, errs[0].col) == (3, 4)
    errs, _ = workgroup("// @compute @workgroup_size(64)\n@compute\n" + FN)
    assert len(errs) == 1 and "has no @workgroup_size attribute" in errs[0].message and errs[0].line == 3


def test_an_id_after_a_block_comment_is_still_an_id():
    """`@id(3) /* slot */ override W` : the token scan looked for `@id(3)` right before `override`,
    met the comment, and let the @id pass; the descriptor sets overrides by name, so it is an error."""
    desc = parse_bindings("@group(0) @binding(0) x : storage read f32[n]\noverride W: u32 = w", file="op.toml")
    commented = "@id(3) /* the window */ override W: u32;\n" + X
    errs = check_overrides(commented, desc, kernel_file="k.wgsl", descriptor_file="op.toml")
    assert len(errs) == 1 and "the kernel gives it @id(3)" in errs[0].message
    assert (errs[0].related[0].line, errs[0].related[0].col) == (1, 34)
    plain = "override W: u32;\n" + X                                    # the control: no @id, no error
    assert check_overrides(plain, desc, kernel_file="k.wgsl", descriptor_file="op.toml") == []


def test_overrides_at_module_scope_only_and_their_types():
    src = ("override A = 0x10u;\noverride B = 1.5f;\noverride C = -1;\n"
           "fn f() { let override_not = 1; }\n@id(\n  7\n) override\n  D\n  : i32;\n")
    got = {n: (o.type, o.id, o.default, o.line, o.col) for n, o in wgsl.overrides(src).items()}
    assert got == {"A": ("u32", None, True, 1, 10), "B": ("f32", None, True, 2, 10), "C": (None, None, True, 3, 10),
                   "D": ("i32", "7", False, 8, 3)}


SPREAD = ("@binding(/* the output */ 1)\n"
          "  // written by every invocation\n"
          "  @group(0) var<storage, read_write>\n"
          "  /* one f32 per element */ y: array<f32>;\n")


def test_a_binding_across_lines_with_comments_and_attributes_reversed():
    """The token scan took the comment after `var<...>` for the variable's name and the comment in
    `@binding(...)` for its number; the parse tree gives `y` at @group(0) @binding(1), at y's line:col."""
    assert wgsl_declarations(X + SPREAD) == [
        {"group": 0, "binding": 0, "name": "x", "space": ["storage", "read"], "line": 1, "col": 42},
        {"group": 0, "binding": 1, "name": "y", "space": ["storage", "read_write"], "line": 5, "col": 29}]
    with pytest.raises(StudioError) as e:                   # a text the grammar refuses: where it stopped
        wgsl.variables(X + SPREAD.replace("y: array", ": array"), file="k.wgsl")
    assert (e.value.file, e.value.line) == ("k.wgsl", 5) and "unexpected ':'" in e.value.message
    assert wgsl_declarations(X + SPREAD.replace("y: array", ": array")) == []   # display only: none, no crash


def test_a_misplaced_binding_is_shown_at_the_name_across_lines(device):
    """Through the compiler: the descriptor puts y at @binding(2), the kernel (spread over lines) at
    @binding(1); the error names both places, the kernel's at the name y."""
    kernel = X + SPREAD + "@compute @workgroup_size(64)\n" + FN
    right = parse_bindings("@group(0) @binding(0) x : storage read f32[n]\n"
                           "@group(0) @binding(1) y : storage read_write f32[n]", file="op.toml")
    assert check_layout(device, kernel, right, entry="main", kernel_file="k.wgsl", descriptor_file="op.toml") == []
    wrong = parse_bindings("@group(0) @binding(0) x : storage read f32[n]\n"
                           "@group(0) @binding(2) y : storage read_write f32[n]", file="op.toml")
    errs = check_layout(device, kernel, wrong, entry="main", kernel_file="k.wgsl", descriptor_file="op.toml")
    e = next(e for e in errs if "binding 'y'" in e.message)
    assert (e.file, e.line) == ("op.toml", 2)
    site = e.related[0]
    assert site.message == "`var<storage, read_write> y` at @group(0) @binding(1)"
    assert (site.file, site.line, site.col) == ("k.wgsl", 5, 29)
