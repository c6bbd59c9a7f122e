"""The smallest training run that writes everything a training run writes (the fast lane's
training test; tests/workflows/test_training.py trains through the median): a trainable gain per
sample (a fill source) through core/math/multiply@1 against the clean signal, two steps, a sealed
checkpoint and the provenance record of kind "train" (studio/engine/workflow/train_record.py). The
tape proves the device VJPs it runs first (multiply's and mse's: a few seconds)."""
import json

import numpy as np

from studio.engine.proof.gradcheck import gradcheck
from studio.engine.proof.receipts import write_gradcheck_receipt
from studio.engine.services.workflows import train as train_use_case

TINY = """
[workflow]
name = "tiny_gain"

[steps.signal]
op = "core/signal/spiky_signal@1"
params = { n = 256, seed = 7 }

[sources.gain]
fill = 0.5
like = "signal.y"
trainable = true

[steps.scaled]
op = "core/math/multiply@1"
inputs = { a = "signal.y", b = "gain" }

[sources.clean]
spike_free = "signal"

[train]
prediction = "scaled.y"
target = "clean"
loss = "core/reduce/mse@1"
optimizer = "sgd"
learning_rate = 0.05
steps = 2
"""


def test_two_steps_write_a_checkpoint_and_a_train_record(ctx, tmp_path):
    ledger = tmp_path / "gradchecks"
    for op in ("core/math/multiply@1", "core/reduce/mse@1"):
        pkg = ctx.catalog.resolve(op)
        rep = gradcheck(ctx, pkg)
        assert rep.verdict == "pass", (op, rep.why)
        write_gradcheck_receipt(pkg, rep, ledger, seal=ctx.seal)
    wf = tmp_path / "tiny.toml"
    wf.write_text(TINY)
    out = train_use_case(ctx, wf, steps=2, receipts=ledger, allow_unverified=True, out_dir=tmp_path,
                         checkpoint="tiny.checkpoint.json", record="tiny.record.json")
    assert len(out["losses"]) == 2 and out["losses"][1] < out["losses"][0]
    rec = json.loads((tmp_path / "tiny.record.json").read_text())
    training = rec["training"]
    assert rec["kind"] == "train" and training["losses"] == out["losses"] and training["steps_done"] == 2
    assert training["initial_params"]["gain"]["values"] == [0.5] * 256
    assert np.float32(training["final_params"]["gain"]["values"][0]) == out["params"]["gain"][0] != 0.5
    assert {s["name"]: s["gradcheck"]["status"] for s in rec["steps"]} == {
        "signal": "nondifferentiable", "scaled": "pass", "loss": "pass"}
    assert training["checkpoint"]["file"] == str(tmp_path / "tiny.checkpoint.json")
    assert json.loads((tmp_path / "tiny.checkpoint.json").read_text())["step"] == 2
