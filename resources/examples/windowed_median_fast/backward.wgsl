// user/demo/windowed_median_fast@1, declared VJP on the device: dx[j] = sum of dy[i] over the
// windows i whose argmedian is j. Each invocation owns a run of RUN elements of dx, slides the
// forward's sorted window (carrying input indices) over every window that touches the run, and
// adds dy[i] where the window's middle element lies in the run. Windows are visited in
// increasing i, so each sum is in the reference's order (deterministic, no atomics).
override W: u32;                 // the window, as in the forward
override RUN: u32 = 64u;         // elements of dx per invocation (the size of acc below)

struct Params {
    n: u32,
    w: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 64u;
    if (t >= (p.n + RUN - 1u) / RUN) { return; }
    let j0 = t * RUN;
    let j1 = min(j0 + RUN, p.n);
    let m = p.n - W + 1u;                               // windows
    let i0 = select(0u, j0 + 1u - W, j0 + 1u >= W);     // first window touching x[j0]
    let i1 = min(j1, m);                                // one past the last window touching x[j1 - 1]
    var acc: array<f32, 64>;
    for (var j = 0u; j < RUN; j++) { acc[j] = 0.0; }
    var s: array<f32, 32>;
    var q: array<u32, 32>;
    for (var j = 0u; j < W; j++) {
        let v = x[i0 + j];
        let vi = i0 + j;
        var prev = s[0];
        var prevq = q[0];
        for (var k = 0u; k < W; k++) {
            let cur = s[k];
            let curq = q[k];
            let up = k > 0u && prev > v;
            let keep = k < j && cur <= v;
            s[k] = select(select(v, prev, up), cur, keep);
            q[k] = select(select(vi, prevq, up), curq, keep);
            prev = cur;
            prevq = curq;
        }
    }
    for (var i = i0; i < i1; i++) {
        if (i > i0) {
            let o = x[i - 1u];
            let v = x[i + W - 1u];
            let vi = i + W - 1u;
            for (var k = 0u; k + 1u < W; k++) {
                let d = s[k] >= o;
                s[k] = select(s[k], s[k + 1u], d);
                q[k] = select(q[k], q[k + 1u], d);
            }
            var prev = s[0];
            var prevq = q[0];
            for (var k = 0u; k < W; k++) {
                let cur = s[k];
                let curq = q[k];
                let up = k > 0u && prev > v;
                let keep = k + 1u < W && cur <= v;
                s[k] = select(select(v, prev, up), cur, keep);
                q[k] = select(select(vi, prevq, up), curq, keep);
                prev = cur;
                prevq = curq;
            }
        }
        let a = q[W / 2u];
        if (a >= j0 && a < j1) {
            acc[a - j0] = acc[a - j0] + dy[i];
        }
    }
    for (var j = j0; j < j1; j++) {
        dx[j] = acc[j - j0];
    }
}
