"""Storage errors translated once (issue 29, case 4): a missing bucket, refused credentials and an unreachable
endpoint are each one line naming the URL and the fix, the same from every command, against a real moto S3 server
(one that checks credentials for the refused ones) and file://. And a backup into a location that is not yet a
repository says so (case 5), or refuses with --no-create."""

from __future__ import annotations

import json

import pytest
from cloud_servers import _moto_cmd, free_port, start_server, stop_server

COMMANDS = [
    ("backup", "STORE", "-q"),
    ("list",),
    ("verify",),
    ("gc",),
    ("stats",),
    ("ls", "--store", "counts"),
    ("restore", "DEST", "--store", "counts"),
]


@pytest.fixture(scope="module")
def strict_moto():
    """A moto server that checks credentials (moto accepts any key unless told otherwise)."""
    port = free_port()
    server = start_server("moto-auth", _moto_cmd(port), port, probe="/moto-api/",
                          env={"AWS_DEFAULT_REGION": "us-east-1", "INITIAL_NO_AUTH_ACTION_COUNT": "0"})
    yield server
    stop_server(server)


@pytest.fixture
def store_dir(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    (path / "a.txt").write_text("alpha\n")
    return path


#: A writer, a reader of the log and a reader of blobs: enough to show that the message is the wrapper's, not a verb's.
FEW = [COMMANDS[0], COMMANDS[1], COMMANDS[6]]


def run_all(cli, tmp_path, store_dir, repo, env, commands=COMMANDS):
    results = {}
    for args in commands:
        args = [str(store_dir) if a == "STORE" else str(tmp_path / "dest") if a == "DEST" else a for a in args]
        out = cli(*args, "--repo", repo, env=env)
        results[" ".join(args[:2])] = out
    return results


def assert_one_line_everywhere(results, code, must_contain):
    lines = set()
    for name, out in results.items():
        stderr = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == code, (name, out.returncode, out.stderr)
        assert len(stderr) == 1, (name, out.stderr)  # one line: no SDK dump, no traceback
        assert "Debug source" not in out.stderr and "unexpected" not in out.stderr, (name, out.stderr)
        for text in must_contain:
            assert text in stderr[0], (name, stderr[0])
        lines.add(stderr[0])
    assert len(lines) == 1, lines  # the same message from every command


def s3_env(endpoint, key="testing", secret="testing"):
    return {"BLOBSTATE_STORAGE_OPTIONS": json.dumps({"endpoint_url": endpoint, "key": key, "secret": secret}),
            "AWS_DEFAULT_REGION": "us-east-1", "BLOBSTATE_RETRY_ATTEMPTS": "2"}


def test_a_misspelled_bucket_is_one_line_from_every_command(cli, tmp_path, store_dir, s3_target, moto_server):
    typo = s3_target.url.replace(s3_target.bucket, s3_target.bucket + "x")
    results = run_all(cli, tmp_path, store_dir, typo, s3_env(moto_server.endpoint))
    assert_one_line_everywhere(results, 6, ["BucketNotFoundError", f"{s3_target.bucket}x", typo,
                                            "does not exist", "check the bucket name"])


def test_refused_credentials_are_one_line_from_every_command(cli, tmp_path, store_dir, strict_moto):
    secret = "never-shown-secret-1234"
    results = run_all(cli, tmp_path, store_dir, "s3://some-bucket/repo",
                      s3_env(strict_moto.endpoint, key="AKIDWRONG", secret=secret), FEW)
    assert_one_line_everywhere(results, 1, ["AccessDeniedError", "s3://some-bucket/repo", "check the credentials"])
    assert all(secret not in out.stderr for out in results.values())


def test_an_unreachable_endpoint_is_one_line_from_every_command(cli, tmp_path, store_dir):
    endpoint = f"http://127.0.0.1:{free_port()}"  # bound and released: nothing listens there
    results = run_all(cli, tmp_path, store_dir, "s3://some-bucket/repo", s3_env(endpoint), FEW)
    assert_one_line_everywhere(results, 1, ["EndpointUnreachableError", endpoint, "s3://some-bucket/repo",
                                            "check the endpoint"])


def test_a_file_repository_under_a_regular_file_is_one_line_from_every_command(cli, tmp_path, store_dir):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file")
    results = run_all(cli, tmp_path, store_dir, str(blocker / "repo"), {}, FEW)
    for name, out in results.items():
        stderr = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode != 0 and len(stderr) == 1, (name, out.stderr)
        assert "not a directory" in stderr[0] and "unexpected" not in stderr[0], (name, stderr[0])


def test_a_backup_into_a_new_location_says_it_created_the_repository(cli, tmp_path, store_dir):
    repo = tmp_path / "new-repo"
    refused = cli("backup", store_dir, "--repo", repo, "--no-create")
    assert refused.returncode == 6, refused.stderr
    assert "no blobstate repository" in refused.stderr and "blobstate init" in refused.stderr
    assert not repo.exists() or not any(repo.iterdir())
    first = cli("backup", store_dir, "--repo", repo)
    assert first.returncode == 0, first.stderr
    assert f"created repository at file://{repo}" in first.stderr
    second = cli("backup", store_dir, "--repo", repo)
    assert second.returncode == 0 and "created repository" not in second.stderr, second.stderr
    assert cli("backup", store_dir, "--repo", repo, "--no-create").returncode == 0


def test_a_backup_into_a_new_s3_prefix_says_it_created_the_repository(cli, tmp_path, store_dir, s3_target):
    first = cli("backup", store_dir, "--repo", s3_target.url, env=s3_target.env)
    assert first.returncode == 0, first.stderr
    assert f"created repository at {s3_target.url}" in first.stderr


@pytest.mark.parametrize("userinfo", ["AKIAIOSFODNN7EXAMPLE:hunter22", "AKIAIOSFODNN7EXAMPLE:hunt/er22"])
def test_credentials_in_the_repository_url_are_refused_without_being_shown(cli, tmp_path, store_dir, s3_target,
                                                                         moto_server, userinfo):
    """s3fs takes no credentials from a URL: ``s3://KEY:SECRET@bucket`` addressed a bucket named 'KEY:SECRET@bucket'
    and the message printed it. Every command refuses such a URL, naming where credentials go, without them."""
    repo = s3_target.url.replace("s3://", f"s3://{userinfo}@")
    results = run_all(cli, tmp_path, store_dir, repo, s3_env(moto_server.endpoint))
    assert_one_line_everywhere(results, 2, ["ConfigurationError", f"s3://***@{s3_target.bucket}/repo",
                                            "AWS_ACCESS_KEY_ID"])
    for name, out in results.items():
        assert not {"hunter22", "hunt", "er22", "AKIAIOSFODNN7EXAMPLE"} & set(
            out.stderr.replace("/", " ").replace(":", " ").replace("'", " ").split()), (name, out.stderr)
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("url, where", [("gs://token:hunter22@bucket/repo", "GOOGLE_APPLICATION_CREDENTIALS"),
                                        ("az://account:hunter22@container/repo", "AZURE_STORAGE_CONNECTION_STRING"),
                                        ("abfs://account:hunt/er22@container/repo", "AZURE_STORAGE_CONNECTION_STRING")])
def test_a_gcs_or_azure_url_with_credentials_is_refused_when_opened(url, where):
    """Refused before the SDK is asked anything (no server needed); Azure's own container@account is not user
    info to refuse."""
    from blobstate.errors import ConfigurationError
    from blobstate.repository.backends import open_blob_store

    with pytest.raises(ConfigurationError, match=rf"^the repository URL \w+://\*\*\*@\w+/repo holds user info.*{where}"
                       ) as info:
        open_blob_store(url)
    assert not any(shown in str(info.value) for shown in ("hunt", "er22", "token:", "account:")), info.value
    store = open_blob_store("abfs://container@account.dfs.core.windows.net/repo", storage_options={
        "account_name": "account", "account_key": "a2V5"})
    assert store.bucket == "container"
    store.close()
