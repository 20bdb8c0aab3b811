"""``blobstate.plugins.fsspec_info``: the root of a local URL as fsspec itself gives it (compared with
``fsspec.core.url_to_fs``), None wherever fsspec must answer; the last-modified time in ms from the ``info`` dicts of
every backend's shape; the entity tag under either spelling."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import fsspec
import pytest

from blobstate.plugins.fsspec_info import etag, local_root, modified_ms


@pytest.mark.parametrize("url", ["file:///data/repo", "file:///data/repo/", "local:///data/repo", "file://rel/repo",
                                 "file://./rel", "file://.", "file:///data/with space/é", "file:///data//double"])
def test_a_local_root_is_what_fsspec_gives(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    expected = fsspec.core.url_to_fs(url)[1].rstrip("/")
    assert local_root(url, {}) == expected


def test_a_home_relative_root_is_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert local_root("file://~/repo", {}) == f"{tmp_path}/repo"


@pytest.mark.parametrize("url, options", [
    ("s3://bucket/repo", {}), ("memory://repo", {}), ("/data/repo", {}), ("file:///a::s3://b/c", {}),
    ("simplecache::file:///a", {}), ("file:///data/repo", {"protocol": "s3"}),
], ids=["s3", "memory", "a plain path", "a chain", "a chain in front", "a protocol option"])
def test_anything_else_is_left_to_fsspec(url, options):
    assert local_root(url, options) is None


@pytest.mark.parametrize("info, ms", [
    ({"mtime": 1_700_000_000.25}, 1_700_000_000_250),
    ({"mtime": 1_700_000_000}, 1_700_000_000_000),
    ({"LastModified": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)}, 1_704_164_645_000),
    ({"last_modified": "2024-01-02T03:04:05Z"}, 1_704_164_645_000),
    ({"updated": "2024-01-02T03:04:05.500+00:00"}, 1_704_164_645_500),
    ({"created": "2024-01-02T04:04:05+01:00"}, 1_704_164_645_000),
    ({"creation_time": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)}, 1_704_164_645_000),
    ({"mtime": None, "updated": "not a date", "created": "2024-01-02T03:04:05Z"}, 1_704_164_645_000),
    ({"mtime": 1.0, "LastModified": datetime(2000, 1, 1, tzinfo=UTC)}, 1000),
    ({}, None), ({"size": 5, "name": "x"}, None), ({"updated": "garbage"}, None), ({"mtime": [1]}, None),
], ids=["local float", "local int", "s3", "iso z", "gcs", "offset", "azure", "skips the unreadable", "first wins",
        "empty", "no time", "garbage", "a list"])
def test_the_last_modified_time_of_any_backends_info(info, ms):
    assert modified_ms(info) == ms


def test_the_local_file_systems_own_info_gives_the_files_mtime(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x")
    os.utime(path, ns=(0, 1_600_000_000_123_000_000))
    assert modified_ms(fsspec.filesystem("file").info(str(path))) == 1_600_000_000_123


@pytest.mark.parametrize("info, tag", [({"ETag": '"abc"'}, '"abc"'), ({"etag": "0x8D"}, "0x8D"), ({"ETag": ""}, None),
                                       ({}, None), ({"etag": None}, None), ({"ETag": 12}, "12"),
                                       ({"ETag": "a", "etag": "b"}, "a")])
def test_the_entity_tag_under_either_spelling(info, tag):
    assert etag(info) == tag
