// core/reduce/sum@1: one workgroup of 256 invocations, deterministic, no atomics.
struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> acc: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    // 1) each invocation sums a contiguous chunk sequentially
    let chunk = (p.n + 255u) / 256u;
    let start = min(t * chunk, p.n);
    let end = min(start + chunk, p.n);
    var s_local = 0.0;
    for (var i = start; i < end; i = i + 1u) {
        s_local = s_local + x[i];
    }
    acc[t] = s_local;
    workgroupBarrier();
    // 2) fixed-order tree in workgroup memory: acc[t] += acc[t + s], s = 128, 64, ..., 1
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (t < s) {
            acc[t] = acc[t] + acc[t + s];
        }
        workgroupBarrier();
    }
    if (t == 0u) {
        y[0] = acc[0];
    }
}
