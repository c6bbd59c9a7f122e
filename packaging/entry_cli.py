"""PyInstaller entry point of the headless CLI (the installed `scellis` is studio.cli:main)."""
import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from studio.frozen import act_as_python
    act_as_python()       # helper processes (sandbox host, device worker) are children of this executable
    from studio.cli import main
    sys.exit(main())
