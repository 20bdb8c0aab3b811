"""``blobstate.cli.logs``: no credential reaches a handler (message, arguments, traceback) at any verbosity, and
``-v``/``-vv``/``-vvv`` raise blobstate's, fsspec's and the SDKs' loggers as documented."""

from __future__ import annotations

import logging

import pytest

from blobstate.cli import logs

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def restored_logging():
    """Puts the root logger and the loggers ``configure`` touches back as they were."""
    names = ["", "blobstate", *logs.FS_LOGGERS, *logs.SDK_LOGGERS]
    levels = {name: logging.getLogger(name).level for name in names}
    root = logging.getLogger()
    handlers = list(root.handlers)
    filters = {h: list(h.filters) for h in handlers}
    logs.reset()
    yield
    logs.reset()
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler, kept in filters.items():
        handler.filters[:] = kept
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def _record(msg: str, args: tuple = (), exc_info=None) -> logging.LogRecord:  # noqa: ANN001
    return logging.LogRecord("blobstate.test", logging.WARNING, __file__, 1, msg, args, exc_info)


def test_a_secret_in_the_environment_is_hidden_in_the_message_and_its_arguments(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    record = _record("opening with %s and %s", (SECRET, "s3://user:pw123456@bucket/x"))
    assert logs.RedactingFilter().filter(record) is True  # always let through
    text = record.getMessage()
    assert SECRET not in text and "pw123456" not in text and "***" in text and record.args is None


def test_a_secret_in_a_traceback_is_hidden(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    try:
        raise RuntimeError(f"refused key {SECRET}")
    except RuntimeError:
        import sys

        record = _record("failed", exc_info=sys.exc_info())
    logs.RedactingFilter().filter(record)
    assert "RuntimeError" in record.exc_text and SECRET not in record.exc_text


def test_a_bad_format_string_keeps_the_record_and_still_redacts(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    record = _record("two %s %s", (SECRET,))
    assert logs.RedactingFilter().filter(record) is True
    assert "two" in record.getMessage() and SECRET not in record.getMessage()


@pytest.mark.parametrize(("verbosity", "ours", "fs", "sdk"), [
    (0, logging.WARNING, logging.WARNING, logging.WARNING),
    (1, logging.INFO, logging.WARNING, logging.WARNING),
    (2, logging.DEBUG, logging.DEBUG, logging.INFO),
    (3, logging.DEBUG, logging.DEBUG, logging.DEBUG),
])
def test_each_verbosity_raises_the_documented_loggers(restored_logging, verbosity, ours, fs, sdk):
    assert logs.configure(verbosity) == verbosity
    assert logging.getLogger("blobstate").level == ours
    assert {logging.getLogger(n).level for n in logs.FS_LOGGERS} == {fs}
    assert {logging.getLogger(n).level for n in logs.SDK_LOGGERS} == {sdk}
    assert logging.getLogger().level == (logging.DEBUG if verbosity >= 3 else logging.WARNING)


def test_verbosity_adds_up_and_one_handler_with_a_redacting_filter_is_installed(restored_logging):
    logs.configure(1)
    assert logs.configure(1) == 2
    ours = [h for h in logging.getLogger().handlers if h.get_name() == "blobstate-cli"]
    assert len(ours) == 1
    assert all(any(isinstance(f, logs.RedactingFilter) for f in h.filters) for h in logging.getLogger().handlers)
    logs.reset()
    assert logs.configure(0) == 0


def test_the_handler_writes_redacted_lines_to_the_current_stderr(restored_logging, monkeypatch, capsys):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    logs.configure(1)
    logging.getLogger("blobstate.test").info("key is %s", SECRET)
    err = capsys.readouterr().err
    assert "INFO blobstate.test: key is ***" in err and SECRET not in err
