"""Result panels: conformance, gradcheck, run. Each drives one engine request through the worker."""
