// core/nn/conv2d_bf16_weight_grad_strided@1: bf16 strided 2-D convolution's weight gradient (NCHW, padding p), contracting the batch: df[o,c,j1,j2] = rnd(sum_b,i1,i2 dy[b,o,i1,i2] xp[b,c,s*i1+j1,s*i2+j2]).
// bf16 tensors are array<f32>: each word holds a bf16 in its high half (docs/bf16.md), so reading is exact;
// products of two bf16 are exact in f32; the sum is f32; the one rounding to bf16 is bf16_round.
struct Params {
    b: u32,
    c: u32,
    h: u32,
    w: u32,
    o: u32,
    k: u32,
    m1: u32,
    m2: u32,
    s: u32,
    pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> df: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// bf16 rounding by bit operations (docs/bf16.md). A bf16 lives in the HIGH half of a 32-bit word
// with the low half zero, so a bf16 binding is declared array<f32> and read as it is. Every value a
// kernel stores into a bf16 binding goes through bf16_round: round to nearest, ties to even, NaN
// kept and made quiet; a carry runs into the exponent (to inf past the largest bf16). The bf16 ops'
// kernels carry this function verbatim (tests/device/test_bf16_device.py checks the copies).
fn bf16_round(v: f32) -> f32 {
    let b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return bitcast<f32>((b | 0x00400000u) & 0xffff0000u);
    }
    return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u);
}

// The order "chunked-256" (docs/bf16.md): per output, the terms in the order (b, i1, i2) row-major,
// cut into chunks of CHUNK consecutive terms; each chunk summed from +0 in order; the chunks' sums
// added from +0 in chunk order; rounded once. A workgroup per output: in round r its lane l sums
// chunk 64r + l, then lane 0 adds the round's chunk sums in chunk order. Lavapipe ends an
// invocation's loops after 65,535 iterations in all: lane 0 makes at most 128 rounds of
// 256 + 64 + 1 (b * m1 * m2 <= 2^21, the signature's relation), about 41,000.
// Up to 64 chunks (b * m1 * m2 <= 16,384) one invocation makes the same additions in the same order
// alone, within 16,384 + 64 iterations: then each lane of a workgroup takes an output of its own.
const LANES: u32 = 64u;
const CHUNK: u32 = 256u;
var<workgroup> part: array<f32, 64>;

fn term(t: u32, oi: u32, ci: u32, j1: u32, j2: u32) -> f32 {
    let i2 = t % p.m2;
    let i1 = (t / p.m2) % p.m1;
    let bi = t / (p.m2 * p.m1);
    let r1 = p.s * i1 + j1;          // a row of the padded image: the input's row r1 - pad
    let r2 = p.s * i2 + j2;
    if (r1 < p.pad || r1 - p.pad >= p.h || r2 < p.pad || r2 - p.pad >= p.w) { return 0.0; }
    return dy[((bi * p.o + oi) * p.m1 + i1) * p.m2 + i2] * x[((bi * p.c + ci) * p.h + r1 - p.pad) * p.w + r2 - p.pad];
}

// One output's sum in the order chunked-256, by one invocation (at most 64 chunks: see above).
fn chunked(g: u32, terms: u32, chunks: u32) -> f32 {
    let j2 = g % p.k;
    let j1 = (g / p.k) % p.k;
    let ci = (g / (p.k * p.k)) % p.c;
    let oi = g / (p.k * p.k * p.c);
    var total = 0.0;
    for (var q = 0u; q < chunks; q = q + 1u) {
        var acc = 0.0;
        let hi = min(q * CHUNK + CHUNK, terms);
        for (var t = q * CHUNK; t < hi; t = t + 1u) {
            acc = acc + term(t, oi, ci, j1, j2);
        }
        total = total + acc;
    }
    return total;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    // the workgroup's linear index (uniform: the barriers below are allowed)
    let g = wid.x + wid.y * nwg.x;
    let outputs = p.o * p.c * p.k * p.k;
    let terms = p.b * p.m1 * p.m2;
    let chunks = (terms + CHUNK - 1u) / CHUNK;
    var total = 0.0;
    var at = g;                             // the output this invocation stores, if it stores one
    var stores = lane == 0u;
    if (chunks <= LANES) {                 // uniform: every lane of every workgroup takes this branch
        at = g * LANES + lane;              // 64 outputs per workgroup, one per lane
        stores = at < outputs;
        if (stores) {
            total = chunked(at, terms, chunks);
        }
    } else {                                // more chunks: a workgroup per output df[g]
        if (g >= outputs) { return; }
        let j2 = g % p.k;
        let j1 = (g / p.k) % p.k;
        let ci = (g / (p.k * p.k)) % p.c;
        let oi = g / (p.k * p.k * p.c);
        for (var r = 0u; r * LANES < chunks; r = r + 1u) {
            let q = r * LANES + lane;
            var acc = 0.0;
            if (q < chunks) {
                let hi = min(q * CHUNK + CHUNK, terms);
                for (var t = q * CHUNK; t < hi; t = t + 1u) {
                    acc = acc + term(t, oi, ci, j1, j2);
                }
            }
            part[lane] = acc;
            workgroupBarrier();
            if (lane == 0u) {
                for (var l = 0u; l < LANES; l = l + 1u) {
                    if (r * LANES + l < chunks) { total = total + part[l]; }
                }
            }
            workgroupBarrier();
        }
    }
    if (stores) {
        df[at] = bf16_round(total);
    }
}
