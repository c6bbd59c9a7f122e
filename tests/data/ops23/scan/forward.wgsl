// user/test/prefix_sum@1: one workgroup of 256 invocations; each scans a contiguous chunk after
// adding the sums of the chunks before it.
struct Params {
    n: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
    let chunk = (p.n + 255u) / 256u;
    let start = min(t * chunk, p.n);
    let end = min(start + chunk, p.n);
    var s = 0.0;
    for (var i = start; i < end; i = i + 1u) {
        s = s + x[i];
    }
    part[t] = s;
    workgroupBarrier();
    var acc = 0.0;
    for (var j = 0u; j < t; j = j + 1u) {
        acc = acc + part[j];
    }
    for (var i = start; i < end; i = i + 1u) {
        acc = acc + x[i];
        y[i] = acc;
    }
}
