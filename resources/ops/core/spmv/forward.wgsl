// core/sparse/spmv@1: y = A x, A in CSR form (row_ptr, col, val). The classic scalar CSR kernel:
// one invocation per row, the row's entries accumulated in storage order.
struct Params {
    rows: u32,
}

@group(0) @binding(0) var<storage, read> row_ptr: array<u32>;
@group(0) @binding(1) var<storage, read> col: array<u32>;
@group(0) @binding(2) var<storage, read> val: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // linear index; also correct if the dispatch is folded into 2-D for many rows
    let row = gid.x + gid.y * nwg.x * 64u;
    if (row >= p.rows) { return; }
    let start = row_ptr[row];
    let end = row_ptr[row + 1u];
    var sum = 0.0;
    for (var j = start; j < end; j = j + 1u) {
        sum = sum + val[j] * x[col[j]];
    }
    y[row] = sum;
}
