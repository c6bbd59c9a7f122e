// core/nn/linear_input_vjp@1: one invocation per output dx[bi, j] = sum_o dy[bi, o] * w[o, j]: the
// products added in the order o = 0 .. O - 1 to an f32 accumulator that starts at +0.
struct Params {
    b: u32,
    d: u32,
    o: u32,
}

@group(0) @binding(0) var<storage, read> dy: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.b * p.d) { return; }
    let j = i % p.d;
    let bi = i / p.d;
    var acc = 0.0;
    for (var oi = 0u; oi < p.o; oi = oi + 1u) {
        acc = acc + dy[bi * p.o + oi] * w[oi * p.d + j];
    }
    dx[i] = acc;
}
