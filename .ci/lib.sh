# Shared by the .ci/install-*.sh scripts (sourced). Debian packages are installed only as root: CI and a fresh
# machine run as root; a user without root gets the exact apt-get line to run instead, never a sudo prompt.
export DEBIAN_FRONTEND=noninteractive
PY="${PYTHON:-python3}"

# apt_install PKG...: install the Debian packages, refreshing the package lists once per run.
apt_install() {
    [ "$#" -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing system packages; as root run: apt-get install -y --no-install-recommends $*" >&2
        return 1
    fi
    if [ -z "${BLOBSTATE_APT_UPDATED:-}" ]; then apt-get update -qq; export BLOBSTATE_APT_UPDATED=1; fi
    apt-get install -y -qq --no-install-recommends "$@"
}

# java_major: the major version of the `java` on PATH (0 when there is none).
java_major() {
    command -v java >/dev/null 2>&1 || { echo 0; return; }
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

# ensure_java17: pyspark 4 and the bundled Kafka 0.9 jars both run on OpenJDK 17; an older Java is not enough.
ensure_java17() {
    if [ "$(java_major)" -lt 17 ]; then
        apt_install openjdk-17-jre-headless procps
        local java17
        java17="$(ls -d /usr/lib/jvm/java-17-openjdk-*/bin/java 2>/dev/null | head -n 1)"
        # Make 17 the `java` every later process finds (the tests start Spark and Kafka from PATH).
        [ -n "$java17" ] && update-alternatives --set java "$java17" >/dev/null
    fi
}

# ensure_venv PYTHON DIR: make the virtual environment DIR with PYTHON (kept when it exists). Debian and Ubuntu ship
# the venv module's ensurepip separately (python3-venv): installed here as root, named otherwise.
ensure_venv() {
    local python="$1" dir="$2"
    [ -x "$dir/bin/python" ] && return 0
    if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        apt_install python3-venv
    fi
    "$python" -m venv "$dir"
}
