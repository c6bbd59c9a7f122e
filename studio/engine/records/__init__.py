"""The records home: the one place that turns a proof record into bytes and back.

Every record the product keeps as evidence — conformance and gradcheck receipts, workflow and
learner checkpoints, provenance and training records, cached reference results — is a JSON object
with a ``schema`` id (``scellis-<kind>/<version>``), written by ``writer.write_record`` (canonical
content, sealed with the user folder's HMAC key, temp file + fsync + rename) and read by
``reader.read_record`` (regular files only, a size cap, a depth cap, strict JSON, a typed schema,
then the seal). Modules:

- ``canonical``: the canonical JSON bytes, the one digest of a value and the one digest of an array;
- ``seal``: the user folder's key and the seal (a MAC over the whole record plus one per field, so
  a refusal can name what was edited);
- ``reader``: the bounded reader and the strict JSON parser, schema validation (msgspec);
- ``writer``: the atomic, sealed writer;
- ``places``: where each kind of record lives in the user folder.

docs/receipt.md ("Where records live") says what each seal covers.
"""
