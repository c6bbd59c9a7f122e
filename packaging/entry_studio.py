"""PyInstaller entry point of the GUI (the installed `scellis-studio` is studio.app.main:main)."""
import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from studio.frozen import act_as_python
    act_as_python()       # helper processes (sandbox host, device worker) are children of this executable
    from studio.app.main import main
    sys.exit(main())
