"""Reference for user/test/spin@1: there is none that finishes; conformance is not its point."""


def forward(x, *, k):
    raise RuntimeError("spin never finishes: it exists to be stopped by the device worker")
