"""The workflow file (TOML; schema in docs/workflows.md): named sources, steps and sinks, wired into a
DAG by name, an optional spike-removal report and an optional training section. ``parse_workflow``
turns the text into a ``Workflow`` or a StudioError at the file, line, column and field of the
mistake; nothing here looks an op up (studio/engine/workflow/plan.py does, once per step)."""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..arrays import input_beneath
from ..contract.manifest import read_manifest
from ..contract.package import read_regular
from ..errors import StudioError
from .toml_fields import Fields

MAX_WORKFLOW_BYTES = 1 << 20
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
WIRE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]{0,63})(?:\.([A-Za-z_][A-Za-z0-9_]{0,63}))?")
DATA_SUFFIXES = (".npy", ".csv", ".wav")
PLOT_SUFFIXES = (".png", ".svg")
OPTIMIZERS = ("sgd", "momentum", "adam")
TOP = ("workflow", "data", "sources", "steps", "sinks", "report", "train")
WORKFLOW_KEYS = ("name", "summary", "record")
SOURCE_KEYS = ("file", "column", "channel", "values", "dtype", "fill", "like", "spike_free", "trainable", "dataset",
               "init", "shape", "seed")
SOURCE_KINDS = ("file", "values", "fill", "spike_free", "dataset", "init")
DATASET_PARTS = ("images", "labels")         # what a dataset source takes from [data] (a batch of it)
INITS = ("he", "zeros")                      # how an init source starts (docs/workflows.md, "Data-parallel training")
DATA_KEYS = ("file", "held_out", "seed", "scale", "classes")
DATA_SUFFIXES_IMAGES = (".csv", ".csv.gz")
STEP_KEYS = ("op", "inputs", "params")
SINK_KEYS = ("file", "series", "sample_rate", "labels", "title", "x_label", "y_label", "window")
REPORT_KEYS = ("raw", "cleaned", "clean")
TRAIN_KEYS = ("prediction", "target", "loss", "optimizer", "learning_rate", "momentum", "beta1", "beta2",
              "epsilon", "steps", "checkpoint", "gradients", "epochs", "batch", "replicas")
MAX_SHAPE_ELEMENTS = 1 << 20                 # an init source's elements: a parameter, not data


@dataclass(frozen=True)
class Wire:
    """A reference to a value: ``node`` (a source, or a step with one output) or ``node.output``."""
    text: str
    node: str
    output: str | None
    path: tuple[str, ...]                 # where it is written, for errors


@dataclass
class Source:
    name: str
    kind: str                             # file | values | fill | spike_free
    path: Path | None = None              # file: resolved against the workflow's folder
    column: int | None = None
    channel: int | None = None
    values: list | None = None
    dtype: str = "f32"
    fill: float | None = None
    like: Wire | None = None
    spike_free: str | None = None         # the spiky-signal step whose spike-free part this is
    trainable: bool = False
    dataset: str | None = None            # images | labels: one replica's batch of [data]
    init: str | None = None               # he | zeros, with shape and seed
    shape: tuple[int, ...] | None = None
    seed: int = 0


@dataclass
class Step:
    name: str
    op: str                               # an op id or a package path (as written)
    inputs: dict[str, Wire]
    params: dict


@dataclass
class Sink:
    name: str
    kind: str                             # data | plot
    path: str                             # as written: relative to the run's output folder
    series: list[Wire]
    sample_rate: int = 8000
    labels: list[str] = field(default_factory=list)
    title: str = ""
    x_label: str = "sample"
    y_label: str = "value"
    window: tuple[int, int] | None = None


@dataclass
class Report:
    raw: Wire
    cleaned: Wire
    clean: Wire


@dataclass
class Training:
    prediction: Wire
    target: Wire
    loss: str = "core/reduce/mse@1"
    optimizer: str = "adam"
    learning_rate: float = 0.01
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    steps: int = 100
    checkpoint: str | None = None
    # data-parallel training through explicit gradient steps (docs/workflows.md, "Data-parallel training"):
    # each trainable source's gradient is a value of the workflow, the loss a value too
    gradients: dict[str, Wire] | None = None
    loss_value: Wire | None = None
    epochs: int = 1
    batch: int = 64
    replicas: int = 1

    @property
    def explicit(self) -> bool:
        return self.gradients is not None


@dataclass
class Data:
    """A labelled image set the trainer batches: rows of side·side pixels and a label (a .csv or
    .csv.gz beneath the workflow's folder), split once into training and held-out rows by ``seed``."""
    path: Path
    held_out: float = 0.2
    seed: int = 0
    scale: float = 1.0
    classes: int = 10


@dataclass
class Workflow:
    name: str
    summary: str
    file: str
    text: str
    hash: str                             # sha256 of the file's bytes
    base: Path                            # the folder relative paths are resolved against
    sources: dict[str, Source]
    steps: dict[str, Step]
    sinks: dict[str, Sink]
    report: Report | None
    train: Training | None
    record: str
    fields: Fields
    data: Data | None = None

    def error(self, path: tuple[str, ...], message: str, hint: str | None = None) -> StudioError:
        return self.fields.error(path, message, hint)

    @property
    def nodes(self) -> list[str]:
        return [*self.sources, *self.steps]


def load_workflow(path: str | Path) -> Workflow:
    """Read and parse a workflow file (bounded: a FIFO, a device or a huge file is refused)."""
    p = Path(path)
    raw = read_regular(p, MAX_WORKFLOW_BYTES, what="workflow file", file=str(p),
                       hint="give a workflow .toml file (docs/workflows.md)")
    return parse_workflow(raw, file=str(p), base=p.resolve().parent)


def parse_workflow(raw: bytes | str, *, file: str = "<workflow>", base: str | Path | None = None) -> Workflow:
    raw = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    m = read_manifest(raw, file)
    f = Fields(m.data, m.text, file)
    f.known((), TOP)
    f.known(("workflow",), WORKFLOW_KEYS)
    name = f.get(("workflow", "name"), str, required=True)
    base = Path(base) if base is not None else Path(file).resolve().parent
    sources = {n: _source(f, n, base) for n in _names(f, "sources")}
    steps = {n: _step(f, n) for n in _names(f, "steps")}
    for n in steps:
        if n in sources:
            raise f.error(("steps", n), f"'{n}' names both a source and a step",
                          hint="give every source and step its own name: wires refer to them by name")
    if not steps:
        raise f.error(("steps",), "the workflow has no steps", hint="add a [steps.NAME] table with op = \"...\"")
    sinks = {n: _sink(f, n) for n in _names(f, "sinks")}
    report = _report(f)
    train = _train(f)
    data = _data(f, base)
    for n, s in sources.items():
        if s.kind == "dataset" and data is None:
            raise f.error(("sources", n, "dataset"), f"source '{n}' takes a batch of the dataset, and the workflow "
                          "has no [data] table", hint="add [data] with file = \"images.csv.gz\"")
    if train is not None and train.explicit:
        for k in train.gradients:
            if k not in sources or not sources[k].trainable:
                raise f.error(("train", "gradients", k), f"'{k}' is not a trainable source",
                              hint="gradients maps each trainable source to the value that is its gradient")
        missing = [n for n, s in sources.items() if s.trainable and n not in train.gradients]
        if missing:
            raise f.error(("train", "gradients"), f"trainable source '{missing[0]}' has no gradient",
                          hint=f"add {missing[0]} = \"STEP.OUTPUT\" to [train] gradients")
    wf = Workflow(name, f.get(("workflow", "summary"), str, default=""), file, m.text,
                  hashlib.sha256(raw).hexdigest(), base, sources, steps, sinks, report, train,
                  output_path(f, ("workflow", "record")) or f"{_stem(name)}.record.json", f, data)
    return wf


def output_path(f: Fields, path: tuple[str, ...]) -> str | None:
    """A file the workflow writes (its record, a sink, a checkpoint), as written: a relative path
    that stays inside the run's output folder. A workflow file is data people share, so an
    absolute path, ``~``, ``..`` or an empty part is refused at its line:col (only paths typed on
    the command line may point elsewhere; symlinks that leave the folder are refused when the run
    writes, services/workflows.py)."""
    rel = f.get(path, str)
    if rel is None:
        return None
    parts = rel.replace("\\", "/").split("/")
    if (not rel.strip() or rel.startswith(("/", "~")) or "\0" in rel or Path(rel).is_absolute()
            or ".." in parts or re.match(r"[A-Za-z]:", rel)):
        raise f.error(path, f"'{rel}' is not a path inside the output folder: a workflow file writes only "
                            f"beneath the folder of the run (the current folder, or --out-dir)",
                      hint="a relative path without '..', e.g. \"results/cleaned.npy\"; to write elsewhere, "
                           "pass --out-dir (or --record/--checkpoint) on the command line")
    return rel


def _stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "workflow"


def _names(f: Fields, table: str) -> list[str]:
    out = []
    for n in f.table((table,)):
        if not NAME.fullmatch(n):
            raise f.error((table, n), f"'{n}' is not a name for a {table[:-1]}",
                          hint="letters, digits, _ and -, starting with a letter or _")
        f.table((table, n))
        out.append(n)
    return out


def wire(f: Fields, path: tuple[str, ...], value) -> Wire:
    if not isinstance(value, str):
        raise f.error(path, f"'{'.'.join(path)}' must name a value as a string (\"step.output\" or \"source\")")
    m = WIRE.fullmatch(value.strip())
    if not m:
        raise f.error(path, f"'{value}' is not a wire: write \"step.output\", \"step\" (one output) or \"source\"")
    return Wire(value, m.group(1), m.group(2), path)


def _source(f: Fields, n: str, base: Path) -> Source:
    at = ("sources", n)
    f.known(at, SOURCE_KEYS)
    kinds = [k for k in SOURCE_KINDS if k in f.table(at)]
    if len(kinds) != 1:
        raise f.error(at, f"source '{n}' must give exactly one of {', '.join(SOURCE_KINDS)}"
                      + (f" (it gives {', '.join(kinds)})" if kinds else ""),
                      hint="file = \"data.npy\" | values = [...] | fill = 1.0 with like = \"step\" | "
                           "spike_free = \"step\" | dataset = \"images\" | init = \"he\" with shape = [...]")
    kind = kinds[0]
    s = Source(n, kind, trainable=f.get((*at, "trainable"), bool, default=False))
    s.dtype = f.get((*at, "dtype"), str, default="f32")
    if s.dtype not in ("f32", "i32", "u32", "bf16"):     # bf16: docs/bf16.md
        raise f.error((*at, "dtype"), f"dtype '{s.dtype}' is not one the device stores", hint="f32, i32, u32 or bf16")
    if kind == "file":
        rel = f.get((*at, "file"), str)
        try:                                    # beneath the workflow's folder, through no symlink
            s.path = input_beneath(base, rel)
        except StudioError as e:
            raise f.error((*at, "file"), e.message, hint=e.hint) from None
        if s.path.suffix.lower() not in DATA_SUFFIXES:
            raise f.error((*at, "file"), f"'{rel}' is not a .npy, .csv or .wav file",
                          hint="sources read .npy (np.save), .csv (numbers) or .wav (PCM)")
        s.column = _index(f, (*at, "column"))
        s.channel = _index(f, (*at, "channel"))
    elif kind == "values":
        vals = f.get((*at, "values"), list)
        if not vals or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            raise f.error((*at, "values"), f"source '{n}': values must be a non-empty array of numbers")
        s.values = list(vals)
    elif kind == "fill":
        s.fill = f.get((*at, "fill"), float)
        if "like" not in f.table(at):
            raise f.error((*at, "fill"), f"source '{n}': fill needs like = \"WIRE\" (the value whose shape it takes)")
        s.like = wire(f, (*at, "like"), f.node((*at, "like")))
    elif kind == "dataset":
        s.dataset = f.get((*at, "dataset"), str)
        if s.dataset not in DATASET_PARTS:
            raise f.error((*at, "dataset"), f"source '{n}': dataset = '{s.dataset}' is not one of "
                          f"{', '.join(DATASET_PARTS)}", hint="images (the pixels) or labels (one-hot rows)")
    elif kind == "init":
        s.init = f.get((*at, "init"), str)
        if s.init not in INITS:
            raise f.error((*at, "init"), f"source '{n}': init = '{s.init}' is not one of {', '.join(INITS)}",
                          hint="he (normal, variance 2/fan-in) or zeros")
        s.shape = _shape(f, (*at, "shape"), n)
        s.seed = _index(f, (*at, "seed")) or 0
    else:
        s.spike_free = f.get((*at, "spike_free"), str)
        if not NAME.fullmatch(s.spike_free):
            raise f.error((*at, "spike_free"), f"'{s.spike_free}' is not a step name")
    for key in ("shape", "seed"):
        if key in f.table(at) and kind != "init":
            raise f.error((*at, key), f"{key} belongs to an init source")
    if "like" in f.table(at) and kind != "fill":
        raise f.error((*at, "like"), "like belongs to a fill source")
    if s.trainable and kind not in ("values", "fill", "init"):
        raise f.error((*at, "trainable"), f"source '{n}': only values, fill and init sources can be trainable",
                      hint="a trainable parameter starts from values = [...] (or a fill)")
    return s


def _shape(f: Fields, path: tuple[str, ...], n: str) -> tuple[int, ...]:
    v = f.get(path, list)
    if (not v or len(v) > 8 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in v)
            or math.prod(v) > MAX_SHAPE_ELEMENTS):
        raise f.error(path, f"source '{n}': shape must be 1 to 8 positive integers with at most "
                      f"{MAX_SHAPE_ELEMENTS} elements in all", hint="e.g. shape = [8, 1, 3, 3]")
    return tuple(v)


def _index(f: Fields, path: tuple[str, ...]) -> int | None:
    v = f.get(path, int)
    if v is not None and v < 0:
        raise f.error(path, f"'{path[-1]}' = {v} must be 0 or more")
    return v


def _step(f: Fields, n: str) -> Step:
    at = ("steps", n)
    f.known(at, STEP_KEYS)
    op = f.get((*at, "op"), str, required=True)
    if not op.strip():
        raise f.error((*at, "op"), f"step '{n}': op is empty", hint="an op id (ns/author/name@v) or a package path")
    inputs = {k: wire(f, (*at, "inputs", k), v) for k, v in f.table((*at, "inputs")).items()}
    params = {}
    for k, v in f.table((*at, "params")).items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise f.error((*at, "params", k), f"step '{n}': param {k} must be a number, not {type(v).__name__}")
        params[k] = v
    return Step(n, op.strip(), inputs, params)


def _sink(f: Fields, n: str) -> Sink:
    at = ("sinks", n)
    f.known(at, SINK_KEYS)
    f.get((*at, "file"), str, required=True)
    path = output_path(f, (*at, "file"))
    suffix = Path(path).suffix.lower()
    if suffix not in DATA_SUFFIXES + PLOT_SUFFIXES:
        raise f.error((*at, "file"), f"sink '{n}': '{path}' is not a .npy, .csv, .wav, .png or .svg file")
    kind = "plot" if suffix in PLOT_SUFFIXES else "data"
    raw = f.node((*at, "series"))
    if raw is None:
        raise f.error(at, f"sink '{n}' names no series", hint="series = \"step.output\" (a plot: a list of them)")
    if kind == "data":
        if isinstance(raw, list):
            raise f.error((*at, "series"), f"sink '{n}' writes one series to {suffix}", hint="series = \"step.output\"")
        series = [wire(f, (*at, "series"), raw)]
    else:
        items = raw if isinstance(raw, list) else [raw]
        if not items:
            raise f.error((*at, "series"), f"plot '{n}' has no series")
        series = [wire(f, (*at, "series"), v) for v in items]
    s = Sink(n, kind, path, series)
    for key in ("sample_rate", "labels", "title", "x_label", "y_label", "window"):
        if key in f.table(at) and (kind == "plot") != (key != "sample_rate"):
            raise f.error((*at, key), f"sink '{n}': {key} belongs to a {'.wav' if key == 'sample_rate' else 'plot'} sink")
    if "sample_rate" in f.table(at) and suffix != ".wav":
        raise f.error((*at, "sample_rate"), f"sink '{n}': sample_rate belongs to a .wav sink")
    s.sample_rate = f.get((*at, "sample_rate"), int, default=8000)
    if not 1 <= s.sample_rate <= 1_000_000:
        raise f.error((*at, "sample_rate"), f"sample_rate {s.sample_rate} is not in [1, 1000000]")
    labels = f.get((*at, "labels"), list, default=[])
    if labels and (len(labels) != len(series) or not all(isinstance(x, str) for x in labels)):
        raise f.error((*at, "labels"), f"plot '{n}': give one string label per series ({len(series)})")
    s.labels = labels
    s.title = f.get((*at, "title"), str, default="")
    s.x_label = f.get((*at, "x_label"), str, default="sample")
    s.y_label = f.get((*at, "y_label"), str, default="value")
    win = f.get((*at, "window"), list)
    if win is not None:
        if not (len(win) == 2 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in win)
                and win[0] < win[1]):
            raise f.error((*at, "window"), f"plot '{n}': window must be [first, last) sample indices, first < last")
        s.window = (win[0], win[1])
    return s


def _report(f: Fields) -> Report | None:
    t = f.table(("report",))
    if not t:
        return None
    f.known(("report",), REPORT_KEYS)
    got = {}
    for k in REPORT_KEYS:
        if k not in t:
            raise f.error(("report",), f"[report] needs {k} = \"WIRE\"",
                          hint="raw (the spiky input), cleaned (the result), clean (the signal without spikes)")
        got[k] = wire(f, ("report", k), t[k])
    return Report(**got)


def _train(f: Fields) -> Training | None:
    t = f.table(("train",))
    if not t:
        return None
    at = ("train",)
    f.known(at, TRAIN_KEYS)
    for k in ("prediction", "target"):
        if k not in t:
            raise f.error(at, f"[train] needs {k} = \"WIRE\"")
    tr = Training(wire(f, (*at, "prediction"), t["prediction"]), wire(f, (*at, "target"), t["target"]))
    tr.loss = f.get((*at, "loss"), str, default=tr.loss)
    if "gradients" in t:
        _explicit(f, tr)
    tr.optimizer = f.get((*at, "optimizer"), str, default=tr.optimizer)
    if tr.optimizer not in OPTIMIZERS:
        raise f.error((*at, "optimizer"), f"optimizer '{tr.optimizer}' is not one of {', '.join(OPTIMIZERS)}")
    for k in ("learning_rate", "momentum", "beta1", "beta2", "epsilon"):
        v = f.get((*at, k), float, default=getattr(tr, k))
        if not (v > 0 and v < float("inf")) or (k in ("momentum", "beta1", "beta2") and v >= 1):
            raise f.error((*at, k), f"{k} = {v} is out of range",
                          hint="learning_rate and epsilon > 0; momentum, beta1, beta2 in (0, 1)")
        setattr(tr, k, v)
    tr.steps = f.get((*at, "steps"), int, default=tr.steps)
    if not 1 <= tr.steps <= 1_000_000:
        raise f.error((*at, "steps"), f"steps = {tr.steps} is not in [1, 1000000]")
    tr.checkpoint = output_path(f, (*at, "checkpoint"))
    for k in ("epochs", "batch", "replicas"):
        if k in t and not tr.explicit:
            raise f.error((*at, k), f"{k} belongs to data-parallel training, which names its gradients",
                          hint="add gradients = { PARAM = \"STEP.OUTPUT\", ... } (docs/workflows.md)")
    return tr


def _explicit(f: Fields, tr: Training) -> None:
    """[train] of a data-parallel run: the loss and each parameter's gradient are values of the
    workflow (its gradient steps written out), trained over epochs of batches split into replicas."""
    at = ("train",)
    tr.loss_value = wire(f, (*at, "loss"), tr.loss)
    tr.gradients = {k: wire(f, (*at, "gradients", k), v) for k, v in f.table((*at, "gradients")).items()}
    if not tr.gradients:
        raise f.error((*at, "gradients"), "gradients is empty", hint="map each trainable source to its gradient")
    for k, lo, hi in (("epochs", 1, 10_000), ("batch", 1, 1 << 16), ("replicas", 1, 256)):
        v = f.get((*at, k), int, default=getattr(tr, k))
        if not lo <= v <= hi:
            raise f.error((*at, k), f"{k} = {v} is not in [{lo}, {hi}]")
        setattr(tr, k, v)
    if tr.batch % tr.replicas:
        raise f.error((*at, "replicas"), f"a batch of {tr.batch} does not split into {tr.replicas} equal replicas",
                      hint="choose replicas dividing batch")


def _data(f: Fields, base: Path) -> Data | None:
    t = f.table(("data",))
    if not t:
        return None
    at = ("data",)
    f.known(at, DATA_KEYS)
    rel = f.get((*at, "file"), str, required=True)
    try:
        path = input_beneath(base, rel)
    except StudioError as e:
        raise f.error((*at, "file"), e.message, hint=e.hint) from None
    if not path.name.lower().endswith(DATA_SUFFIXES_IMAGES):
        raise f.error((*at, "file"), f"'{rel}' is not a .csv or .csv.gz file",
                      hint="rows of side·side pixel values, then the label (docs/workflows.md)")
    d = Data(path)
    d.held_out = f.get((*at, "held_out"), float, default=d.held_out)
    if not 0 < d.held_out < 1:
        raise f.error((*at, "held_out"), f"held_out = {d.held_out} is not a fraction in (0, 1)")
    d.seed = _index(f, (*at, "seed")) or 0
    d.scale = f.get((*at, "scale"), float, default=d.scale)
    if not (d.scale > 0 and d.scale < float("inf")):
        raise f.error((*at, "scale"), f"scale = {d.scale} must be a positive number")
    d.classes = f.get((*at, "classes"), int, default=d.classes)
    if not 2 <= d.classes <= 1000:
        raise f.error((*at, "classes"), f"classes = {d.classes} is not in [2, 1000]")
    return d
