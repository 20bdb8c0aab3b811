"""blobstate.config.settings: the environment read once into a frozen, picklable Settings; a call's keywords win over
the settings handed in; an executor keeps the driver's settings but for its own key file."""

from __future__ import annotations

import os
import pickle

import msgspec
import pytest

from blobstate.config.settings import MiB, Settings, effective_configuration
from blobstate.errors import ConfigurationError


def test_the_environment_is_read_into_typed_fields():
    s = Settings.from_environ({"BLOBSTATE_TRANSFER_BUDGET": "64MiB", "BLOBSTATE_RETRY_ATTEMPTS": "2",
                               "BLOBSTATE_APPEND_RESOLVE_S": "1500ms", "BLOBSTATE_LIMIT_UPLOAD": "10MiB",
                               "BLOBSTATE_FILE_FSYNC": "0", "BLOBSTATE_PLUGINS": "a, b", "HOME": "/h"})
    assert (s.transfer_budget, s.retry_attempts, s.append_resolve_s) == (64 * MiB, 2, 1.5)
    assert (s.limit_upload, s.file_fsync, s.plugins) == (10 * MiB, False, ("a", "b"))
    assert dict(s.environ) == {k: v for k, v in s.environ.items() if k.startswith("BLOBSTATE_")}
    assert "HOME" not in s.environ


@pytest.mark.parametrize("variable, value", [("BLOBSTATE_TRANSFER_BUDGET", "lots"),
                                              ("BLOBSTATE_TRANSFER_BUDGET", "1KiB"),
                                              ("BLOBSTATE_RETRY_ATTEMPTS", "five"),
                                              ("BLOBSTATE_FILE_FSYNC", "maybe")])
def test_a_malformed_variable_is_a_configuration_error_naming_it(variable, value):
    with pytest.raises(ConfigurationError, match=variable):
        Settings.from_environ({variable: value})


def test_settings_are_frozen_and_survive_pickling():
    s = Settings.from_environ({"BLOBSTATE_WORK_DIR": "/w", "BLOBSTATE_KEY_FILE": "/k"}).with_options(
        "backup", repo="file:///r", append_only=True)
    with pytest.raises((AttributeError, TypeError)):
        s.work_dir = "/elsewhere"  # type: ignore[misc]
    back = pickle.loads(pickle.dumps(s))
    assert back == s and back.options["repo"] == "file:///r" and back.append_only


def test_a_calls_keywords_win_over_the_settings_handed_in():
    handed = Settings.from_environ({"BLOBSTATE_WORK_DIR": "/env", "BLOBSTATE_APPEND_ONLY": "1"})
    assert Settings.for_call(handed) is handed  # nothing given: the same settings, not a copy
    s = Settings.for_call(handed, work_base="/call", append_only=None, limit_download="1MiB")
    assert (s.work_base, s.append_only, s.limit_download) == ("/call", True, MiB)
    assert handed.work_base == "/env"  # the settings handed in are left as they were


def test_a_key_file_keyword_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings().with_options(key_file="k").key_file == os.path.join(str(tmp_path), "k")


def test_an_executor_runs_with_the_drivers_settings_but_its_own_key_file(monkeypatch):
    driver = Settings.from_environ({"BLOBSTATE_RETRY_ATTEMPTS": "2", "BLOBSTATE_KEY_FILE": "/driver/key"})
    for name in [n for n in os.environ if n.startswith("BLOBSTATE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BLOBSTATE_RETRY_ATTEMPTS", "9")
    assert driver.on_executor() is driver  # the executor's other variables are not read
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", "/executor/key")
    on_executor = driver.on_executor()
    assert (on_executor.key_file, on_executor.retry_attempts) == ("/executor/key", 2)


def test_plugins_see_the_command_and_its_options_with_credentials_hidden():
    s = Settings.from_environ({}).with_options("backup", repo="s3://b/p",
                                               storage_options={"secret_access_key": "hunter2"})
    config = effective_configuration(s)
    assert config["command"] == "backup" and config["repo"] == "s3://b/p"
    assert "hunter2" not in msgspec.json.encode(config, enc_hook=str).decode()
