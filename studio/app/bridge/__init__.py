"""The bridge to the device worker and the background threads: worker requests as Qt signals, a document's
session and snapshots, and the controllers that check, prove and run a document through the worker."""
