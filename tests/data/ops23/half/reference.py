"""y = 0.5 * x (f64, rounded once to f32 by the engine)."""


def forward(x):
    return 0.5 * x
