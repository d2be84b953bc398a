"""Apache Kafka for tests, benchmarks and trying things by hand: KRaft brokers run from
Maven Central's ``org.apache.kafka:kafka_2.13`` jars.

    python tests/kafka_broker.py              # one node; prints its addresses, Ctrl-C stops it
    python tests/kafka_broker.py --nodes 3    # three nodes (replicas, broker failures)

The jars are resolved once per machine by Apache Ivy (the resolver Spark uses for
``spark.jars.packages``, shipped in PySpark's wheel) from Maven Central into
``~/.cache/ticdc-spark/kafka_2.13-VERSION`` (``TICDC_SPARK_CACHE`` moves it; Ivy's download
cache is Spark's, ``~/.ivy2.5.2``).  About 43 MB; later starts use the cache.

Each node is a broker and a KRaft controller in one process, with four listeners on
127.0.0.1: PLAINTEXT, SASL_PLAINTEXT (PLAIN and SCRAM-SHA-256, user :data:`SASL_USER`), SSL
(a self-signed certificate for 127.0.0.1 made with the JDK's keytool; clients trust
``ca.pem``/``truststore.p12`` in the cluster's directory) and the controller's.  One node
starts in about 5 s; the suite starts one cluster per session (``tests/conftest.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ticdc_spark.spark.jars import ivy_dir, resolution_lock

KAFKA_VERSION = "4.1.1"
LOG4J_SLF4J = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"  # the brokers' log output
SASL_USER, SASL_PASSWORD = "alice", "alice-secret"
STORE_PASSWORD = "ticdc-test-store"


def cache_dir() -> Path:
    root = os.environ.get("TICDC_SPARK_CACHE") or Path.home() / ".cache" / "ticdc-spark"
    return Path(root)


def kafka_jars(version: str = KAFKA_VERSION) -> list[Path]:
    """The broker's class path, resolved from Maven Central on first use (one process at a
    time: a lock file beside the directory, then the lock on Ivy's cache)."""
    target = cache_dir() / f"kafka_2.13-{version}"
    done = target / ".complete"
    if not done.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{target}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # (then the lock on Ivy's cache, which Spark's resolutions share)
            with resolution_lock():
                if not done.exists():
                    _resolve(version, target)
                    done.touch()
    return sorted(target.glob("*.jar"))


def _resolve(version: str, target: Path) -> None:
    import pyspark

    ivy = next((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    module = target / "ivy.xml"
    group, name, rev = LOG4J_SLF4J.split(":")
    module.write_text(
        '<ivy-module version="2.0"><info organisation="ticdc-spark" module="kafka-broker"/>'
        "<dependencies>"
        f'<dependency org="org.apache.kafka" name="kafka_2.13" rev="{version}" conf="default"/>'
        f'<dependency org="{group}" name="{name}" rev="{rev}" conf="default"/>'
        "</dependencies></ivy-module>"
    )
    ivy_home = ivy_dir()
    print(f"resolving Apache Kafka {version} from Maven Central into {target}", file=sys.stderr)
    result = subprocess.run(
        [
            *(java(), "-jar", str(ivy), "-ivy", str(module), "-confs", "default"),
            *("-cache", f"{ivy_home}/cache"),
            *("-retrieve", f"{target}/[organisation]-[artifact]-[revision](-[classifier]).[ext]"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cannot resolve Apache Kafka {version}:\n{result.stdout[-3000:]}")
    module.unlink()


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Node:
    """One broker-and-controller process."""

    node_id: int
    root: Path
    ports: dict[str, int]
    process: subprocess.Popen[bytes] | None = None

    @property
    def config(self) -> Path:
        return self.root / "server.properties"


@dataclass
class KafkaCluster:
    """``nodes`` KRaft nodes on 127.0.0.1, started at once; :meth:`stop` removes them."""

    nodes_count: int = 1
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ticdc-kafka-")))
    heap: str = "512m"
    nodes: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.classpath = os.pathsep.join(str(p) for p in kafka_jars())
        self.cluster_id = _cluster_id()
        self._make_certificate()
        for number in range(1, self.nodes_count + 1):
            names = ("plain", "sasl", "ssl", "controller")
            ports = {name: free_port() for name in names}
            self.nodes.append(Node(number, self.root / f"node-{number}", ports))
        for node in self.nodes:
            self._configure(node)
        for node in self.nodes:
            self.start_node(node.node_id)
        atexit.register(self.stop)
        self.wait_ready()

    # -- addresses -------------------------------------------------------------------------

    def _addresses(self, listener: str) -> str:
        return ",".join(f"127.0.0.1:{n.ports[listener]}" for n in self.nodes)

    @property
    def bootstrap(self) -> str:
        """PLAINTEXT listeners."""
        return self._addresses("plain")

    @property
    def sasl_bootstrap(self) -> str:
        return self._addresses("sasl")

    @property
    def ssl_bootstrap(self) -> str:
        return self._addresses("ssl")

    @property
    def ca_pem(self) -> Path:
        return self.root / "ca.pem"

    @property
    def truststore(self) -> Path:
        return self.root / "truststore.p12"

    # -- set-up ----------------------------------------------------------------------------

    def _make_certificate(self) -> None:
        """A self-signed certificate for 127.0.0.1 (what both Java's and librdkafka's
        hostname checks compare), its key store for the brokers, and the certificate as PEM
        and as a trust store for clients."""
        keystore = self.root / "keystore.p12"
        keytool = str(Path(java()).with_name("keytool"))
        common = ["-storepass", STORE_PASSWORD, "-storetype", "PKCS12"]
        steps = [
            [
                *("-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048"),
                *("-validity", "30", "-dname", "CN=127.0.0.1"),
                *("-ext", "SAN=ip:127.0.0.1,dns:localhost"),
                *("-keystore", str(keystore), "-keypass", STORE_PASSWORD),
            ],
            [
                *("-exportcert", "-rfc", "-alias", "broker", "-keystore", str(keystore)),
                *("-file", str(self.ca_pem)),
            ],
            [
                *("-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca_pem)),
                *("-keystore", str(self.truststore)),
            ],
        ]
        for step in steps:
            subprocess.run([keytool, *step, *common], check=True, capture_output=True)

    def _configure(self, node: Node) -> None:
        node.root.mkdir(parents=True)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.ports['controller']}" for n in self.nodes)
        replicas = min(3, self.nodes_count)
        p = node.ports
        settings = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": f"PLAINTEXT://127.0.0.1:{p['plain']},SASL_PLAINTEXT://127.0.0.1:"
            f"{p['sasl']},SSL://127.0.0.1:{p['ssl']},CONTROLLER://127.0.0.1:{p['controller']}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p['plain']},SASL_PLAINTEXT://"
            f"127.0.0.1:{p['sasl']},SSL://127.0.0.1:{p['ssl']}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "SSL:SSL,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.root / "data"),
            "num.partitions": 1,
            "default.replication.factor": replicas,
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(2, replicas),
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min(2, replicas),
            "group.initial.rebalance.delay.ms": 0,
            # no retention by time unless a topic sets it (tests write records of 1970), and
            # then checked every second (the tests of records deleted under a query)
            "log.retention.ms": -1,
            "log.retention.check.interval.ms": 1000,
            "log.initial.task.delay.ms": 0,
            "log.segment.delete.delay.ms": 0,
            "log.cleaner.backoff.ms": 500,  # (compacted topics compacted within seconds)
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{SASL_USER}="{SASL_PASSWORD}";'
            ),
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "ssl.keystore.location": str(self.root / "keystore.p12"),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": STORE_PASSWORD,
            "ssl.key.password": STORE_PASSWORD,
        }
        node.config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (node.root / "log4j2.properties").write_text(
            "appender.out.type=Console\nappender.out.name=OUT\n"
            "appender.out.layout.type=PatternLayout\n"
            "appender.out.layout.pattern=[%d] %p %m (%c)%n\n"
            "rootLogger.level=WARN\nrootLogger.appenderRef.out.ref=OUT\n"
        )
        scram = f"SCRAM-SHA-256=[name={SASL_USER},password={SASL_PASSWORD}]"
        self._java(
            node, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
            "-c", str(node.config), "--add-scram", scram,
        )  # fmt: skip

    def _java(self, node: Node, main: str, *args: str) -> None:
        result = subprocess.run(
            [java(), "-cp", self.classpath, main, *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{main} {args[0]} failed on node {node.node_id}: {result.stdout}")

    # -- running ---------------------------------------------------------------------------

    def start_node(self, node_id: int) -> None:
        node = self.nodes[node_id - 1]
        log = open(node.root / "broker.log", "ab")  # noqa: SIM115 (the process keeps it)
        node.process = subprocess.Popen(
            [
                *(java(), f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC"),
                f"-Dlog4j2.configurationFile={node.root / 'log4j2.properties'}",
                *("-cp", self.classpath, "kafka.Kafka", str(node.config)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def kill_node(self, node_id: int) -> None:
        """kill -9: no controlled shutdown, as a crashed broker."""
        node = self.nodes[node_id - 1]
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(30)
        node.process = None

    def wait_ready(self, timeout: float = 90) -> None:
        """Until every running node is a broker the cluster lists."""
        from confluent_kafka.admin import AdminClient

        running = {n.node_id for n in self.nodes if n.process is not None}
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        while True:
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    tail = (node.root / "broker.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"Kafka node {node.node_id} exited:\n{tail}")
            with contextlib.suppress(Exception):
                if {b.id for b in admin.list_topics(timeout=2).brokers.values()} >= running:
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Kafka did not start within {timeout} s (logs: {self.root})")
            time.sleep(0.3)

    def stop(self) -> None:
        for node in self.nodes:
            self.kill_node(node.node_id)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- client settings -------------------------------------------------------------------

    def sasl_client(self, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
        return {
            "bootstrap.servers": self.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": SASL_USER,
            "sasl.password": SASL_PASSWORD,
        }

    def ssl_client(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.ssl_bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca_pem),
        }


def _cluster_id() -> str:
    """A cluster id as Kafka's StorageTool random-uuid makes one (URL-safe base64, 22)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1)
    args = parser.parse_args()
    cluster = KafkaCluster(args.nodes)
    print(f"Apache Kafka {KAFKA_VERSION}, {args.nodes} node(s), files in {cluster.root}")
    print(f"  PLAINTEXT       {cluster.bootstrap}")
    print(f"  SASL_PLAINTEXT  {cluster.sasl_bootstrap}  (PLAIN, SCRAM-SHA-256: {SASL_USER})")
    print(f"  SSL             {cluster.ssl_bootstrap}  (CA {cluster.ca_pem})")
    print("Ctrl-C stops it", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
