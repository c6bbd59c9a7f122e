// user/demo/windowed_median_fast@1: the story op's contract, a faster kernel. Each invocation
// computes a run of RUN consecutive outputs: it sorts its first window once, then slides it,
// deleting the oldest value and inserting the newest in one pass of selects (no branches). The
// window size W is an override (bindings: `override W: u32 = w`), so every loop over the window
// has a constant trip count: the compiler unrolls it and the window stays in registers.
//
// Ties, for bitwise exactness: the window is kept in stable-sort order (by value, then by input
// index). The oldest value precedes every value that compares equal to it, so it is deleted at
// the first position not below it; the newest follows every equal value, so it is inserted after
// them. The middle element is then the one the story kernel's stable insertion sort picks.
override W: u32;                 // the window (1..31, odd), one pipeline per value
override RUN: u32 = 512u;        // outputs per invocation: tunable per GPU (`tune [..]` in the bindings, `scellis tune`)

struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 64u;
    let m = p.n - W + 1u;                 // outputs
    if (t >= (m + RUN - 1u) / RUN) { return; }
    let i0 = t * RUN;
    let i1 = min(i0 + RUN, m);
    var s: array<f32, 32>;
    // the first window: stable insertion of W values, one at a time (j values sorted so far)
    for (var j = 0u; j < W; j++) {
        let v = x[i0 + j];
        var prev = s[0];
        for (var k = 0u; k < W; k++) {
            let cur = s[k];
            let shifted = select(v, prev, k > 0u && prev > v);
            s[k] = select(shifted, cur, k < j && cur <= v);
            prev = cur;
        }
    }
    y[i0] = s[W / 2u];
    for (var i = i0 + 1u; i < i1; i++) {
        let o = x[i - 1u];                // leaves the window
        let v = x[i + W - 1u];            // enters it
        // delete o and insert v in one pass over the window. t[k], the window without o, is
        // s[k] before o's position and s[k + 1] from it on (s[k] >= o holds from there on); v
        // goes after every t[k] <= v, and what lies after it moves one to the right
        var tprev = s[0];
        var prev_gt = false;               // t[k - 1] > v: position k holds t[k - 1]
        for (var k = 0u; k < W; k++) {
            let tk = select(s[k], s[min(k + 1u, W - 1u)], s[k] >= o);
            let le = k + 1u < W && tk <= v;
            s[k] = select(select(v, tprev, prev_gt), tk, le);
            prev_gt = !le;                 // tk > v: x is finite (no NaN), so !(tk <= v) is tk > v
            tprev = tk;
        }
        y[i] = s[W / 2u];
    }
}
