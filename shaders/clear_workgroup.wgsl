// Engine-owned: clears workgroup memory between kernels of different packages
// (studio/engine/device/device.py, Device.isolate; docs/reliability.md).
//
// WebGPU promises that `var<workgroup>` memory starts zeroed. Mesa's lavapipe (22.3) does not
// keep that promise: each of its executor threads owns one block of workgroup memory, reused by
// every workgroup it runs, never cleared, so a kernel reads what the last kernel on that thread
// left there — another package's values, or heap contents.
//
// GROUPS workgroups run, one per executor thread. Each zeroes WORDS words (the device's whole
// max-compute-workgroup-storage-size), reads them back (so that no compiler drops the stores as
// dead), and waits until all GROUPS workgroups have arrived. A workgroup keeps its executor
// until it finishes, so when every workgroup saw all GROUPS arrive, GROUPS distinct executors
// cleared at the same time: every executor's memory is zero. The engine reads `meet` back and
// runs this again until that holds.
override WORDS: u32 = 4096u;
override GROUPS: u32 = 1u;

struct Meet {
    arrived: atomic<u32>,
    met: atomic<u32>,
    dirty: atomic<u32>,
    patience: u32,          // how long a workgroup waits for the others, in laps of 32 polls
}

var<workgroup> scratch: array<u32, WORDS>;
@group(0) @binding(0) var<storage, read_write> meet: Meet;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) li: u32) {
    for (var i = li; i < WORDS; i += 64u) {
        scratch[i] = 0u;
    }
    workgroupBarrier();
    var acc = 0u;
    for (var i = li; i < WORDS; i += 64u) {
        acc |= scratch[WORDS - 1u - i];
    }
    if (acc != 0u) {
        atomicAdd(&meet.dirty, 1u);
    }
    if (li != 0u) {
        return;
    }
    atomicAdd(&meet.arrived, 1u);
    // Polls are read-modify-writes (atomicOr with 0): an atomicLoad in a loop may be hoisted
    // out of it. Lavapipe ends an invocation after 65,535 loop iterations in all, so each lap
    // polls 32 times in straight-line code: up to ~2 million polls, ~50 ms on lavapipe.
    let patience = min(meet.patience, 60000u);
    var all = false;
    for (var lap = 0u; lap < patience && !all; lap += 1u) {
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
        all = all || atomicOr(&meet.arrived, 0u) >= GROUPS;
    }
    if (all) {
        atomicAdd(&meet.met, 1u);
    }
}
