"""``blobstate doctor`` (issue 29): against a real moto S3 server (healthy, a bucket missing, refused credentials,
a log mismatch, an open commit, a store whose conditional create a test plugin switched off) and file://."""

from __future__ import annotations

import json

import pytest
from cloud_servers import _moto_cmd, free_port, start_server, stop_server


@pytest.fixture
def store_dir(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    for i in range(3):
        (path / f"f{i}.txt").write_text(f"value {i}\n" * 50)
    return path


def doctor(cli, repo, *extra, env=None):
    out = cli("doctor", "--repo", repo, "--json", *extra, env=env)
    doc = json.loads(out.stdout)
    return out.returncode, {c["check"]: c for c in doc["checks"]}, doc


def assert_no_scratch_left(objects):
    assert not [o for o in objects if o.startswith("doctor/") or "/doctor/" in o], objects


def s3_objects(moto_server, bucket):
    import boto3

    client = boto3.client("s3", endpoint_url=moto_server.endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_doctor_on_a_healthy_s3_repository(cli, store_dir, s3_target, moto_server):
    assert cli("backup", store_dir, "--repo", s3_target.url, "-q", env=s3_target.env).returncode == 0
    code, checks, doc = doctor(cli, s3_target.url, env=s3_target.env)
    assert code == 0 and doc["ok"], doc
    expected = ["endpoint", "bucket", "repository", "clock skew", "store semantics", "checkpoint log",
                "open commits", "gc", "checkpoints"]
    assert list(checks) == expected
    assert all(c["status"] == "ok" for c in checks.values()), doc
    assert abs(checks["clock skew"]["data"]["skewMs"]) < 5000
    assert "default/0/counts: 1" in checks["checkpoints"]["detail"]
    assert_no_scratch_left(s3_objects(moto_server, s3_target.bucket))
    text = cli("doctor", "--repo", s3_target.url, env=s3_target.env)
    assert text.returncode == 0 and text.stdout.splitlines()[0].startswith("ok    endpoint"), text.stdout


def test_doctor_on_a_missing_bucket_fails_at_the_bucket(cli, s3_target):
    typo = s3_target.url.replace(s3_target.bucket, s3_target.bucket + "x")
    code, checks, _ = doctor(cli, typo, env=s3_target.env)
    assert code == 1
    assert checks["endpoint"]["status"] == "ok"
    assert checks["bucket"]["status"] == "fail" and "does not exist" in checks["bucket"]["detail"]
    assert list(checks) == ["endpoint", "bucket"]


def test_doctor_with_refused_credentials_fails_at_the_endpoint(cli):
    port = free_port()
    server = start_server("moto-auth", _moto_cmd(port), port, probe="/moto-api/",
                          env={"AWS_DEFAULT_REGION": "us-east-1", "INITIAL_NO_AUTH_ACTION_COUNT": "0"})
    try:
        env = {"BLOBSTATE_STORAGE_OPTIONS": json.dumps({"endpoint_url": server.endpoint, "key": "AKIDWRONG",
                                                        "secret": "wrong-secret-never-shown"}),
               "AWS_DEFAULT_REGION": "us-east-1"}
        code, checks, doc = doctor(cli, "s3://bucket/repo", env=env)
    finally:
        stop_server(server)
    assert code == 1
    assert list(checks) == ["endpoint"]
    assert checks["endpoint"]["status"] == "fail" and "access denied" in checks["endpoint"]["detail"]
    assert "wrong-secret-never-shown" not in json.dumps(doc)


def test_doctor_reports_a_log_mismatch(cli, tmp_path, store_dir, s3_target):
    assert cli("backup", store_dir, "--repo", s3_target.url, "-q", env=s3_target.env).returncode == 0
    code, checks, _ = doctor(cli, s3_target.url, "--log", f"sqlite:///{tmp_path / 'other.db'}", env=s3_target.env)
    assert code == 1
    log = checks["checkpoint log"]
    assert log["status"] == "fail" and "file log inside the repository" in log["detail"], log
    assert log["data"]["given"] == f"sqlite:///{tmp_path / 'other.db'}"


def test_doctor_reports_an_open_commit_of_this_work_directory(cli, store_dir, s3_target):
    env = {**s3_target.env, "BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "BlobUploaded"}
    assert cli("backup", store_dir, "--repo", s3_target.url, "-q", env=s3_target.env).returncode == 0
    (store_dir / "f0.txt").write_text("changed\n")
    killed = cli("backup", store_dir, "--repo", s3_target.url, "-q", env=env)
    assert killed.returncode != 0
    code, checks, _ = doctor(cli, s3_target.url, env=s3_target.env)
    assert code == 0  # a warning, not a failure
    assert checks["open commits"]["status"] == "warn", checks["open commits"]
    assert "default/0/counts" in checks["open commits"]["detail"] and "blobstate recover" in \
        checks["open commits"]["detail"]
    assert checks["gc"]["data"]["waitingForTtl"] >= 1, checks["gc"]  # the killed commit's blob waits for its TTL
    assert cli("recover", "--repo", s3_target.url, "--store", "counts", env=s3_target.env).returncode == 0
    assert doctor(cli, s3_target.url, env=s3_target.env)[1]["open commits"]["status"] == "ok"


def test_doctor_finds_a_store_whose_conditional_create_is_off(cli, store_dir, s3_target, moto_server):
    assert cli("backup", store_dir, "--repo", s3_target.url, "-q", env=s3_target.env).returncode == 0
    env = {**s3_target.env, "BLOBSTATE_PLUGINS": "no_conditional_create"}
    code, checks, doc = doctor(cli, s3_target.url, env=env)
    assert code == 1, doc
    semantics = checks["store semantics"]
    assert semantics["status"] == "fail" and "conditional create does not refuse" in semantics["detail"], semantics
    assert_no_scratch_left(s3_objects(moto_server, s3_target.bucket))


def test_doctor_on_file_repositories(cli, tmp_path, store_dir):
    repo = tmp_path / "repo"
    code, checks, _ = doctor(cli, repo)
    assert code == 1 and checks["repository"]["status"] == "fail"
    assert "first `blobstate backup`" in checks["repository"]["detail"]
    assert cli("backup", store_dir, "--repo", repo, "-q").returncode == 0
    code, checks, doc = doctor(cli, repo)
    assert code == 0 and all(c["status"] == "ok" for c in checks.values()), doc
    assert_no_scratch_left([str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()])
    # The newest checkpoint older than a week: a warning (a job that stopped committing).
    marker_time = checks["checkpoints"]["data"]["stores"]["default/0/counts"]["newestAgeMs"]
    assert marker_time < 60_000


def _repository_state(target, proxy, root):  # noqa: ANN001, ANN202
    """Writes counted at the server (cloud), or every file and directory with its bytes and mtime (file://)."""
    if proxy is not None:
        return sum(proxy.count(m) for m in ("PUT", "POST", "DELETE", "PATCH"))
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(root.rglob("*"))}


def test_doctor_with_a_wrong_key_writes_nothing_and_exits_3(cli, tmp_path, store_dir, store_target):
    """Issue 39 case 11: an encrypted repository checked with a wrong key. On main doctor wrote its probe objects
    (and removed them) and exited 1; rule 20 says a wrong key writes nothing (exit 3): the key is checked right
    after the marker is read, before any write. Counted at the server (moto, azurite) and byte for byte on file://
    (directories included). With the right key every check passes."""
    import os

    from counting_proxy import CountingProxy, emulator_endpoint, options_through

    target = store_target
    keys = []
    for name in ("k", "wrong"):
        path = tmp_path / f"{name}.key"
        path.write_bytes(os.urandom(32))
        path.chmod(0o600)
        keys.append(str(path))
    env = dict(target.env)
    assert cli("backup", store_dir, "--repo", target.url, "-q", "--key-file", keys[0], env=env).returncode == 0
    proxy = CountingProxy(emulator_endpoint(target)) if target.name != "file" else None
    through = options_through(target, proxy) if proxy else {}
    root = tmp_path / "repo" if target.name == "file" else None
    try:
        before = _repository_state(target, proxy, root)
        out = cli("doctor", "--repo", target.url, "--json", "--key-file", keys[1], env={**env, **through})
        assert _repository_state(target, proxy, root) == before, "doctor wrote with a wrong key"
    finally:
        if proxy is not None:
            proxy.close()
    assert out.returncode == 3, (out.returncode, out.stdout, out.stderr)
    checks = {c["check"]: c for c in json.loads(out.stdout)["checks"]}
    assert checks["key"]["status"] == "fail" and "wrong key file" in checks["key"]["detail"], checks
    assert "store semantics" not in checks
    code, checks, doc = doctor(cli, target.url, "--key-file", keys[0], env=env)
    assert code == 0 and all(c["status"] == "ok" for c in checks.values()), doc


def test_doctor_on_file_leaves_no_directory_behind(cli, tmp_path, store_dir):
    """Issue 39 case 11: every doctor on file:// left an empty ``doctor/<id>`` directory that gc never removes."""
    repo = tmp_path / "repo"
    assert cli("backup", store_dir, "--repo", repo, "-q").returncode == 0
    before = sorted(str(p.relative_to(repo)) for p in repo.rglob("*"))
    for _ in range(2):
        code, _, doc = doctor(cli, repo)
        assert code == 0, doc
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*")) == before
