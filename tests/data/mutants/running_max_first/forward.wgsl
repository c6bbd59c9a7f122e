// user/test/running_max@1: y[i] = max(x[i .. i + w - 1]); '>=' keeps the last maximum, so of
// -0.0 and +0.0 (equal as numbers) the later one is the output, bit for bit.
struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n - p.w + 1u) { return; }
    var m = x[i];
    for (var j = 1u; j < p.w; j = j + 1u) {
        let v = x[i + j];
        if (v >= m) {
            m = v;
        }
    }
    y[i] = m;
}
