"""Frozen (PyInstaller) builds: the executable must also serve as the Python interpreter."""
import sys


def act_as_python() -> None:
    """In a frozen build sys.executable is this program, and the engine starts helper processes
    as `sys.executable [-s -B ...] -c CODE ARGS` (the reference's sandbox host). Behave like the
    interpreter for that form; PyInstaller keeps modules compiled, so a `.pyc` script path is
    mapped to the `.py` shipped beside it (the spec adds studio/engine/trust/host.py as data)."""
    import os
    args = sys.argv[1:]
    while args and args[0].startswith("-") and args[0] != "-c" and len(args[0]) == 2:
        args.pop(0)
    if len(args) < 2 or args[0] != "-c":
        return
    code, rest = args[1], args[2:]
    if rest and rest[0].endswith(".pyc") and os.path.isfile(rest[0][:-1]):
        rest[0] = rest[0][:-1]
    sys.argv = ["-c", *rest]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
    sys.exit(0)
