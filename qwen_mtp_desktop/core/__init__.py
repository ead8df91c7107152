"""The app's logic, free of Qt so it can be tested and used headless (the CLI) without a display.

A test imports every module here with PySide6 made unavailable, so a Qt import fails the suite.
"""
