# Sparkwire with embedded defaults: Java 17 for Spark, the package, data in /data.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# The client first: its own distribution (client/), on no index; `sparkwire tail` uses it.
COPY client ./client
RUN pip install --no-cache-dir ./client
COPY pyproject.toml README.md ./
COPY app ./app
COPY compute ./compute
COPY schemas ./schemas
COPY dashboard ./dashboard
RUN pip install --no-cache-dir .

ENV SPARKWIRE_HOST=0.0.0.0 \
    SPARKWIRE_DATA_DIR=/data \
    SPARK_LOCAL_IP=127.0.0.1
VOLUME /data
EXPOSE 8000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s CMD python -c \
    "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/readyz').status != 200)"
CMD ["sparkwire", "serve"]
