"""blobstate's JVM helper (``spark/placement/jvm/``, ``blobstate.spark.placement.helper_jar``): built from this
repository's source against the installed pyspark's jars with a JDK's ``javac`` (``.ci/install-spark.sh`` runs the same
build), and a clear ``HelperUnavailable`` when it cannot be built (no JDK, another Spark version): partitioned state
then runs without placement (``blobstate.spark.placement.coordinator.SparkPlacement`` logs why)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

pyspark = pytest.importorskip("pyspark")

from blobstate.spark.placement import helper_jar  # noqa: E402


def test_the_helper_is_built_from_source_against_the_installed_spark(tmp_path):
    if shutil.which("javac") is None:
        message = "no javac: a JDK is needed to build the helper (.ci/install-spark.sh installs one)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    path = helper_jar.build_jar(str(tmp_path))
    assert path == str(tmp_path / helper_jar.jar_name(pyspark.__version__))
    with zipfile.ZipFile(path) as jar:
        names = jar.namelist()
    assert helper_jar.CLASS_NAME.replace(".", "/") + ".class" in names
    assert os.listdir(tmp_path) == [os.path.basename(path)]  # no temporary jar left beside it
    assert os.stat(path).st_mode & 0o044 == 0o044  # readable by every user (built by root in CI)


def test_without_a_jdk_the_build_is_a_clear_error_and_writes_nothing(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = dict(os.environ, PATH=str(bin_dir))  # no javac on PATH
    proc = subprocess.run([sys.executable, "-m", "blobstate.spark.placement.helper_jar", "build",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "javac is not on PATH" in proc.stderr and "openjdk-17-jdk-headless" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_jar_for_another_spark_version_is_not_built_against_this_one():
    with pytest.raises(helper_jar.HelperUnavailable, match="no helper jar for Spark 0.0.1"):
        helper_jar.ensure_jar("0.0.1")


def test_a_jar_built_from_older_sources_is_never_taken_for_this_one(tmp_path, monkeypatch):
    # a user cache holding the jar an older blobstate built (its name then: the Spark version alone), and one built
    # from other sources under the current naming: neither is this source's jar
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"blobstate-placement-spark{pyspark.__version__}.jar").write_bytes(b"PK stale")
    (cache / f"blobstate-placement-spark{pyspark.__version__}-000000000000.jar").write_bytes(b"PK stale")
    monkeypatch.setattr(helper_jar, "_cache_dir", lambda: str(cache))
    monkeypatch.setattr(helper_jar, "SOURCE_ROOT", str(tmp_path / "no-jar-beside-the-source"))
    monkeypatch.delenv(helper_jar.JAR_ENV, raising=False)
    assert helper_jar.find_jar(pyspark.__version__) is None


def test_the_jar_names_the_digest_of_every_source_and_two_builds_are_the_same_bytes(tmp_path):
    if shutil.which("javac") is None:
        pytest.skip("no javac")
    name = helper_jar.jar_name(pyspark.__version__)
    assert name.endswith(f"-{helper_jar.source_digest()}.jar") and len(helper_jar.source_digest()) == 12
    first = helper_jar.build_jar(str(tmp_path / "a"))
    second = helper_jar.build_jar(str(tmp_path / "b"))
    with open(first, "rb") as a, open(second, "rb") as b:
        assert a.read() == b.read()  # a rebuild by the install step leaves the committed jar unchanged
    with zipfile.ZipFile(first) as jar:
        names = jar.namelist()
    for source in helper_jar.SOURCES:
        assert source.replace(".java", ".class") in names


def test_the_committed_jar_is_the_one_built_from_these_sources():
    if shutil.which("javac") is None:
        pytest.skip("no javac")
    committed = os.path.join(helper_jar.SOURCE_ROOT, helper_jar.jar_name(pyspark.__version__))
    assert os.path.isfile(committed), "rebuild and commit it: python -m blobstate.spark.placement.helper_jar build"
