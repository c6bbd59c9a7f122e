"""Workflows (docs/workflows.md): ops between sources and sinks, wired into a DAG; one lookup, one
verification and one execution path for every step whoever wrote its op; intermediates on the
device; a provenance record that pins every op by hash and ``verify_record`` that runs it again;
training through the ops' declared VJPs.

spec (the file) · toml_fields (positions) · graph (order, cycles) · sources · wavio · plan
(lookup, verification, shapes) · resident (device-resident execution) · run · report · provenance
· optim · checkpoint · train · train_record. In the engine's layers it sits above train/ (it uses
the tape) and below services/."""
