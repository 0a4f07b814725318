#!/usr/bin/env bash
# A throwaway single-node Kafka (KRaft, no ZooKeeper) for development and tests, and Spark's own
# Kafka connector, both fetched from Maven Central with `mvn` into a cache folder.
#
#   deploy/kafka.sh fetch                 fetch the broker and Spark's connector (once; cached)
#   deploy/kafka.sh spark-jars            print the connector's jar files, comma-separated (spark.jars)
#   deploy/kafka.sh run [PORT] [DATA_DIR] format DATA_DIR (first run only; cluster id KAFKA_CLUSTER_ID,
#                                         random if unset) and run the broker in the foreground on
#                                         127.0.0.1:PORT (default 9092)
#
# SPARKWIRE_CACHE (default ~/.cache/sparkwire) holds kafka-<version>/ and spark-sql-kafka-<version>/.
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
# Spark's connector must match PySpark's minor version (4.1); 4.1.1 is the 4.1.x Maven serves here.
SPARK_KAFKA_VERSION="${SPARK_KAFKA_VERSION:-4.1.1}"
CACHE="${SPARKWIRE_CACHE:-$HOME/.cache/sparkwire}"
BROKER_DIR="$CACHE/kafka-$KAFKA_VERSION"
CONNECTOR_DIR="$CACHE/spark-sql-kafka-$SPARK_KAFKA_VERSION"
# The broker logs through slf4j 1.7, whose binding to log4j2 the kafka_2.13 pom leaves to the
# distribution: without it the broker would print nothing at all.
LOG4J_VERSION="${LOG4J_VERSION:-2.24.3}"
LOGGING_DIR="$CACHE/log4j-slf4j-impl-$LOG4J_VERSION"

die() { echo "deploy/kafka.sh: $*" >&2; exit 1; }

# fetch GROUP:ARTIFACT:VERSION DIR [INCLUDE_ARTIFACT_IDS]: the artifact and its runtime dependencies
# into DIR, through a one-dependency pom (copy-dependencies needs a project). DIR/.complete marks a
# finished fetch, so an interrupted one is redone.
fetch_into() {
    local coords="$1" dir="$2" include="${3:-}"
    [ -f "$dir/.complete" ] && return 0
    command -v mvn >/dev/null || die "mvn is not installed (apt-get install maven)"
    local group artifact version work
    IFS=: read -r group artifact version <<<"$coords"
    work="$(mktemp -d)"
    cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>sparkwire</groupId><artifactId>fetch</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
EOF
    rm -rf "$dir.partial" && mkdir -p "$dir.partial"
    local args=(-q -B -f "$work/pom.xml" dependency:copy-dependencies -DincludeScope=runtime
        "-DoutputDirectory=$dir.partial")
    [ -n "$include" ] && args+=("-DincludeArtifactIds=$include")
    echo "fetching $coords with its dependencies into $dir" >&2
    mvn "${args[@]}" >&2 || { rm -rf "$work"; die "mvn could not fetch $coords (is Maven Central reachable?)"; }
    rm -rf "$work"
    ls "$dir.partial"/*.jar >/dev/null 2>&1 || die "mvn fetched no jar of $coords"
    rm -rf "$dir" && mv "$dir.partial" "$dir" && touch "$dir/.complete"
}

fetch() {
    fetch_into "org.apache.kafka:kafka_2.13:$KAFKA_VERSION" "$BROKER_DIR"
    fetch_into "org.apache.logging.log4j:log4j-slf4j-impl:$LOG4J_VERSION" "$LOGGING_DIR" log4j-slf4j-impl
    # Only what PySpark's own jars lack: Spark, Scala, zstd, lz4, snappy and slf4j come with PySpark.
    fetch_into "org.apache.spark:spark-sql-kafka-0-10_2.13:$SPARK_KAFKA_VERSION" "$CONNECTOR_DIR" \
        "spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2"
}

spark_jars() {
    fetch
    local jars=("$CONNECTOR_DIR"/*.jar)
    (IFS=,; echo "${jars[*]}")
}

run() {
    local port="${1:-9092}" data="${2:-./data/kafka}"
    fetch
    command -v java >/dev/null || die "java is not installed (Java 17 or later)"
    mkdir -p "$data"
    data="$(cd "$data" && pwd)"
    local controller_port="${KAFKA_CONTROLLER_PORT:-$((port + 1))}"
    cat >"$data/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data/logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
    cat >"$data/log4j2.properties" <<EOF
rootLogger.level=WARN
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
logger.kafka.name=kafka.server.KafkaRaftServer
logger.kafka.level=INFO
EOF
    local java_opts=(-Xms256m -Xmx512m -XX:+UseG1GC "-Dlog4j2.configurationFile=file:$data/log4j2.properties"
        -cp "$BROKER_DIR/*:$LOGGING_DIR/*")
    if [ ! -f "$data/logs/meta.properties" ]; then
        local cluster_id="${KAFKA_CLUSTER_ID:-}"
        [ "${cluster_id:0:1}" != "-" ] || die "KAFKA_CLUSTER_ID may not start with '-' (the storage tool reads an option)"
        # 16 random bytes in URL-safe base64, as Kafka's own ids; one starting with "-" would be
        # read as an option by the storage tool (1 run in 64 failed to format), so drawn again
        while [ -z "$cluster_id" ] || [ "${cluster_id:0:1}" = "-" ]; do
            cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
        done
        java "${java_opts[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
            -c "$data/server.properties" >&2 || die "formatting $data/logs failed"
    fi
    echo "kafka $KAFKA_VERSION on 127.0.0.1:$port (data in $data)" >&2
    exec java "${java_opts[@]}" kafka.Kafka "$data/server.properties"
}

case "${1:-}" in
    fetch) fetch ;;
    spark-jars) spark_jars ;;
    run) shift; run "$@" ;;
    *) die "usage: deploy/kafka.sh fetch | spark-jars | run [PORT] [DATA_DIR]" ;;
esac
