// core/signal/fir@1, declared VJP on the device (no atomics; every sum in a fixed order), one
// dispatch, every output its own invocations:
//   the first ceil(n / 256) workgroups, one invocation per element of dx:
//     dx[j] = sum_i dy[i] * taps[j - i],  i = max(0, j - k + 1) .. min(j, m - 1)   (at most k terms)
//   then one workgroup of 256 per tap t, a tree over its lanes: lane l sums dy[i] * x[i + t] over
//     i = l, l + 256, l + 512, ... in that order, sixteen terms per pass of its loop (written out),
//     then a fixed tree over the 256 lane sums.
// where m = n - k + 1 is the length of y. Lavapipe ends an invocation's loops after 65,535
// iterations in all, without an error. So no invocation loops over the whole signal: a dx sum has
// at most k <= 65535 terms (the signature's relation), and a lane makes ceil(m / 4096) passes,
// under the cap up to 268 M samples, eight times the largest array a storage binding holds
// (128 MiB: 33.5 M f32; docs/workflows.md, "Size").
struct Params {
    n: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> taps: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@group(0) @binding(4) var<storage, read_write> dtaps: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

const LANES: u32 = 256u;
const PASS: u32 = 4096u;            // LANES * 16: the terms one pass of a lane's loop covers
var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    // the workgroup's linear index; also correct if the dispatch is folded into 2-D for large n
    let g = wid.x + wid.y * nwg.x;
    let m = p.n - p.k + 1u;
    let dx_groups = (p.n + LANES - 1u) / LANES;
    if (g < dx_groups) {
        let j = g * LANES + lane;
        if (j < p.n) {
            let lo = select(0u, j + 1u - p.k, j + 1u >= p.k);
            let hi = min(j, m - 1u);
            var acc = 0.0;
            for (var i = lo; i <= hi; i = i + 1u) {
                acc = acc + dy[i] * taps[j - i];
            }
            dx[j] = acc;
        }
        return;
    }
    let t = g - dx_groups;          // uniform across the workgroup: barriers below are allowed
    if (t >= p.k) {
        return;
    }
    var acc = 0.0;
    // BEGIN lane sum: i = lane, lane + 256, ... < m, in order; 16 terms a pass
    for (var base = lane; base < m; base = base + PASS) {
        var i = base;
        i = base + 0u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 256u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 512u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 768u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 1024u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 1280u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 1536u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 1792u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 2048u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 2304u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 2560u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 2816u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 3072u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 3328u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 3584u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
        i = base + 3840u; if (i < m) { acc = acc + dy[i] * x[i + t]; }
    }
    // END lane sum
    part[lane] = acc;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s / 2u) {
        if (lane < s) {
            part[lane] = part[lane] + part[lane + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        dtaps[t] = part[0];
    }
}
