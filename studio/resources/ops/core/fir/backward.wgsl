// core/signal/fir@1, declared VJP on the device (no atomics; every sum in a fixed order):
//   the first ceil(n / 256) workgroups, one invocation per element of dx:
//     dx[j] = sum_i dy[i] * taps[j - i],  i = max(0, j - k + 1) .. min(j, m - 1)
//   then one workgroup of 256 per tap t: lane l sums dy[i] * x[i + t] over i = l, l + 256, ...
//     (at most 16,384 terms each for 4.2 M samples), then a fixed tree over the 256 lanes.
// where m = n - k + 1 is the length of y. A single loop over all of y would be cut short by
// lavapipe, which ends any invocation's loop after 65,535 iterations without an error; a dx sum
// has at most k terms, so the signature admits at most 65,535 taps (k <= 65535).
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
    for (var i = lane; i < m; i = i + LANES) {
        acc = acc + dy[i] * x[i + t];
    }
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
