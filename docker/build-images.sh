#!/usr/bin/env bash
# Build the images of docker-compose.yml locally (no image registry is needed):
#   1. spark-stream-sched-base:bookworm — a Debian 12 root made with debootstrap (Java 17 JRE,
#      Python 3.11) and brought in with `docker import` (skipped when the image exists);
#   2. spark-stream-sched:dev — the base plus this project and its dependencies, installed from
#      wheels built on the host (`pip wheel`), so the image build itself needs no network.
# Needs root (debootstrap), a running Docker daemon and the project's Python 3.11 (.venv).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=spark-stream-sched-base:bookworm
IMAGE=${SSS_IMAGE:-spark-stream-sched:dev}
PYTHON=${PYTHON:-.venv/bin/python}

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    rootfs=$(mktemp -d)
    trap 'rm -rf "$rootfs"' EXIT
    echo "building $BASE with debootstrap (about a minute)"
    debootstrap --variant=minbase \
        --include=openjdk-17-jre-headless,python3,python3-venv,procps,ca-certificates \
        bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
    tar -C "$rootfs" -c . | docker import - "$BASE" >/dev/null
fi

rm -rf docker/.build && mkdir -p docker/.build/wheels
echo "building wheels of the project and its dependencies"
"$PYTHON" -m pip wheel --quiet --wheel-dir docker/.build/wheels . 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
ls docker/.build/wheels/spark_stream_sched-*.whl >/dev/null
echo "building $IMAGE"
docker build --quiet --network none -t "$IMAGE" -f Dockerfile . >/dev/null
echo "built $IMAGE"
