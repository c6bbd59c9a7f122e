"""Workflow files (docs/workflows.md): the shipped ones parse; every bad file is refused with a
StudioError at the file, line, column and field of the mistake (no device needed)."""
import os
import wave

import numpy as np
import pytest

from studio.engine.errors import StudioError
from studio.engine.resources import ROOT
from studio.engine.workflow import graph
from studio.engine.workflow.spec import load_workflow, parse_workflow
from studio.engine.workflow.wavio import read_wav, write_wav

STORY = ROOT / "workflows" / "spike_removal.toml"
TRAIN = ROOT / "workflows" / "train_median.toml"

HEAD = '[workflow]\nname = "t"\n'
SIGNAL = '[steps.signal]\nop = "core/signal/spiky_signal@1"\nparams = { n = 64, seed = 1 }\n'


def at(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """(line, col), 1-based, of the nth occurrence of needle in text."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    return text.count("\n", 0, i) + 1, i - (text.rfind("\n", 0, i) + 1) + 1


def refused(text: str, tmp_path=None) -> StudioError:
    with pytest.raises(StudioError) as e:
        wf = parse_workflow(text, file="w.toml", base=str(tmp_path or "/nonexistent"))
        graph.order(wf)
    assert e.value.file == "w.toml"
    return e.value


def test_the_shipped_workflows_parse_into_a_dag():
    wf = load_workflow(STORY)
    assert list(wf.steps) == ["signal", "limit", "median", "smooth"]
    assert wf.steps["median"].op == "user/demo/windowed_median@1"
    order = graph.order(wf)
    assert order.index("signal") < order.index("limit") < order.index("median") < order.index("smooth")
    assert order.index("smoothing") < order.index("smooth")
    assert graph.consumers(wf, "signal") == ["limit"]
    assert graph.needed_for(wf, "median") == {"signal", "limit", "median"}
    assert {s.kind for s in wf.sinks.values()} == {"plot", "data"} and wf.report is not None
    tr = load_workflow(TRAIN)
    assert tr.train is not None and [n for n, s in tr.sources.items() if s.trainable] == ["gain", "offset", "taps"]
    assert sorted(graph.consumers(tr, "ones")) == ["gain_b", "offset_b"]          # one source feeds two steps
    assert graph.consumers(tr, "signal") == ["sensor"]


@pytest.mark.parametrize("body, needle, field, words", [
    ('[steps.a]\nop = "core/signal/spiky_signal@1"\nparms = { n = 10, seed = 1 }\n', "parms", "steps.a.parms",
     "did you mean 'params'"),
    ('[stepz.a]\nop = "x"\n', "[stepz.a]", "stepz", "unknown table or field 'stepz'"),
    (SIGNAL + '[steps.b]\nop = "core/signal/clip@1"\ninputs = { x = "sgnal.y" }\n', '"sgnal.y"', "steps.b.inputs.x",
     "dangling wire"),
    ('[steps.a]\nop = "core/signal/clip@1"\ninputs = { x = "b.y" }\n[steps.b]\nop = "core/signal/clip@1"\n'
     'inputs = { x = "a.y" }\n', '"b.y"', "steps.a.inputs.x", "cycle: b → a → b"),
    (SIGNAL + '[steps.b]\nop = "core/signal/clip@1"\ninputs = { x = "signal..y" }\n', '"signal..y"',
     "steps.b.inputs.x", "is not a wire"),
    (SIGNAL + '[steps.b]\nop = "core/signal/clip@1"\ninputs = { x = "signal.y" }\nparams = { lo = "0", hi = 1.0 }\n',
     '"0"', "steps.b.params.lo", "must be a number"),
    ('[steps.a]\nparams = {}\n', "[steps.a]", "steps.a.op", "missing field 'op'"),
    (SIGNAL + '[sources.s]\nfile = "a.npy"\nvalues = [1.0]\n', "[sources.s]", "sources.s",
     "exactly one of file, values, fill, spike_free"),
    (SIGNAL + '[sources.s]\nfile = "a.txt"\n', '"a.txt"', "sources.s.file", "not a .npy, .csv or .wav"),
    (SIGNAL + '[sinks.p]\nfile = "p.jpg"\nseries = "signal.y"\n', '"p.jpg"', "sinks.p.file", ".png or .svg"),
    (SIGNAL + '[sinks.p]\nfile = "p.png"\nseries = ["signal.y"]\nwindow = [10, 5]\n', "[10, 5]", "sinks.p.window",
     "first < last"),
    (SIGNAL + '[sinks.d]\nfile = "d.npy"\nseries = ["signal.y", "signal.y"]\n', '["signal.y"', "sinks.d.series",
     "writes one series"),
    (SIGNAL + '[sinks.d]\nfile = "d.npy"\nseries = "nothing"\n', '"nothing"', "sinks.d.series", "dangling"),
    (SIGNAL + '[sources.signal]\nvalues = [1.0]\n', "[steps.signal]", "steps.signal", "both a source and a step"),
    (SIGNAL + '[train]\nprediction = "signal.y"\ntarget = "signal.y"\noptimizer = "adagrad"\n', '"adagrad"',
     "train.optimizer", "not one of sgd, momentum, adam"),
    (SIGNAL + '[train]\nprediction = "signal.y"\ntarget = "signal.y"\nlearning_rate = -1\n', "-1",
     "train.learning_rate", "out of range"),
    (SIGNAL + '[report]\nraw = "signal.y"\ncleaned = "signal.y"\n', "[report]", "report", "needs clean"),
    (SIGNAL + '[sources.c]\nfill = 1.0\n', "1.0", "sources.c.fill", "needs like"),
    (SIGNAL + '[sources.c]\nspike_free = "nosuch"\n', '"nosuch"', "sources.c.spike_free", "is not a step"),
    (SIGNAL + '[sources.c]\nfile = "x.wav"\ntrainable = true\n', "true", "sources.c.trainable", "only values, fill and init"),
])
def test_a_bad_workflow_file_is_refused_at_its_position(body, needle, field, words):
    text = HEAD + body
    e = refused(text)
    assert (e.line, e.col) == at(text, needle), e.format()
    assert e.field == field and words in e.format(), e.format()


def test_toml_syntax_and_encoding_errors_have_positions(tmp_path):
    text = HEAD + '[steps.a]\nop = "core/signal/clip@1\n'
    e = refused(text)
    assert e.line == 4 and e.col is not None and "invalid TOML" in e.message
    with pytest.raises(StudioError) as e:
        parse_workflow(HEAD.encode() + b'[steps.a]\nop = "\xff"\n', file="w.toml")
    assert (e.value.line, e.value.col) == (4, 7) and "not UTF-8" in e.value.message
    e = refused(HEAD)
    assert e.field == "steps" and "no steps" in e.message
    e = refused('[workflow]\nsummary = "no name"\n' + SIGNAL)
    assert (e.line, e.field) == (1, "workflow.name")


def test_a_workflow_path_that_is_no_regular_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "w.toml"
    os.mkfifo(fifo)
    with pytest.raises(StudioError) as e:
        load_workflow(fifo)
    assert "FIFO" in e.value.message and e.value.file == str(fifo)
    with pytest.raises(StudioError) as e:
        load_workflow(tmp_path / "missing.toml")
    assert "does not exist" in e.value.message


def test_run_to_a_step_needs_only_its_ancestors():
    wf = parse_workflow(HEAD + SIGNAL + '[steps.a]\nop = "core/signal/clip@1"\ninputs = { x = "signal.y" }\n'
                        '[steps.b]\nop = "core/signal/clip@1"\ninputs = { x = "signal.y" }\n'
                        '[steps.c]\nop = "core/math/add@1"\ninputs = { a = "a.y", b = "b.y" }\n', file="w.toml")
    assert graph.needed_for(wf, "a") == {"signal", "a"}
    assert graph.needed_for(wf, "c") == {"signal", "a", "b", "c"}
    assert sorted(graph.consumers(wf, "signal")) == ["a", "b"]
    with pytest.raises(StudioError) as e:
        graph.needed_for(wf, "d")
    assert "no step 'd'" in e.value.message


def test_find_cycle_names_the_cycle_and_finds_none_in_a_dag():
    assert graph.find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c"]
    assert graph.find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) == []
    assert graph.find_cycle({"a": ["a"]}) == ["a"]


def test_wav_in_and_out(tmp_path):
    p = tmp_path / "s.wav"
    x = np.sin(np.linspace(0, 20, 1000)) * 0.9
    x[5] = 1.5                                                # outside [-1, 1]: clipped and counted
    assert write_wav(p, x, 8000) == 1
    y, rate = read_wav(p)
    assert rate == 8000 and y.dtype == np.float32 and y.shape == (1000,)
    assert np.max(np.abs(np.delete(y - x, 5))) <= 0.5 / 32768 + 1e-9 and y[5] == 32767 / 32768
    st = tmp_path / "st.wav"                                  # stereo 8-bit: a channel must be chosen
    with wave.open(str(st), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(1)
        w.setframerate(100)
        w.writeframes(bytes([128, 255, 0, 128]))
    with pytest.raises(StudioError) as e:
        read_wav(st)
    assert e.value.field == "channel"
    assert read_wav(st, channel=1)[0].tolist() == [127 / 128, 0.0]
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    with pytest.raises(StudioError) as e:
        read_wav(bad)
    assert "not a readable .wav" in e.value.message and e.value.file == str(bad)
