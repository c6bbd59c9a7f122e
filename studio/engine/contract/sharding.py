"""An op's declared behaviour under data parallelism (op.toml ``[sharding]``; docs/bf16.md):

    [sharding]
    kind = "per_example"          # or "batch_contracting"
    batch = ["x"]                 # the inputs split along their first dim, the batch

- ``per_example``: every output is a per-example map of the batch inputs (its first dim is the
  same batch symbol): on R replicas, replica r's value is exactly shard r of the node run on the
  whole batch — at bf16 too, since its rounding is per element (docs/requirements.md L10).
- ``batch_contracting``: the op sums over the batch inside and rounds once (a weight gradient); no
  output carries the batch dim. Replicas round their own partial sums, so an all-reduce of them
  is not the whole-batch node at a real rounding (§11).

Checked against the signature when the contract is built: the named inputs exist, share one
batch symbol as their first dim, and the outputs carry it (per_example) or do not (contracting)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import StudioError
from .expr import Sym
from .manifest import Manifest

KINDS = ("per_example", "batch_contracting")


@dataclass(frozen=True)
class Sharding:
    kind: str
    batch: tuple[str, ...]           # the inputs split along their first dim
    symbol: str                      # the batch dim symbol they share

    @property
    def exact(self) -> bool:
        """Whether the node shards exactly at any rounding (per example)."""
        return self.kind == "per_example"


def read_sharding(m: Manifest, sig) -> Sharding | None:
    if m.get("sharding", dict, required=False) is None:
        return None
    kind = m.get("sharding.kind", str)
    if kind not in KINDS:
        line, col = m.position("sharding.kind")
        raise StudioError(f"sharding.kind {kind!r} is not one of {', '.join(KINDS)}", file=m.file,
                          field="sharding.kind", line=line, col=col,
                          hint='"per_example" (a map of each example) or "batch_contracting" (sums over the batch)')
    batch = m.get("sharding.batch", list)
    inputs = {t.name: t for t in sig.inputs}
    if not batch or not all(isinstance(b, str) for b in batch):
        raise StudioError("sharding.batch must list the names of the inputs split along the batch", file=m.file,
                          field="sharding.batch", hint=f'e.g. batch = ["{sig.inputs[0].name if sig.inputs else "x"}"]')
    symbols = set()
    for b in batch:
        t = inputs.get(b)
        if t is None:
            raise StudioError(f"sharding.batch names '{b}', which is no input of {sig.name}", file=m.file,
                              field="sharding.batch", hint="its inputs: " + ", ".join(inputs))
        if not t.dims or not isinstance(t.dims[0], Sym):
            raise StudioError(f"sharding.batch: input '{b}' ({t}) has no plain first dim to split", file=m.file,
                              field="sharding.batch", hint="the batch is the first dim of each input named, e.g. x: f32[b, n]")
        symbols.add(t.dims[0].name)
    if len(symbols) != 1:
        raise StudioError(f"sharding.batch: the inputs {', '.join(batch)} start with different dims "
                          f"({', '.join(sorted(symbols))}); one batch dim is split", file=m.file, field="sharding.batch",
                          hint="give every batch input the same first dim symbol")
    symbol = symbols.pop()
    for t in sig.outputs:
        first = t.dims[0] if t.dims else None
        carries = isinstance(first, Sym) and first.name == symbol
        mentions = any(symbol in getattr(d, "symbols", lambda: frozenset())() for d in t.dims)
        if kind == "per_example" and not carries:
            raise StudioError(f"sharding.kind per_example: output '{t.name}' ({t}) does not start with the batch "
                              f"dim {symbol}", file=m.file, field="sharding.kind",
                              hint=f"a per-example output is indexed by the example first, e.g. {t.name}: f32[{symbol}, ...]; "
                                   "an op that sums over the batch is batch_contracting")
        if kind == "batch_contracting" and mentions:
            raise StudioError(f"sharding.kind batch_contracting: output '{t.name}' ({t}) still carries the batch "
                              f"dim {symbol}", file=m.file, field="sharding.kind",
                              hint="a batch-contracting op sums the batch away; a per-example one is per_example")
    return Sharding(kind, tuple(batch), symbol)
