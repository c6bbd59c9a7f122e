"""The shell: the main window and what it holds — the menus and their declaration, the docks, the window's
remembered state and settings, the Welcome page, autosave and crash recovery, the Studio's own folder."""
