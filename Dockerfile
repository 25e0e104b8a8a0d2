# The spark_stream_sched image used by docker-compose.yml: Debian 12, Java 17, Python 3.11,
# pyspark and this project in /opt/venv. Build it with docker/build-images.sh, which makes the
# local base image and the wheels this file installs (no registry, no network in the build).
FROM spark-stream-sched-base:bookworm

COPY docker/.build/wheels /tmp/wheels
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --quiet --no-index --find-links /tmp/wheels spark_stream_sched \
    && rm -rf /tmp/wheels /root/.cache
COPY conf /opt/spark-stream-sched/conf

ENV PATH=/opt/venv/bin:$PATH \
    SPARK_HOME=/opt/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
    SPARK_LOCAL_IP=127.0.0.1 \
    SPARK_NO_DAEMONIZE=1 \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
WORKDIR /opt/spark-stream-sched
