// One invocation per output: scan the window, keep the first maximum (strict '>').
struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n - p.w + 1u) { return; }
    var m = x[i];
    for (var j = 1u; j < p.w; j = j + 1u) {
        if (x[i + j] > m) { m = x[i + j]; }
    }
    y[i] = m;
}
