"""The README's S3 steps, run as a new user would run them (bash, the installed `blobstate` command), against a moto
S3 server: from `pip install` to a verified restore, with nothing but what the README says."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

from fixtures_core import blobstate_script

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- readme-s3-steps"


def readme_steps() -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index(MARK)
    block = re.search(r"```bash\n(.*?)```", text[start:], flags=re.S)
    assert block, "the README's S3 steps block is missing"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_s3_steps_end_in_a_verified_restore(tmp_path, s3_target, moto_server, work_base):
    steps = readme_steps()
    install = steps[0]
    assert install.startswith('pip install -e ".[')  # from the clone: blobstate is not on a package index
    # The package is installed in this environment; the step's extra must exist and bring what S3 needs.
    extra = re.search(r'\.\[(\w+)\]', install).group(1)
    assert extra in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    __import__("s3fs")
    script = "\n".join(steps[1:])
    assert "my-bucket" in script and "http://127.0.0.1:9000" in script
    script = script.replace("s3://my-bucket/", f"s3://{s3_target.bucket}/").replace(
        "http://127.0.0.1:9000", moto_server.endpoint)
    bin_dir = str(blobstate_script().parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOBSTATE_", "AWS_"))}
    env.update(PATH=os.pathsep.join([bin_dir, env.get("PATH", "")]), BLOBSTATE_WORK_DIR=str(work_base))
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "restored, identical" in run.stdout
    assert ": ok" in run.stdout  # `blobstate verify` read every blob back
    assert (tmp_path / "restored" / "counts" / "greeting.txt").read_text() == "hello\n"
    # And it really went to S3: the repository marker and the blobs are in the bucket.
    import boto3

    client = boto3.client("s3", endpoint_url=moto_server.endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_target.bucket)["Contents"]]
    assert "state/blobstate-repository.json" in keys
    assert any(k.startswith("state/default/0/counts/blobs/") for k in keys)
