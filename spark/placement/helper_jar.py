"""blobstate's JVM helper jar for classic PySpark: built from ``spark/placement/jvm/`` (Java source), loaded at run
time.

PySpark cannot give a partition task a preferred location: ``RDD.getPreferredLocations`` is a JVM method, and a
Python RDD inherits its parent's (for a batch's shuffled rows, the host of the shuffle's map output, which put every
partition task of a batch on one host). The helper, ``blobstate.spark.PlacedRDD`` (``spark/placement/jvm/blobstate/
spark/PlacedRDD.java``), wraps an RDD one to one and returns the driver's chosen locations, the way Spark's own
``StateStoreRDD`` returns the executor the ``StateStoreCoordinator`` says loaded each store.

Built by ``python -m blobstate.spark.placement.helper_jar build`` (``.ci/install-spark.sh`` runs it; needs a JDK's
``javac``) against the installed pyspark's jars, one jar per Spark version and sources
(``blobstate-placement-spark<version>-<digest>.jar``, ``source_digest``: a jar of older sources, in the user cache
or beside them, is never taken for this one), beside the source; the build is reproducible, and the jar for the
pyspark the project pins is committed there. A missing jar is built on first use into the user cache when ``javac``
is there. ``load(sc)`` makes the classes visible to the driver (the py4j threads' context class loader, Spark's
``MutableURLClassLoader``) and to the executors (``SparkContext.addJar``), once per SparkContext; a jar already on
``spark.jars`` is used as it is (``helper_class`` says when it lacks a class). ``blobstate.spark.Decommission``
(``Decommission.java``) answers which executors Spark is decommissioning
(``blobstate.spark.placement.decommission``).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from typing import Any

from blobstate.spark.errors import HelperUnavailable

log = logging.getLogger(__name__)

CLASS_NAME = "blobstate.spark.PlacedRDD"
SOURCE_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm")
SOURCES = ("blobstate/spark/PlacedRDD.java", "blobstate/spark/Decommission.java")
DIGEST_CHARS = 12  # hex characters of the sources' SHA-256 in a jar's name
JAVAC_TIMEOUT_S = 300
JAR_ENV = "BLOBSTATE_SPARK_HELPER_JAR"  # a prebuilt helper jar to use instead of building one

_LOADED: dict[int, Any] = {}  # id of the driver's JavaSparkContext -> the helper class (None: unavailable)
_LOAD_LOCK = threading.Lock()


@functools.cache
def source_digest() -> str:
    """The first ``DIGEST_CHARS`` hex characters of the SHA-256 of ``SOURCES`` (each file's path and bytes, in
    order): what a jar was built from."""
    digest = hashlib.sha256()
    for source in SOURCES:
        with open(os.path.join(SOURCE_ROOT, source), "rb") as fh:
            data = fh.read()
        digest.update(f"{source}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:DIGEST_CHARS]


def jar_name(spark_version: str) -> str:
    """``blobstate-placement-spark<spark_version>-<source_digest>.jar``: a jar is built from these sources against
    one Spark version's jars (a jar of older sources, e.g. one without a class added since, has another name)."""
    return f"blobstate-placement-spark{spark_version}-{source_digest()}.jar"


def _cache_dir() -> str:
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("blobstate", appauthor=False), "jvm")


def find_jar(spark_version: str) -> str | None:
    """The built jar for ``spark_version``: the one ``BLOBSTATE_SPARK_HELPER_JAR`` names (a jar built elsewhere, for
    a driver host without a JDK), else beside the source (the install step's), else in the user cache. Raises
    ``HelperUnavailable`` when the variable names no file."""
    named = os.environ.get(JAR_ENV)
    if named:
        if not os.path.isfile(named):
            raise HelperUnavailable(f"{JAR_ENV} names {named!r}, which is not a file")
        return named
    for folder in (SOURCE_ROOT, _cache_dir()):
        path = os.path.join(folder, jar_name(spark_version))
        if os.path.isfile(path):
            return path
    return None


def _pyspark_jars() -> tuple[str, str]:
    """(the installed pyspark's ``jars`` folder, its version). Raises ``HelperUnavailable`` without pyspark."""
    try:
        import pyspark
    except ImportError as exc:
        raise HelperUnavailable("pyspark is not installed") from exc
    folder = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    if not glob.glob(os.path.join(folder, "spark-core_*.jar")):
        raise HelperUnavailable(f"no Spark jars in {folder}")
    return folder, pyspark.__version__


def build_jar(dest_dir: str | None = None) -> str:
    """Compile ``SOURCES`` against the installed pyspark's jars and write the jar into ``dest_dir`` (default: beside
    the source); returns its path. Atomic (a temp file renamed). Raises ``HelperUnavailable`` without ``javac`` or
    when it fails (its output in the message)."""
    jars, version = _pyspark_jars()
    javac = shutil.which("javac")
    if javac is None:
        raise HelperUnavailable("javac is not on PATH (a JDK is needed to build blobstate's Spark helper; on Debian: "
                                "apt-get install openjdk-17-jdk-headless)")
    dest_dir = dest_dir or SOURCE_ROOT
    os.makedirs(dest_dir, exist_ok=True)
    target = os.path.join(dest_dir, jar_name(version))
    with tempfile.TemporaryDirectory(prefix="blobstate-jvm-") as classes:
        cmd = [javac, "-nowarn", "-encoding", "UTF-8", "-d", classes, "-cp", os.path.join(jars, "*"),
               *(os.path.join(SOURCE_ROOT, s) for s in SOURCES)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=JAVAC_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            raise HelperUnavailable(f"javac failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
        fd, tmp = tempfile.mkstemp(prefix=".blobstate-placement-", suffix=".jar", dir=dest_dir)
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as jar:
                _add(jar, "META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\r\nCreated-By: blobstate\r\n\r\n")
                for path in sorted(glob.glob(os.path.join(classes, "**", "*.class"), recursive=True)):
                    with open(path, "rb") as fh:
                        _add(jar, os.path.relpath(path, classes).replace(os.sep, "/"), fh.read())
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a jar the install step built from other users
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
    return target


def _add(jar: zipfile.ZipFile, name: str, data: bytes) -> None:
    """One entry of a reproducible jar: a fixed time stamp and mode, so a build of the same classes is the same
    bytes (the committed jar does not change when the install step builds it again)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    jar.writestr(info, data)


def ensure_jar(spark_version: str) -> str:
    """The jar for ``spark_version``, built into the user cache when the install step did not build it (the
    installed pyspark must be that version). Raises ``HelperUnavailable``."""
    path = find_jar(spark_version)
    if path is not None:
        return path
    _, installed = _pyspark_jars()
    if installed != spark_version:
        raise HelperUnavailable(f"no helper jar for Spark {spark_version}, and the installed pyspark is {installed}")
    return build_jar(_cache_dir())


def load(sc: Any) -> Any:
    """The helper class (a py4j ``JavaClass``) in the JVM of the SparkContext ``sc`` (classic PySpark), loaded once
    per context: the jar added to the driver's class loader and shipped to the executors. Raises
    ``HelperUnavailable`` (the caller runs without placement)."""
    key = id(sc._jsc)
    with _LOAD_LOCK:
        if key in _LOADED:
            if _LOADED[key] is None:
                raise HelperUnavailable("the helper could not be loaded in this SparkContext (logged before)")
            return _LOADED[key]
        try:
            cls = _load(sc)
        except HelperUnavailable:
            _LOADED[key] = None
            raise
        _LOADED[key] = cls
        return cls


def _load(sc: Any) -> Any:
    from py4j.java_gateway import JavaClass

    jvm = sc._jvm
    found = _lookup(jvm)
    if found is None:
        jar = ensure_jar(sc.version)
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        try:
            loader.addURL(jvm.java.io.File(jar).toURI().toURL())  # Spark's MutableURLClassLoader
        except Exception as exc:  # noqa: BLE001 - a JVM without Spark's class loader: run without placement
            raise HelperUnavailable(f"cannot add {jar} to the driver's class loader: {exc}") from exc
        found = _lookup(jvm)
        if found is None:  # a damaged jar, or one without the class: nothing is shipped to the executors
            raise HelperUnavailable(f"{CLASS_NAME} is not visible after adding {jar}")
        sc._jsc.sc().addJar(jar)  # the executors fetch it before their next task
    if not isinstance(found, JavaClass):  # pragma: no cover - py4j answers a class or a package
        raise HelperUnavailable(f"{CLASS_NAME} is not a class")
    return found


def helper_class(sc: Any, name: str) -> Any:
    """Another class of the helper jar (``name``, e.g. ``blobstate.spark.Decommission``) in the JVM of ``sc``, the
    jar loaded first (``load``). Raises ``HelperUnavailable`` when the jar is not loadable or lacks the class (a jar
    on ``spark.jars`` built from older sources)."""
    load(sc)
    found = _lookup(sc._jvm, name)
    if found is None:
        raise HelperUnavailable(f"{name} is not in the loaded helper jar (built from older sources?)")
    return found


def _lookup(jvm: Any, name: str = CLASS_NAME) -> Any:
    from py4j.java_gateway import JavaClass

    cls = jvm
    for part in name.split("."):
        cls = getattr(cls, part)
    return cls if isinstance(cls, JavaClass) else None


def main(argv: list[str] | None = None) -> int:
    """``python -m blobstate.spark.placement.helper_jar build [DEST_DIR]``: build the jar, print its path."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "build":
        print("usage: python -m blobstate.spark.placement.helper_jar build [DEST_DIR]", file=sys.stderr)
        return 2
    try:
        print(build_jar(args[1] if len(args) > 1 else None))
    except HelperUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
