"""``blobstate.cli.params``: decorators stacked in the order written, the human-unit option types (durations to ms,
sizes to bytes) refusing the rest, the ``--keep-*`` count, and the retention policy ``--retain`` and ``--keep-*``
name."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from blobstate.cli import params
from blobstate.model.retention import RetentionPolicy


def test_stack_applies_decorators_in_the_order_written():
    calls = []

    def mark(name):
        def decorator(fn):
            calls.append(name)
            return fn
        return decorator

    params.stack(mark("a"), mark("b"), mark("c"))(lambda: None)
    assert calls == ["c", "b", "a"]  # the innermost (last written) first: as if written one above the other


def run(command: click.Command, *args: str, **env: str):
    return CliRunner().invoke(command, list(args), env=env or None, catch_exceptions=False)


def test_duration_and_size_options_convert_to_ms_and_bytes_and_refuse_the_rest():
    @click.command()
    @click.option("--ttl", type=params.Duration())
    @click.option("--chunk", type=params.ByteSize())
    def command(ttl, chunk):
        click.echo(json.dumps([ttl, chunk]))

    assert json.loads(run(command, "--ttl", "1h30m", "--chunk", "64MiB").output) == [5_400_000, 64 << 20]
    assert json.loads(run(command, "--ttl", "500", "--chunk", "4096").output) == [500, 4096]
    for args, why in [(["--ttl", "soon"], "not a duration"), (["--ttl", "0"], "'0' is not a positive duration"),
                      (["--chunk", "lots"], "not a size"), (["--chunk", "0B"], "is not a positive size")]:
        result = run(command, *args)
        assert result.exit_code == 2 and why in result.output, result.output


@pytest.mark.parametrize("value, count", [("all", -1), ("Unlimited", -1), (" -1 ", -1), ("3", 3), (7, 7)])
def test_a_keep_count_is_a_number_or_all(value, count):
    assert params.KeepCount().convert(value, None, None) == count


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_a_keep_count_refuses_anything_else(value):
    with pytest.raises(click.BadParameter, match=f"{value!r} is not a count"):
        params.KeepCount().convert(value, None, None)


def policy_of(**given):
    with click.Context(click.Command("x"), obj=None) as ctx:
        ctx.params.update(given)
        return params.retention_policy()


def test_retention_comes_from_retain_and_the_keep_options():
    assert policy_of(retain=None, keep_last=None, keep_daily=None) is None
    assert policy_of(retain=4, keep_last=None) == RetentionPolicy(last=4)
    assert policy_of(retain=None, keep_daily=7, keep_within="2d") == RetentionPolicy(daily=7, within="2d")
    assert policy_of(retain=3, keep_last=3) == RetentionPolicy(last=3)
    with pytest.raises(click.UsageError, match="--retain 3 and --keep-last 5 disagree: give one"):
        policy_of(retain=3, keep_last=5)
    with pytest.raises(click.BadParameter):
        policy_of(keep_within="soon")
