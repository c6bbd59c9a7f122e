"""What a node is under sharding, read off its op's declared ``[sharding]`` kind and its outputs'
precision (docs/requirements.md L10-L11; docs/bf16.md). Nothing is guessed: an op that declares no kind is
reported as such."""
from __future__ import annotations

from dataclasses import dataclass

from ..contract.package import OpPackage

EXACT = "exact under sharding"
ROUNDED = "rounded per replica"
EXACT_AT_ID = "exact at rnd = id"
UNDECLARED = "not declared"


@dataclass(frozen=True)
class NodeKind:
    label: str                 # one of the four above
    kind: str | None           # the op's [sharding] kind: per_example | batch_contracting | None
    bf16: bool                 # an output is bf16: the node rounds to bf16 on the way out
    why: str

    def to_json(self) -> dict:
        return {"label": self.label, "kind": self.kind, "bf16": self.bf16, "why": self.why}


def is_bf16(pkg: OpPackage) -> bool:
    return any(t.dtype == "bf16" for t in pkg.contract.signature.outputs)


def classify(pkg: OpPackage) -> NodeKind:
    sh = pkg.contract.sharding
    bf16 = is_bf16(pkg)
    if sh is None:
        return NodeKind(UNDECLARED, None, bf16, f"{pkg.id} declares no [sharding] kind in its op.toml")
    if sh.kind == "per_example":
        return NodeKind(EXACT, sh.kind, bf16, "per example: its rounding is per element of a per-example map, so "
                        "replica r's value is shard r of the whole-batch node, bit for bit")
    if bf16:
        return NodeKind(ROUNDED, sh.kind, bf16, "contracts the batch and rounds once: each replica rounds its own "
                        "partial sum S_r before the all-reduce, where one device rounds the sum of them once")
    return NodeKind(EXACT_AT_ID, sh.kind, bf16, "contracts the batch at f32 (no rounding on the way out, rnd = id): "
                    "the all-reduced mean is 1/R of the whole-batch node (the order of the f32 sum aside)")
