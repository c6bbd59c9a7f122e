// core/nn/linear_weight_grad@1: one invocation per output, contracting the batch: the first o * d
// invocations give dw[oi, j] = sum_b dy[b, oi] * x[b, j], the last o give db[oi] = sum_b dy[b, oi]. Each
// sum adds its terms in the order b = 0 .. B - 1 to an f32 accumulator that starts at +0.
struct Params {
    b: u32,
    d: u32,
    o: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dw: array<f32>;
@group(0) @binding(3) var<storage, read_write> db: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    let nw = p.o * p.d;
    if (i < nw) {
        let j = i % p.d;
        let oi = i / p.d;
        var acc = 0.0;
        for (var bi = 0u; bi < p.b; bi = bi + 1u) {
            acc = acc + dy[bi * p.o + oi] * x[bi * p.d + j];
        }
        dw[i] = acc;
    } else if (i < nw + p.o) {
        let oi = i - nw;
        var acc = 0.0;
        for (var bi = 0u; bi < p.b; bi = bi + 1u) {
            acc = acc + dy[bi * p.o + oi];
        }
        db[oi] = acc;
    }
}
