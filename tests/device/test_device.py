import pytest

from studio.engine.device.device import compile_error
from studio.engine.errors import StudioError


def test_profile_names_the_adapter(device):
    prof = device.profile.to_json()
    assert prof["adapter"]["backend_type"] and prof["wgpu_version"]
    assert len(prof["id"]) == 16 and prof["limits"]["max-storage-buffer-binding-size"] > 0


def test_compile_error_maps_to_the_authors_line_and_column(device):
    src = "@compute @workgroup_size(1)\nfn main() {\n    let a = 1u\n    let b = 2u;\n}\n"
    with pytest.raises(StudioError) as e:
        device.compile(src, file="k.wgsl")
    assert (e.value.file, e.value.line, e.value.col) == ("k.wgsl", 4, 5)
    assert "expected" in e.value.message


def test_type_error_position(device):
    src = "@compute @workgroup_size(1)\nfn main() {\n    let a: f32 = 1u;\n}\n"
    with pytest.raises(StudioError) as e:
        device.compile(src, file="k.wgsl")
    assert e.value.line == 3


def test_errors_inside_engine_generated_code_carry_no_user_position():
    class Fake(Exception):
        pass
    e = compile_error(Fake("Shader parsing error: oops\n  ┌─ wgsl:40:2"), file="k.wgsl", user_lines=10)
    assert e.line is None and e.file == "k.wgsl"


def test_pipeline_cache_is_keyed_by_kernel(device):
    src = ("@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n"
           "@compute @workgroup_size(1) fn main() { y[0] = 1.0; }\n")
    groups = {0: [{"binding": 0, "kind": "storage", "access": "read_write", "min_size": 0}]}
    a = device.pipeline(src, "main", groups, file="k.wgsl")
    assert device.pipeline(src, "main", groups, file="k.wgsl") is a
    assert device.pipeline(src.replace("1.0", "2.0"), "main", groups, file="k.wgsl") is not a
