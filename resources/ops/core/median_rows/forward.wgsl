// core/reduce/median_rows@1: one invocation per row; gather the row into a fixed-size local
// array (k <= 31), stable insertion sort, take the middle.
struct Params {
    m: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> u: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.m) { return; }
    var row: array<f32, 31>;
    for (var j = 0u; j < p.k; j = j + 1u) {
        row[j] = u[i * p.k + j];
    }
    // strict '>' keeps equal values in input order (a stable sort, like the reference's)
    for (var a = 1u; a < p.k; a = a + 1u) {
        let v = row[a];
        var b = a;
        while (b > 0u && row[b - 1u] > v) {
            row[b] = row[b - 1u];
            b = b - 1u;
        }
        row[b] = v;
    }
    y[i] = row[p.k / 2u];
}
