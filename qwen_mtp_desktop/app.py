"""GUI boot: folders, logging, crash handlers, settings, QApplication, qasync loop, main window."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

from qwen_mtp_desktop import APP_ID, APP_NAME, __version__
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.system.crash import CrashHandler
from qwen_mtp_desktop.core.system.logs import setup_logging
from qwen_mtp_desktop.core.system.privacy import block_telemetry

log = logging.getLogger(__name__)


def seconds_since_launch() -> float:
    """Wall time since this process started, interpreter start-up included. On Linux from
    /proc to 10 ms (psutil's create_time() rests on a boot time in whole seconds)."""
    try:
        import os

        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - started
    except (OSError, ValueError, IndexError):
        import psutil

        return time.time() - psutil.Process().create_time()


def run_gui(
    *,
    model: Path | None = None,
    screenshot: Path | None = None,
    quit_after_ms: int | None = None,
) -> int:
    """Run the desktop app until its window closes. `screenshot` saves the window as a PNG
    once it is shown and then quits (used by smoke tests and the bundle self-check)."""
    block_telemetry()
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    paths = paths.with_models_dir(store.settings.models_dir)  # Settings > Data folders
    setup_logging(paths.log_file, debug=store.settings.debug_logging)
    log.info("%s %s starting", APP_NAME, __version__)
    crash_handler = CrashHandler(paths.log_dir, paths.log_file)
    crash_handler.install()

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from qwen_mtp_desktop.ui.dialogs.crash import CrashNotifier, announce_previous_crash
    from qwen_mtp_desktop.ui.main_window import MainWindow
    from qwen_mtp_desktop.ui.widgets.style import app_icon

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(__version__)
    app.setDesktopFileName(APP_ID)
    app.setWindowIcon(app_icon())

    notifier = CrashNotifier()
    crash_handler.set_callback(notifier.notify)

    if model is not None:
        store.settings.default_model = str(model.resolve())
    instance = None
    if screenshot is None:  # smoke runs may overlap a running app; they only read
        from qwen_mtp_desktop.ui.single_instance import SingleInstance

        instance = SingleInstance(paths.data_dir)
        if not instance.claim():
            log.info("%s is already running; asked it to come forward", APP_NAME)
            return 0
    window = MainWindow(paths, store)  # shows store.notice (damaged settings) non-modally
    notifier.set_parent_widget(window)
    window.show()
    # Paint it now, before the event loop's own imports (qasync, asyncio): the start time
    # users feel (issue 18: < 1 s). openvino and numpy load later, on worker threads.
    app.processEvents()
    # CPU seconds too: on a busy machine the wall time mostly measures waiting for a core.
    log.info(
        "window visible %.2f s after launch (%.2f s of CPU)",
        seconds_since_launch(),
        time.process_time(),
    )
    QTimer.singleShot(0, window.build_panels)  # Models, Export, Benchmark: right after
    announce_previous_crash(window, crash_handler)  # non-modal, over the window

    import qasync

    if instance is not None:
        from qwen_mtp_desktop.ui.single_instance import bring_to_front

        instance.activated.connect(lambda: bring_to_front(window))

    from qwen_mtp_desktop.ui.quit_signals import QuitSignals

    quit_signals = QuitSignals(window.close_unasked)
    quit_signals.activate()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    closed = asyncio.Event()
    app.aboutToQuit.connect(closed.set)

    if screenshot is not None:

        def grab_and_quit() -> None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            window.grab().save(str(screenshot))
            window.close()
            app.quit()

        QTimer.singleShot(quit_after_ms or 1500, grab_and_quit)
    elif quit_after_ms is not None:
        QTimer.singleShot(quit_after_ms, app.quit)

    try:
        with loop:
            loop.run_until_complete(closed.wait())
    finally:
        quit_signals.deactivate()
        if instance is not None:
            instance.release()
        crash_handler.uninstall()
        log.info("%s exiting", APP_NAME)
    return 0
