"""The Studio's publishing parts (docs/publishing.md): the Publish dialog (visibility, the license
validated as you type, the list of missing public-bar fields), the card view (HTML), Fork, and the
Ring panel (browse, fetch, trust, re-verify). The rules are the engine's
(studio/engine/services/publishing.py, studio/engine/publish/); device work (publishing with its
re-proof, re-verifying a fetched op) runs in a device worker that knows the publishing requests.

``install_publish(window)`` adds the Publish menu to the main window."""
from __future__ import annotations

from .dialogs import CardView, PublishDialog, install_publish
from .ring_panel import RingPanel

__all__ = ["CardView", "PublishDialog", "RingPanel", "install_publish"]
