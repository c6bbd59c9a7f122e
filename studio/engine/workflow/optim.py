"""Optimizers for a workflow's trainable parameters: SGD, SGD with momentum, Adam. The gradients
come from the device (the ops' declared VJPs through the tape); the parameters are a few values
(FIR taps, a gain, an offset), so the update itself is a few numpy operations in f64, stored back
as f32. Their state is plain data: a checkpoint holds it and a resumed run continues exactly."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import StudioError


@dataclass
class Optimizer:
    kind: str                                   # sgd | momentum | adam
    learning_rate: float
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    t: int = 0                                  # updates done
    state: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in ("sgd", "momentum", "adam"):
            raise StudioError(f"optimizer '{self.kind}' is not sgd, momentum or adam", field="train.optimizer")

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """New parameter values (f32) from the gradients; parameters without a gradient stay."""
        self.t += 1
        out = {}
        for name, p in params.items():
            g = grads.get(name)
            if g is None:
                out[name] = p
                continue
            g = np.asarray(g, np.float64).reshape(p.shape)
            x = p.astype(np.float64)
            s = self.state.setdefault(name, {})
            if self.kind == "sgd":
                x = x - self.learning_rate * g
            elif self.kind == "momentum":
                v = self.momentum * s.get("v", np.zeros_like(x)) + g
                s["v"] = v
                x = x - self.learning_rate * v
            else:
                m = self.beta1 * s.get("m", np.zeros_like(x)) + (1 - self.beta1) * g
                v = self.beta2 * s.get("v", np.zeros_like(x)) + (1 - self.beta2) * g * g
                s["m"], s["v"] = m, v
                mh, vh = m / (1 - self.beta1 ** self.t), v / (1 - self.beta2 ** self.t)
                x = x - self.learning_rate * mh / (np.sqrt(vh) + self.epsilon)
            out[name] = x.astype(np.float32)
        return out

    def to_json(self) -> dict:
        return {"kind": self.kind, "learning_rate": self.learning_rate, "momentum": self.momentum,
                "beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon, "t": self.t,
                "state": {n: {k: [float(v) for v in a.reshape(-1)] for k, a in s.items()} for n, s in self.state.items()}}

    @classmethod
    def from_json(cls, d: dict, shapes: dict[str, tuple]) -> Optimizer:
        opt = cls(d["kind"], float(d["learning_rate"]), float(d["momentum"]), float(d["beta1"]), float(d["beta2"]),
                  float(d["epsilon"]), int(d["t"]))
        for n, s in d.get("state", {}).items():
            if n not in shapes:
                raise StudioError(f"the checkpoint's optimizer has state for '{n}', which is not a trainable "
                                  "parameter of this workflow", field="optimizer.state")
            opt.state[n] = {k: np.asarray(v, np.float64).reshape(shapes[n]) for k, v in s.items()}
        return opt
