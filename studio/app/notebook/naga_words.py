"""wgpu's shader compiler (naga) reports in its own debug notation — ``naga::ir::Expression [18]``,
``Scalar { kind: Bool, width: 1 }``, ``Vector { size: Tri, scalar: … }``. ``in_product_words``
writes those as a WGSL author reads them (``expression #18``, ``bool``, ``vec3<f32>``); the rest of
the message (the author's line and column, what is wrong) is kept as it is."""
from __future__ import annotations

import re

KINDS = {("Bool", "1"): "bool", ("Float", "4"): "f32", ("Float", "2"): "f16", ("Float", "8"): "f64",
         ("Sint", "4"): "i32", ("Uint", "4"): "u32", ("Sint", "8"): "i64", ("Uint", "8"): "u64",
         ("AbstractInt", "8"): "abstract int", ("AbstractFloat", "8"): "abstract float"}
OPS = {"Add": "+", "Subtract": "-", "Multiply": "*", "Divide": "/", "Modulo": "%", "Equal": "==",
       "NotEqual": "!=", "Less": "<", "LessEqual": "<=", "Greater": ">", "GreaterEqual": ">=", "And": "&",
       "ExclusiveOr": "^", "InclusiveOr": "|", "LogicalAnd": "&&", "LogicalOr": "||", "ShiftLeft": "<<",
       "ShiftRight": ">>"}
SIZES = {"Bi": "2", "Tri": "3", "Quad": "4"}
SCALAR = re.compile(r"Scalar\s*\(?\s*Scalar\s*\{\s*kind:\s*(\w+),\s*width:\s*(\d+)\s*\}\s*\)?|"
                    r"Scalar\s*\{\s*kind:\s*(\w+),\s*width:\s*(\d+)\s*\}")
VECTOR = re.compile(r"Vector\s*\{\s*size:\s*(\w+),\s*scalar:\s*([\w<>]+)\s*\}")
HANDLE = re.compile(r"(?:naga::(?:ir::)?)?(Expression|Type|Function|GlobalVariable|Constant|LocalVariable)"
                    r"\s*\[(\d+)\]|\[(\d+)\]\s*of\s*naga::(?:ir::)?(\w+)")
NAMES = {"Expression": "expression", "Type": "type", "Function": "function", "GlobalVariable": "global variable",
         "Constant": "constant", "LocalVariable": "local variable"}


def _scalar(m: re.Match) -> str:
    kind, width = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return KINDS.get((kind, width), f"{kind.lower()}{int(width) * 8}")


def in_product_words(message: str) -> str:
    if "naga" not in message and "Scalar {" not in message and "Vector {" not in message:
        return message
    text = SCALAR.sub(_scalar, message)
    text = VECTOR.sub(lambda m: f"vec{SIZES.get(m.group(1), m.group(1))}<{m.group(2)}>", text)
    text = HANDLE.sub(lambda m: (f"{NAMES.get(m.group(1), m.group(1).lower())} #{m.group(2)}" if m.group(1)
                                 else f"{NAMES.get(m.group(4), m.group(4).lower())} #{m.group(3)}"), text)
    text = re.sub(r"\bnaga::(?:ir::)?", "", text)
    text = re.sub(r"\b(expression #\d+) expression #\d+ is invalid\b", r"\1 is invalid:", text)
    text = re.sub(r"\[(\d+)\] \(of type", r"#\1 (of type", text)
    text = re.sub(r"\(of type (\w+)\((\w+)\)\)", r"(of type \2)", text)          # Scalar(bool) -> bool
    text = re.sub(r"\bOperation (\w+) can't", lambda m: f"the operator {OPS.get(m.group(1), m.group(1))} can't",
                  text)
    text = re.sub(r"— \^+ ", "— ", text)                                    # the caret is the marker's job
    return text
