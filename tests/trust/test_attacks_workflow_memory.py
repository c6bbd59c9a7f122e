"""A workflow that would take the machine down is refused while it is planned (docs/security.md).

The attack seen: a 180 KB workflow file, 3,000 chained clip steps on a 10**6-sample signal, drove
the device worker to 21.5 GB in 78 s until the kernel's OOM killer fired. Every value's shape is
known at planning, and the executor keeps every value (on the device until the run ends, then read
back once), so the plan knows the run's peak and refuses it against the memory available, at the
step's line:col, before anything is uploaded or run."""
from __future__ import annotations

from pathlib import Path

import pytest

from studio.engine.arrays import available_memory
from studio.engine.errors import StudioError
from studio.engine.services.workflows import run_workflow
from studio.engine.workflow.memory import plan_memory, shares_memory
from studio.engine.workflow.plan import make_plan
from studio.engine.workflow.spec import load_workflow

MIB = 1 << 20


def chain(tmp_path: Path, steps: int, n: int) -> Path:
    """A signal of n samples and ``steps`` clip steps, each reading the one before."""
    text = ['[workflow]\nname = "chain"\n\n[steps.signal]\nop = "core/signal/spiky_signal@1"\n'
            f'params = {{ n = {n}, seed = 1 }}\n']
    prev = "signal.y"
    for i in range(steps):
        text.append(f'\n[steps.c{i}]\nop = "core/signal/clip@1"\ninputs = {{ x = "{prev}" }}\n'
                    'params = { lo = -8.0, hi = 8.0 }\n')
        prev = f"c{i}.y"
    path = tmp_path / "chain.toml"
    path.write_text("".join(text))
    return path


def _line_of(path: Path, step: str) -> int:
    return path.read_text().split("\n").index(f"[steps.{step}]") + 2        # its op = line


def test_a_chain_past_the_memory_available_is_refused_before_anything_runs(ctx, tmp_path):
    """The attack at the largest signal a step may make (2**24 samples, 64 MiB a value): just
    enough steps to pass what this machine has available, whatever it has."""
    n = 1 << 24
    per_value = n * 4 * (3 if shares_memory(ctx) else 2)        # resident + staging + host copy
    path = chain(tmp_path, available_memory() // per_value + 4, n)
    events = []
    with pytest.raises(StudioError) as info:
        run_workflow(ctx, path, out_dir=tmp_path, allow_unverified=True, on_event=events.append)
    e = info.value
    assert events == [] and not list(tmp_path.glob("*.json"))           # nothing ran, nothing written
    assert e.file == str(path) and e.field.startswith("steps.c") and e.field.endswith(".op")
    assert e.line == _line_of(path, e.field.split(".")[1]) and e.col > 0
    assert "MiB more than the" in e.message and "MiB this machine has available" in e.message
    assert "--until STEP" in e.hint and "\n" not in e.message


@pytest.mark.slow
def test_the_attack_as_seen_3000_clips_on_a_million_samples(ctx, tmp_path):
    path = chain(tmp_path, 3000, 10 ** 6)
    wf = load_workflow(path)
    need = 3001 * 4 * 10 ** 6
    if need * (3 if shares_memory(ctx) else 2) <= available_memory():
        pytest.skip("this machine has the memory for this run: it would be allowed here")
    with pytest.raises(StudioError) as info:
        make_plan(ctx, wf)
    assert "MiB this machine has available" in info.value.message and info.value.line > 1


def test_what_fits_is_planned_and_allowed(ctx, tmp_path):
    """The control: a short chain plans, with every value counted (the executor frees nothing)."""
    plan = make_plan(ctx, load_workflow(chain(tmp_path, 3, 1000)))
    mem, first = plan_memory(ctx, plan)
    assert first is None and mem.device == 4 * 4000 and mem.host == 2 * 4 * 4000
    assert mem.machine == (3 if shares_memory(ctx) else 2) * 4 * 4000


def test_the_step_named_is_where_the_values_pass_what_is_available(ctx, tmp_path):
    plan = make_plan(ctx, load_workflow(chain(tmp_path, 5, 1000)))
    k = 3 if shares_memory(ctx) else 2
    _, first = plan_memory(ctx, plan, have=k * 4 * 1000 * 3)          # three values fit, the fourth passes
    assert first == "c2"


def test_a_composite_steps_intermediates_count_while_it_runs(ctx, tmp_path):
    """windowed_median_composite materializes its (n - w + 1) x w unfold: planned on the device too."""
    op = Path(__file__).resolve().parents[2] / "examples" / "windowed_median_composite"
    path = tmp_path / "composite.toml"
    path.write_text('[workflow]\nname = "c"\n\n[steps.signal]\nop = "core/signal/spiky_signal@1"\n'
                    'params = { n = 1000, seed = 1 }\n\n[steps.median]\n'
                    f'op = "{op}"\ninputs = {{ x = "signal.y" }}\nparams = {{ w = 7 }}\n')
    mem, _ = plan_memory(ctx, make_plan(ctx, load_workflow(path)))
    values = 4 * (1000 + 994)
    assert mem.device == values + 4 * 994 * 7 and mem.host == 2 * values
