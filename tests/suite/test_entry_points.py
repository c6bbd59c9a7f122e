"""The two entry points no other fast test reaches in-process: `scellis-studio`'s main module
(studio/app/main.py: its arguments and the names a desktop matches its window by) and a frozen
build's stand-in for the interpreter (studio/frozen.py)."""
import sys

import pytest
from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QGuiApplication

from studio import frozen
from studio.app import main as studio_main


def test_scellis_studio_help_exits_0_and_names_its_options(capsys):
    with pytest.raises(SystemExit) as e:
        studio_main.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: scellis-studio") and "--no-recovery" in out


def test_the_application_is_named_for_the_desktop_file(monkeypatch):
    before = (QCoreApplication.applicationName(), QCoreApplication.organizationDomain(),
              QGuiApplication.desktopFileName())
    monkeypatch.setenv("RESOURCE_NAME", "someone-else")
    try:
        studio_main.name_the_application()
        import os
        assert os.environ["RESOURCE_NAME"] == studio_main.APP_ID == "scellis-studio"
        assert QCoreApplication.applicationName() == QGuiApplication.desktopFileName() == "scellis-studio"
    finally:             # other tests' settings live under the application's names: give them back
        QCoreApplication.setApplicationName(before[0])
        QCoreApplication.setOrganizationDomain(before[1])
        QGuiApplication.setDesktopFileName(before[2])


def test_a_frozen_build_runs_the_hosts_c_form_like_python(monkeypatch, tmp_path):
    script = tmp_path / "host.py"
    script.write_text("")
    out = tmp_path / "ran"
    code = f"import sys; open({str(out)!r}, 'w').write(' '.join(sys.argv))"
    monkeypatch.setattr(sys, "argv", ["scellis", "-s", "-B", "-c", code, str(script) + "c", "cfg"])
    with pytest.raises(SystemExit) as e:
        frozen.act_as_python()
    assert e.value.code == 0
    assert out.read_text() == f"-c {script} cfg"          # the .pyc path is mapped to the .py beside it


def test_a_frozen_build_started_as_the_studio_is_left_alone(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["scellis-studio", "some/package"])
    assert frozen.act_as_python() is None
    assert sys.argv == ["scellis-studio", "some/package"]
