"""Fuzzing the contract languages and the manifest loader.

Each target gets at least 10,000 hypothesis-generated inputs: valid texts mutated at the
token and character level, texts generated from the grammar (valid and nearly valid), and
random text. The property: nothing escapes but StudioError, and every StudioError has a
position (line and column, or a manifest field) that lies inside the text it blames.

Deterministic (derandomize, no example database) so CI sees the same inputs every run; the
counts and timings reported in docs/reliability.md come from `pytest -s tests/contract/test_fuzz.py`.
"""
from __future__ import annotations

import copy
import datetime as _dt
import json
import os
import random
import time
import tomllib
from collections import Counter
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from studio.engine.contract.backward import parse_backward
from studio.engine.contract.bindings import parse_bindings
from studio.engine.contract.expr import parse_expr
from studio.engine.contract.package import load_package
from studio.engine.contract.signature import parse_signature
from studio.engine.errors import StudioError

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("SCELLIS_FUZZ_EXAMPLES", 10_000))   # CI: 10,000
REPO = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                phases=[Phase.explicit, Phase.generate, Phase.shrink],
                suppress_health_check=list(HealthCheck))

# ------------------------------------------------------------------ seeds and vocabularies
SIGNATURES = [
    "windowed_median(x: f32[n] finite; w: u32 odd in [1, 31], w <= n) -> y: f32[n - w + 1]",
    "fir(x: f32[n], taps: f32[k]; k <= n) -> y: f32[n - k + 1]",
    "spiky_signal(; n: u32 in [1, 16777216], seed: u32) -> y: f32[n]",
    "unique(x: i32[n]) -> y: i32[?m]",
    "matmul(a: f32[m, k], b: f32[k, p]) -> c: f32[m, p]",
    "wm(x: f32[n]; w: u32 odd) -> (y: f32[n - w + 1], idx: u32[n - w + 1])",
    "clip(x: f32[n] any; lo: f32, hi: f32, lo <= hi) -> y: f32[n]",
    "s(x: f32[] nonneg, y: bf16[2 * n] in [-1, 1.5e3]; a: i32 even in [-4, cdiv(n, 2)]) -> z: f32[max(n, 1) // 2 % 3]",
]
BINDINGS = [
    "@group(0) @binding(0) x : storage read       f32[n]\n"
    "@group(0) @binding(1) y : storage read_write f32[n - w + 1]\n"
    "@group(0) @binding(2) p : uniform { n: u32 = n, w: u32 = w }\n",
    "\n# scratch and a multi-line uniform\n@group(0) @binding(0) a : storage read f32[m, k]\n"
    "@group(1) @binding(0) q : uniform {\n    half: i32 = (w - 1) / 2,   # comment\n    s: f32 = 1.5,\n}\n",
    "@group(0) @binding(0) y : storage read_write f32[n]\n@group(0) @binding(1) p : uniform { n: u32 = n, seed: u32 = seed }",
]
BACKWARDS = [
    "nondifferentiable", "composite\nu = core/shape/unfold@1(x; w = w)\ny = core/reduce/median_rows@1(u)",
    "\n# a composite: its steps\ncomposite\na, b = ns-1/au.th/op_2@12(x, taps = t; k = n - w + 1, q = cdiv(n, 2))\n"
    "  y = user/demo/f@1(a;)   # comment\n", "composite", "vjp x: reference(vjp)",
    'vjp x: reference(vjp_x) on device("backward.wgsl")\nvjp taps: reference(vjp_taps)',
    "vjp x: route(dy, to = argmedian)", "\n# comment\nvjp a, b: reference(vjp)\n",
]
EXPRS = ["n - w + 1", "cdiv(n, 64)", "min(a, b) * 2", "-(k // 2) % 3", "n / 2", "1.5e3", "a - (b - c)",
         "max(1, 2.5) + -x", ".5e-3 * n"]

PUNCT = ["(", ")", "[", "]", "{", "}", ",", ";", ":", "->", "-", "+", "*", "/", "//", "%", "=", "@", "?", "<=",
         "<", ">=", ">", "==", "!=", "#", '"', "\n", " ", "\t", "\r\n", "\\"]
WORDS = ["f32", "u32", "i32", "bf16", "f64", "finite", "any", "nonneg", "in", "odd", "even", "vjp", "reference",
         "route", "on", "device", "to", "composite", "nondifferentiable", "group", "binding", "storage", "uniform",
         "core/shape/unfold@1", "a/b/c@1", "a/b/c@0", "A/b/c@1",
         "read", "read_write", "min", "max", "cdiv", "n", "w", "x", "y", "_", "ünï", "λ", "0", "1", "-1",
         "99999999999999999999999999", "1e999", "0x10", "1.", ".", "NaN", "inf", "\x00", "\u202e", "😀"]
TOKENS = PUNCT + WORDS


# Generators are plain Python driven by a hypothesis-drawn seed: hypothesis chooses (and,
# derandomized, fixes) the inputs, while one draw per input keeps 10,000 of them cheap.
SEED = st.integers(0, 2**64 - 1)
ODD_CHARS = ["\x00", "\t", "\r", "\x0b", "\x85", "\u00a0", "\u2028", "\u202e", "\ufeff", "\ufffd", "é", "λ", "😀",
             "'", '"', "`", "$", "\\"]


def _char(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(ODD_CHARS)
    c = rng.randrange(0x110000)
    return chr(c) if not 0xD800 <= c < 0xE000 else "?"


def mutate(rng: random.Random, seeds: list[str], tokens: list[str] = TOKENS) -> str:
    """A valid text with 1..6 token- or character-level mutations."""
    text = rng.choice(seeds)
    for _ in range(rng.randint(1, 6)):
        i = rng.randint(0, len(text))
        j = rng.randint(i, min(len(text), i + 8))
        op = rng.choice(["insert", "delete", "replace", "duplicate", "splice", "truncate", "char"])
        if op == "insert":
            text = text[:i] + rng.choice(tokens) + text[i:]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "replace":
            text = text[:i] + rng.choice(tokens) + text[j:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] * rng.randint(1, 3) + text[j:]
        elif op == "splice":
            other = rng.choice(seeds)
            k = rng.randint(0, len(other))
            text = text[:i] + other[k:k + 12] + text[j:]
        elif op == "truncate":
            text = text[:i]
        else:
            text = text[:i] + _char(rng) + text[i:]
    return text


def mutated(seeds: list[str], tokens: list[str] = TOKENS):
    return SEED.map(lambda seed: mutate(random.Random(seed), seeds, tokens))


def token_soup(tokens: list[str] = TOKENS):
    return SEED.map(lambda seed: (lambda r: " ".join(r.choice(tokens) for _ in range(r.randint(0, 30))))(
        random.Random(seed)))


NAMES = ["n", "w", "k", "x", "y", "a", "b", "seed", "in", "f32", "_q", "m"]
DTYPES = ["f32", "u32", "i32", "bf16", "f64", "x"]


def gen_expr(rng: random.Random, depth: int = 3) -> str:
    if depth <= 0 or rng.random() < 0.35:
        return rng.choice([rng.choice(NAMES), str(rng.randrange(2**rng.choice([4, 16, 70]))),
                           rng.choice(["1.5", "2e3", ".5", "0.0", "1e999", "1e310"])])
    kind = rng.randrange(4)
    if kind == 0:
        return f"{gen_expr(rng, depth - 1)} {rng.choice(['+', '-', '*', '/', '//', '%'])} {gen_expr(rng, depth - 1)}"
    if kind == 1:
        return "-" + gen_expr(rng, depth - 1)
    if kind == 2:
        return f"({gen_expr(rng, depth - 1)})"
    args = ", ".join(gen_expr(rng, depth - 1) for _ in range(rng.randint(0, 3)))
    return f"{rng.choice(['min', 'max', 'cdiv', 'sqrt', 'f'])}({args})"


def gen_signature(rng: random.Random) -> str:
    def dims():
        return ", ".join(rng.choice([rng.choice(NAMES), gen_expr(rng, 2), "?" + rng.choice(NAMES)])
                         for _ in range(rng.randint(0, 3)))
    inputs = [f"{rng.choice(NAMES)}: {rng.choice(DTYPES)}[{dims()}]" + rng.choice(
        ["", " finite", " any", " nonneg", " in [0, 1]", " in [2, 1]", " odd"]) for _ in range(rng.randint(0, 3))]
    params = [f"{rng.choice(NAMES)}: {rng.choice(DTYPES)}" + "".join(rng.choice(
        [" odd", " even", " in [1, 31]", f" in [{gen_expr(rng, 2)}, {gen_expr(rng, 2)}]"]) for _ in range(rng.randint(0, 3)))
        for _ in range(rng.randint(0, 3))]
    rels = [f"{gen_expr(rng, 2)} {rng.choice(['<=', '<', '>=', '>', '==', '!='])} {gen_expr(rng, 2)}"
            for _ in range(rng.randint(0, 2))]
    outs = [f"{rng.choice(NAMES)}: {rng.choice(DTYPES)}[{dims()}]" for _ in range(rng.randint(0, 3))]
    semi = "; " + ", ".join(params + rels) if params or rels or rng.random() < 0.5 else ""
    out = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    return f"{rng.choice(NAMES)}({', '.join(inputs)}{semi}) -> {out}"


def gen_bindings(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 4)):
        g, b = rng.randint(-1, 4), rng.randint(0, 4)
        if rng.random() < 0.5:
            kind = f"storage {rng.choice(['read', 'read_write', 'write'])} {rng.choice(DTYPES)}" \
                   f"[{', '.join(gen_expr(rng, 2) for _ in range(rng.randint(0, 3)))}]"
        else:
            fields = [f"{rng.choice(NAMES)}: {rng.choice(DTYPES)} = {gen_expr(rng, 2)}" for _ in range(rng.randint(0, 3))]
            kind = "uniform { " + rng.choice([", ", ",\n  ", ",\n# c\n"]).join(fields) + rng.choice(["", ","]) + " }"
        lines.append(f"@group({g}) @binding({b}) {rng.choice(NAMES)} : {kind}")
    return rng.choice(["\n", "\n\n", "\r\n", "\n# x\n"]).join(lines)


def gen_step(rng: random.Random) -> str:
    def names(lo: int) -> str:
        return ", ".join(rng.choice(NAMES) for _ in range(rng.randint(lo, 3)))
    args = ", ".join(rng.choice([rng.choice(NAMES), f"{rng.choice(NAMES)} = {rng.choice(NAMES)}"])
                     for _ in range(rng.randint(0, 3)))
    params = ", ".join(f"{rng.choice(NAMES)} = {gen_expr(rng, 2)}" for _ in range(rng.randint(0, 3)))
    op = rng.choice(["core/shape/unfold@1", "core/reduce/median_rows@1", "ns-1/au.th/op_2@12", "a/b/c@1",
                     "a/b/c@0", "a/b@1", "core/shape/unfold"])
    tail = rng.choice([f"; {params}", f";{params}", "", ";"])
    return f"{names(rng.choice([0, 1, 1, 1, 1, 1]))} = {op}({args}{tail})"


def gen_backward(rng: random.Random) -> str:
    decls = []
    for _ in range(rng.randint(0, 4)):
        names = ", ".join(rng.choice(NAMES) for _ in range(rng.randint(0, 3)))
        rule = rng.choice([
            f"reference({rng.choice(['vjp', 'vjp_x', 'route', 'on', ''])})",
            f'reference(vjp) on device("{rng.choice(["backward.wgsl", "", "a b"])}")',
            f"route({rng.choice(NAMES)}, to = {rng.choice(NAMES)})", "route(dy)", "reference(vjp) on device()"])
        decls.append(rng.choice([f"vjp {names}: {rule}", "composite", "nondifferentiable", f"vjp {names}"]))
    if rng.random() < 0.5:       # a composite and its steps (valid when nothing else is declared)
        if rng.random() < 0.6:
            decls = []
        at = rng.choice([0, 0, 0, len(decls)])
        decls[at:at] = ["composite"] * rng.choice([1, 1, 1, 0]) + [gen_step(rng) for _ in range(rng.randint(0, 4))]
    return rng.choice(["\n", "\n\n", "\r\n", "\n# x\n", "\n  "]).join(decls)


def generated(gen):
    return SEED.map(lambda seed: gen(random.Random(seed)))


def inputs_for(seeds, gen, tokens=TOKENS):
    """Mutated valid texts, grammar-generated texts, token soup and random text, in equal shares."""
    return st.one_of(mutated(seeds, tokens), generated(gen), token_soup(tokens), st.text(max_size=60))


# ------------------------------------------------------------------ the property
EMBED_LINE, EMBED_COL = 4, 13          # as if the text were a string at op.toml:4:13


def _check_error(e: StudioError, text: str, *, file: str, embedded: bool = True) -> None:
    assert e.message, "an error without a message"
    assert e.file == file, f"error names file {e.file!r}, expected {file!r}"
    assert (e.line is not None and e.col is not None) or e.field, f"error without a position: {e.format()}"
    if e.line is not None and embedded:
        last = EMBED_LINE + text.count("\n") + text.count("\r") + 1
        assert EMBED_LINE <= e.line <= last, f"line {e.line} outside the text (lines {EMBED_LINE}..{last})"
        assert e.col is None or e.col >= 1
    e.format()                         # formats without raising


def fuzz(target: str, parse, strategy) -> dict:
    outcomes: Counter = Counter()

    @FUZZ
    @given(strategy)
    def run(text):
        note(f"text = {text!r}")
        try:
            result = parse(text, file="op.toml", line=EMBED_LINE, col=EMBED_COL)
        except StudioError as e:
            _check_error(e, text, file="op.toml")
            outcomes["error"] += 1
        else:
            outcomes["parsed"] += 1
            if target == "expr":       # the canonical text parses back to an equal tree
                assert parse_expr(str(result)) == result
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    total = sum(outcomes.values())
    print(f"\nfuzz {target}: {total} inputs, {outcomes['parsed']} parsed, {outcomes['error']} StudioErrors "
          f"with a position, {seconds:.1f} s")
    assert total >= EXAMPLES, f"only {total} inputs were tried"
    return dict(outcomes, seconds=seconds)


def test_fuzz_signature():
    fuzz("signature", parse_signature, inputs_for(SIGNATURES, gen_signature))


def test_fuzz_bindings():
    fuzz("bindings", parse_bindings, inputs_for(BINDINGS, gen_bindings))


def test_fuzz_backward():
    fuzz("backward", parse_backward, inputs_for(BACKWARDS, gen_backward))


def test_fuzz_expr():
    fuzz("expr", parse_expr, inputs_for(EXPRS, lambda rng: gen_expr(rng, 5)))


# ------------------------------------------------------------------ the manifest loader
MANIFEST_SEEDS = [(REPO / p / "op.toml").read_text() for p in (
    "examples/windowed_median", "examples/windowed_median_composite", "resources/ops/core/spiky_signal",
    "resources/ops/core/fir",
    "tests/data/reliability/fill")]
TOML_TOKENS = ['"', '"""', "'", "'''", "[", "]", "[[", "]]", "=", "\n", "#", ".", ",", "{", "}", "true", "1e3",
               "-0", "nan", "1979-05-27T07:32:00Z", "0x_1", "id", "kernel", "tolerance", "bindings", "backward",
               "signature", "class", "text", "file", "\\u00e9", "\\", "\x7f", "\ufeff"] + TOKENS
FIELDS = ["id", "summary", "license", "visibility", "authors", "signature", "tolerance", "tolerance.class",
          "tolerance.category", "tolerance.justification", "reference", "reference.file", "reference.forward",
          "reference.precision", "kernel", "kernel.file", "kernel.entry", "kernel.workgroup_size",
          "kernel.invocations", "bindings", "bindings.text", "backward", "backward.text", "backward.subgradient"]


def odd_value(rng: random.Random):
    """A TOML value of any type, including the ones a field must refuse."""
    return rng.choice([
        lambda: rng.randint(-2**70, 2**70), lambda: rng.choice([0.5, -0.0, float("inf"), float("nan"), 1e308]),
        lambda: rng.random() < 0.5, lambda: "".join(_char(rng) for _ in range(rng.randint(0, 20))),
        lambda: [rng.randint(0, 9) for _ in range(rng.randint(0, 3))], lambda: {"a": 1, "text": rng.randint(0, 9)},
        lambda: rng.choice(["../outside.py", "/etc/passwd", "", "x" * 5000, "missing.wgsl", "receipts/r.json",
                            "op.toml", "sub/../forward.wgsl", "forward.wgsl", "reference.py", "y" * 200_000]),
        lambda: _dt.datetime(1979, 5, 27, 7, 32), lambda: _dt.date(2020, 1, 1),
    ])()


def structured_manifest(rng: random.Random) -> str:
    """A valid manifest as data, with fields removed, retyped or their text mutated, dumped as TOML."""
    data = tomllib.loads(rng.choice(MANIFEST_SEEDS))
    for _ in range(rng.randint(1, 4)):
        dotted = rng.choice(FIELDS).split(".")
        node = data
        for part in dotted[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        action = rng.choice(["delete", "retype", "text"])
        old = node.get(dotted[-1])
        if action == "delete":
            node.pop(dotted[-1], None)
        elif action == "retype" or not isinstance(old, str) or not old:
            node[dotted[-1]] = odd_value(rng)
        else:
            node[dotted[-1]] = mutate(rng, [old])
    try:
        return tomli_w.dumps(copy.deepcopy(data))
    except (TypeError, ValueError):
        return tomli_w.dumps({"id": "x"})


def manifest_inputs():
    return st.one_of(mutated(MANIFEST_SEEDS, TOML_TOKENS), generated(structured_manifest), st.text(max_size=200),
                     st.binary(max_size=200).map(lambda b: b.decode("latin-1")))


def test_fuzz_manifest_loader(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name in ("reference.py", "forward.wgsl", "backward.wgsl"):
        (pkg / name).write_text("# fuzz\n")
    manifest = pkg / "op.toml"
    outcomes: Counter = Counter()
    raw_modes = [lambda t: t.encode("utf-8"), lambda t: t.encode("utf-8", "surrogatepass"),
                 lambda t: t.encode("utf-16"), lambda t: b"\xff" + t.encode("utf-8")]

    @FUZZ
    @given(manifest_inputs(), st.integers(0, 19))
    def run(text, mode):
        raw = raw_modes[mode % len(raw_modes)](text) if mode >= 16 else text.encode("utf-8", "surrogatepass")
        note(f"op.toml = {raw!r}")
        manifest.write_bytes(raw)
        try:
            load_package(pkg)
        except StudioError as e:
            assert e.file is not None, f"error without a file: {e.format()}"
            assert (e.line is not None and e.col is not None) or e.field, f"error without a position: {e.format()}"
            if e.line is not None and e.file == str(manifest):
                assert 1 <= e.line <= raw.count(b"\n") + 1 and (e.col is None or e.col >= 1), e.format()
            e.format()
            outcomes["error"] += 1
        else:
            outcomes["loaded"] += 1

    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    total = sum(outcomes.values())
    print(f"\nfuzz manifest loader: {total} op.toml texts, {outcomes['loaded']} loaded, {outcomes['error']} "
          f"StudioErrors with a position, {seconds:.1f} s")
    assert total >= EXAMPLES
    assert outcomes["loaded"] > 0 and outcomes["error"] > 0        # the generator reaches both outcomes


# ------------------------------------------------------------------ receipts
JSON_TOKENS = ["{", "}", "[", "]", '"', ":", ",", "null", "true", "false", "0", "-1", "1.5", "1e999", "-0", "NaN",
               "Infinity", '"pass"', '"fail"', '"x"', '""', "\\", "\\u0000", "\\ud800", "\n", " ", "[" * 40,
               '"hashes": null, ', '"verdict": "pass", ', '"schema": "scellis-receipt/1", ', "9" * 5000, "\ufeff"]


def judged(r) -> str:
    """What verification judges of a receipt: everything but the fields recorded for people
    (receipts.INFORMATIONAL) and the GPU profile's description beyond its id and wgpu version.
    A mutation that leaves this unchanged is a no-op; any other must never verify as valid."""
    from studio.engine.proof.receipts import INFORMATIONAL
    if not isinstance(r, dict):
        return repr(type(r))
    out = {k: v for k, v in r.items() if k not in INFORMATIONAL}
    if isinstance(out.get("seal"), dict):          # the per-field MACs only name what changed: not judged
        out["seal"] = {k: v for k, v in out["seal"].items() if k != "fields"}
    if isinstance(out.get("gpu_profile"), dict):
        out["gpu_profile"] = {k: out["gpu_profile"].get(k) for k in ("id", "wgpu_version")}
    return json.dumps(out, sort_keys=True)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def odd_json(rng: random.Random, receipt: dict):
    """A value of any JSON type, including ones that are another field's (a hash where a seed
    belongs), deep nesting, huge numbers and strings."""
    other = rng.choice(list(_paths(receipt)))
    node = receipt
    for k in other:
        node = node[k]
    deep = rng.choice([5, 40, 200])
    return rng.choice([
        lambda: None, lambda: rng.choice([True, False]), lambda: rng.randint(-2**70, 2**70), lambda: rng.random() * 1e6,
        lambda: rng.choice([0, 1, -1, 2**64, 2**128, 0.0, -0.0, 1e308, 10**40]),
        lambda: "".join(_char(rng) for _ in range(rng.randint(0, 20))), lambda: "0" * 64, lambda: "f" * 64,
        lambda: rng.choice(["pass", "fail", "valid", "../../x", "0123456789abcdef", "", "x" * 100_000]),
        lambda: [], lambda: {}, lambda: [1, 2], lambda: {"a": 1},
        lambda: json.loads("[" * deep + "]" * deep), lambda: copy.deepcopy(node),
    ])()


def mutate_receipt(rng: random.Random, receipt: dict, text: str) -> str:
    """The receipt's JSON text with 1..4 structured edits (a field deleted, retyped, swapped with
    another's value, renamed, an unknown field added, a hash's digit changed) or text mutations."""
    if rng.random() < 0.35:
        return mutate(rng, [text], JSON_TOKENS)
    r = copy.deepcopy(receipt)
    for _ in range(rng.randint(1, 4)):
        path = rng.choice(list(_paths(r))[1:])
        parent = r
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        action = rng.choice(["delete", "retype", "digit", "digit", "rename", "add", "number", "number"])
        if action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "digit" and isinstance(parent[key], str) and parent[key]:
            s = parent[key]
            i = rng.randrange(len(s))
            parent[key] = s[:i] + rng.choice("0123456789abcdefX") + s[i + 1:]
        elif action == "rename" and isinstance(parent, dict):
            parent[key + rng.choice(["_", "s", " "])] = parent.pop(key)
        elif action == "add" and isinstance(parent, dict):
            parent[rng.choice(["extra", "verdict", "id", "seed", "HMAC"])] = odd_json(rng, receipt)
        elif action == "number" and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
            parent[key] = rng.choice([parent[key] + 1, parent[key] - 1, -parent[key], float(parent[key]), 0])
        else:
            parent[key] = odd_json(rng, receipt)
    try:
        out = json.dumps(r, indent=rng.choice([None, 2]), sort_keys=rng.random() < 0.5)
    except (ValueError, RecursionError):
        return text
    if rng.random() < 0.1:                      # a key twice: the second would win in plain json.loads
        out = out.replace('"verdict"', '"verdict": "fail", "verdict"', 1)
    return out


@pytest.fixture(scope="module")
def proven_fill(tmp_path_factory, module_ctx):
    """The fill op with a receipt earned by a real conformance run on this machine's device."""
    from studio.engine.proof.conformance import conform
    from studio.engine.proof.receipts import make_receipt, write_receipt
    from studio.engine.services.actions import save_package
    root = tmp_path_factory.mktemp("fuzz") / "fill"
    fill = REPO / "tests" / "data" / "reliability" / "fill"
    save_package(module_ctx, root, {p.name: p.read_bytes() for p in fill.iterdir() if p.is_file()})
    pkg = load_package(root)
    rep = conform(module_ctx, pkg)
    assert rep.ok
    path = write_receipt(pkg, make_receipt(pkg, rep), module_ctx.seal)
    return pkg, path, module_ctx.device.profile.id, module_ctx.seal


def test_fuzz_receipts(proven_fill):
    """10,000 mutated receipts, each written over the real one and read back as every reader does:
    read_receipt, verify_receipt (on the file's JSON even where read_receipt refuses it),
    judge_receipts and local_status. Nothing escapes but StudioError (and verify, judge and
    local_status raise nothing at all); no mutated receipt is valid unless what is judged of it is
    unchanged; the original is valid before and after."""
    from studio.engine.proof.receipts import judge_receipts, local_status, read_receipt, verify_receipt
    from studio.engine.records.reader import parse_json
    pkg, path, profile, seal = proven_fill
    original_text = path.read_text()
    original = json.loads(original_text)
    assert verify_receipt(pkg, original, profile, seal).status == "valid"
    outcomes: Counter = Counter()
    memo: dict = {}          # the corpus regenerated once (Context.corpora): only an intact seal reaches it

    @FUZZ
    @given(SEED, st.integers(0, 9))
    def run(seed, mode):
        rng = random.Random(seed)
        text = mutate_receipt(rng, original, original_text)
        raw = text.encode("utf-8", "surrogatepass") if mode else b"\xff" + text.encode()
        note(f"receipt = {raw[:2000]!r}")
        path.write_bytes(raw)
        try:
            receipt = read_receipt(path)
        except StudioError as e:
            assert e.file == str(path) and e.message, e.format()
            receipt = None
        try:                                          # verify on whatever JSON it is, typed or not
            data = parse_json(raw, str(path))
        except StudioError:
            data = None
        status = "malformed"
        if data is not None:
            v = verify_receipt(pkg, data, profile, seal, corpora=memo)
            status = v.status
            assert status in ("valid", "failed", "stale", "foreign", "forged", "malformed")
            assert status == "malformed" or receipt is not None, (status, v.problems)
            assert status == "valid" or v.problems
            if status == "valid":
                assert judged(data) == judged(original), "a mutated receipt verified as valid"
        outcomes["refused at read" if receipt is None else
                 "valid (a no-op mutation)" if status == "valid" else status] += 1
        [(p, seen)] = judge_receipts(pkg, profile, seal, corpora=memo)
        assert p == path and seen.status == (status if receipt is not None else "malformed"), (seen, status)
        assert local_status(pkg, profile, seal, corpora=memo) == seen.status

    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    path.write_text(original_text)
    assert verify_receipt(pkg, read_receipt(path), profile, seal).status == "valid"      # restored: valid again
    total = sum(outcomes.values())
    print(f"\nfuzz receipts: {total} mutated receipts: " + ", ".join(f"{n} {k}" for k, n in outcomes.most_common())
          + f"; 0 other exceptions, {seconds:.1f} s")
    assert total >= EXAMPLES
    # the generator reaches both outcomes; a mutation that is well-formed breaks the seal (forged)
    assert outcomes["refused at read"] and outcomes["forged"]
