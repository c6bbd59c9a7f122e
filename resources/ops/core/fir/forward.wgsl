// core/signal/fir@1: y[i] = sum_{j=0}^{k-1} taps[j] * x[i + j], one invocation per output,
// accumulated sequentially in j order.
struct Params {
    n: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> taps: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for large n
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n - p.k + 1u) { return; }
    var acc = 0.0;
    for (var j = 0u; j < p.k; j = j + 1u) {
        acc = acc + taps[j] * x[i + j];
    }
    y[i] = acc;
}
