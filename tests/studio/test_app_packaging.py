"""Packaging: the desktop entry and AppStream metainfo validate (where the validators are
installed), the icon is SVG, the PyInstaller spec names both programs, the gui-script exists."""
from __future__ import annotations

import shutil
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "packaging"


def test_desktop_entry_validates():
    entry = PKG / "scellis-studio.desktop"
    text = entry.read_text()
    assert "Exec=scellis-studio %F" in text and "Icon=io.scellis.Studio" in text
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        pytest.skip("desktop-file-validate is not installed (apt-get install desktop-file-utils)")
    res = subprocess.run([tool, str(entry)], capture_output=True, text=True)
    assert res.returncode == 0 and "error" not in res.stdout, res.stdout + res.stderr


def test_metainfo_validates():
    meta = PKG / "io.scellis.Studio.metainfo.xml"
    root = ET.parse(meta).getroot()
    assert root.findtext("id") == "io.scellis.Studio"
    assert root.find("launchable").text == "scellis-studio.desktop"
    tool = shutil.which("appstreamcli")
    if tool is None:
        pytest.skip("appstreamcli is not installed (apt-get install appstream)")
    res = subprocess.run([tool, "validate", "--no-net", str(meta)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_icon_spec_and_entry_point():
    icon = ET.parse(PKG / "io.scellis.Studio.svg").getroot()
    assert icon.tag.endswith("svg") and icon.get("viewBox") == "0 0 128 128"
    spec = (PKG / "scellis-studio.spec").read_text()
    assert 'name="scellis-studio"' in spec and 'name="scellis"' in spec and "host.py" in spec
    for entry in ("entry_studio.py", "entry_cli.py"):
        assert "freeze_support()" in (PKG / entry).read_text()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["gui-scripts"]["scellis-studio"] == "studio.app.main:main"
