// core/nn/softmax_xent@1: the batch-mean softmax cross-entropy and its gradient, in one workgroup of 64.
// Per row r: m = max_j z (every exp argument d_j = z_j - m is <= 0: nothing overflows), S = sum_j exp(d_j)
// in order j = 0 .. k - 1, L = log(S), the row's loss l_r = sum_j t_j * (L - d_j) in order (each term
// >= 0), and dz_j = (exp(d_j) / S - t_j) / b. The loss: the row losses added in row order to an f32
// accumulator that starts at +0, then divided by b. In round q lane l takes row 64q + l; lane 0 then adds
// that round's row losses in row order. Lane 0 makes at most 16 rounds of about 4k + 64 iterations
// (b <= 1024, k <= 256), far below the 65,535 lavapipe allows an invocation.
struct Params {
    b: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> z: array<f32>;
@group(0) @binding(1) var<storage, read> t: array<f32>;
@group(0) @binding(2) var<storage, read_write> loss: array<f32>;
@group(0) @binding(3) var<storage, read_write> dz: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const LANES: u32 = 64u;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    // one workgroup does the op (uniform: the barriers below are allowed)
    if (wid.x + wid.y * nwg.x != 0u) { return; }
    let fb = f32(p.b);
    var total = 0.0;
    for (var r0 = 0u; r0 < p.b; r0 = r0 + LANES) {
        let r = r0 + lane;
        var row = 0.0;
        if (r < p.b) {
            let base = r * p.k;
            var m = z[base];
            for (var j = 1u; j < p.k; j = j + 1u) {
                m = max(m, z[base + j]);
            }
            var s = 0.0;
            for (var j = 0u; j < p.k; j = j + 1u) {
                s = s + exp(z[base + j] - m);
            }
            let ls = log(s);
            for (var j = 0u; j < p.k; j = j + 1u) {
                let d = z[base + j] - m;
                row = row + t[base + j] * (ls - d);
                dz[base + j] = (exp(d) / s - t[base + j]) / fb;
            }
        }
        part[lane] = row;
        workgroupBarrier();
        if (lane == 0u) {
            for (var l = 0u; l < LANES; l = l + 1u) {
                if (r0 + l < p.b) { total = total + part[l]; }
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        loss[0] = total / fb;
    }
}
