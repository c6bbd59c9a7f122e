// core/reduce/median_rows@1, declared VJP on the device: du[i, j] = dy[i] where j is the column
// the forward selected (recomputed with the same stable insertion sort, carrying indices),
// 0 elsewhere. One invocation per row; each writes its own row: no atomics.
struct Params {
    m: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> u: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> du: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.m) { return; }
    var val: array<f32, 31>;
    var idx: array<u32, 31>;
    for (var j = 0u; j < p.k; j = j + 1u) {
        val[j] = u[i * p.k + j];
        idx[j] = j;
    }
    for (var a = 1u; a < p.k; a = a + 1u) {
        let v = val[a];
        let c = idx[a];
        var b = a;
        while (b > 0u && val[b - 1u] > v) {
            val[b] = val[b - 1u];
            idx[b] = idx[b - 1u];
            b = b - 1u;
        }
        val[b] = v;
        idx[b] = c;
    }
    let sel = idx[p.k / 2u];
    for (var j = 0u; j < p.k; j = j + 1u) {
        du[i * p.k + j] = select(0.0, dy[i], j == sel);
    }
}
