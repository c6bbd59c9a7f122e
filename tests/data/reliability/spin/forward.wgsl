// user/test/spin@1: a kernel that never finishes, for the device worker's kill test.
// The loop's only exit depends on the data (x[0] == 7), so no compiler can prove it away;
// each pass stores to y, so the loop has an effect and cannot be deleted either.
// On a hardware GPU one invocation spins forever. Mesa's lavapipe bounds every invocation
// to 65,535 loop iterations (its own hang guard), so the tests launch k = 4e9 invocations:
// about two weeks of work on lavapipe (docs/reliability.md has the measurement).
struct Params {
    n: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.k) { return; }
    var acc = x[i % p.n] + i;
    loop {
        if (x[0] == 7u) { break; }
        acc = acc * 1664525u + 1013904223u;
        y[i % p.n] = acc;
    }
}
