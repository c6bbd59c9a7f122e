"""Shared fixtures: real wgpu device (lavapipe where there is no GPU), package copies."""
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
BUILTINS = REPO / "resources" / "ops" / "core"
MEDIAN = EXAMPLES / "windowed_median"


def pytest_configure(config):
    """The suite never runs on wgpu's OpenGL backend: its compute results are wrong. Every run
    reports its time against the budget in pyproject.toml (tests/suite_budget.py), and runs the
    longest files first (tests/suite_order.py)."""
    from suite_budget import SuiteClock
    from suite_order import LongestFirst
    config.pluginmanager.register(SuiteClock(config), "scellis_suite_budget")
    config.pluginmanager.register(LongestFirst(config), "scellis_suite_order")     # tests/suite_order.py
    config.addinivalue_line("markers", "lifetime_warnings_expected: a Studio test that provokes Qt's "
                                       "object-lifetime warnings on purpose (the check's own control)")
    if os.environ.get("SCELLIS_ALLOW_OPENGL"):
        raise pytest.UsageError("SCELLIS_ALLOW_OPENGL is set: the tests run only on Vulkan, Metal or D3D12; "
                                "unset it (and WGPU_BACKEND_TYPE=OpenGL), and install mesa-vulkan-drivers")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Each test sees an empty user data folder (trust store, user ops, autosave)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("SCELLIS_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def device():
    from studio.engine.device.device import Device
    return Device()


@pytest.fixture(scope="session")
def hosts():
    """One pool of confined reference hosts for the session (as one process would hold)."""
    from studio.engine.trust.pool import HostPool
    with HostPool() as pool:
        yield pool


@pytest.fixture
def ctx(_isolated_home, device, hosts):
    """The per-process context a command would hold: the default catalog, this test's trust
    store (its own user data folder), the session's device and host pool."""
    from studio.engine.context import Context
    return Context.open(device=device, hosts=hosts)


@pytest.fixture(scope="session")
def proof_store(tmp_path_factory):
    """The run's builtin proofs, shared by its workers (proof_store.py): each builtin proven once."""
    from proof_store import store_folder
    return store_folder(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def module_ctx(tmp_path_factory, device, hosts):
    """A context for module-scoped fixtures, with a user data folder of its own."""
    from studio.engine.context import Context
    return Context.open(home=tmp_path_factory.mktemp("home"), device=device, hosts=hosts)


def copy_package(src: Path, dst: Path, edits: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    """Copy an op package (without receipts) and apply (old, new) text edits per file;
    every edit must apply, so a test cannot silently test the unedited package."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    for rel, pairs in (edits or {}).items():
        p = dst / rel
        text = p.read_text()
        for old, new in pairs:
            assert old in text, f"{old!r} not in {p}"
            text = text.replace(old, new)
        p.write_text(text)
    _authored(dst)
    return dst


def _authored(root: Path) -> None:
    """A package a test writes is authored here: record its content hash in the (isolated)
    trust store, as the Studio's save does (studio/engine/trust/store.py, docs/security.md)."""
    from studio.engine.contract.package import folder_hash
    from studio.engine.home import studio_home
    from studio.engine.trust.store import TrustStore
    TrustStore(studio_home()).record_authored(folder_hash(root), path=root.resolve())


@pytest.fixture
def pkg_copy(tmp_path):
    def make(src: Path = MEDIAN, name: str = "pkg", **edits):
        return copy_package(src, tmp_path / name, {k.replace("__", "."): v for k, v in edits.items()})
    return make


# Qt's own words for an object used across its lifetime or its thread: in a Studio test each one is
# a failure (the Studio's GC segfault was an object freed while still reached; these are how Qt
# says so before it crashes), and so is a timer started with a bogus interval.
LIFETIME_WARNINGS = ("QObject::", "Cannot create children for a parent that is in a different thread",
                     "QThread: Destroyed while thread", "QBasicTimer", "QTimer::", "QSocketNotifier:",
                     "another thread", "different thread", "Recursive repaint", "QPainter::begin: A paint device")


@pytest.fixture(autouse=True)
def _qt_lifetime_warnings(request):
    """Fails a Studio test on any of ``LIFETIME_WARNINGS`` that Qt printed while it ran."""
    if not request.node.module.__name__.startswith("test_app_") or \
            request.node.get_closest_marker("lifetime_warnings_expected"):
        yield
        return
    qtlog = request.getfixturevalue("qtlog")            # pytest-qt's record of Qt's messages
    yield
    bad = lifetime_warnings(r.message for r in qtlog.records)
    assert not bad, "Qt object-lifetime warnings:\n" + "\n".join(bad)


def lifetime_warnings(messages) -> list[str]:
    return [m for m in messages if any(w in m for w in LIFETIME_WARNINGS)]


@pytest.fixture(autouse=True)
def _no_qt_object_left_to_the_collector(request):
    """After each Studio test its windows are deleted (the deferred deletes run); then any Qt object
    still alive in Python's cyclic garbage that belongs to its Python wrapper (made from Python
    without a Qt parent) fails the test. Only the collector would delete it, at whatever moment it
    next ran: a collection while Qt walked its widgets freed pyqtgraph's menus still on Qt's list,
    the Studio's GC segfault (studio/figures.py ``plot_widget``; controls in test_app_lifetime.py).
    Before the test, the garbage an earlier test of another kind left (a headless export in the same
    pytest-xdist worker) is collected at this calm moment, so the check judges this test alone."""
    if not request.node.module.__name__.startswith("test_app_"):
        yield
        return
    import gc
    gc.collect()
    yield
    from PySide6.QtCore import QCoreApplication, QEvent
    if QCoreApplication.instance() is not None:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        QCoreApplication.processEvents()
    left = qt_objects_left_to_the_collector()
    assert not left, "Qt objects that only Python's cyclic collector would delete:\n" + "\n".join(left)


def qt_objects_left_to_the_collector() -> list[str]:
    """Collect Python's cyclic garbage, naming each Qt object in it that is alive and owned by its
    wrapper (freeing the garbage deletes them, here and now)."""
    import gc

    import shiboken6
    from PySide6.QtCore import QObject
    flags = gc.get_debug()
    gc.set_debug(flags | gc.DEBUG_SAVEALL)           # the garbage kept whole in gc.garbage, to look at
    try:
        gc.collect()
        left = [f"{type(o).__module__}.{type(o).__qualname__} {o.objectName()!r}" for o in gc.garbage
                if isinstance(o, QObject) and shiboken6.isValid(o) and shiboken6.ownedByPython(o)]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
    gc.collect()
    return sorted(left)
