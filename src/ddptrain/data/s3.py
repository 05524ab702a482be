"""`s3://bucket/key` objects for the shard downloads of data/remote.py, through boto3: the client every S3 user
already configures (credentials from the standard environment, `~/.aws` profiles, instance roles; an S3-compatible
store — MinIO, Ceph, SeaweedFS — through `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3`), with no async layer between
a download and its deadline. boto3's own retries are off: data/remote.py retries with back-off within
`--fetch-timeout` as it does for HTTP, and a final answer (no such key, access refused, no credentials) is one
error naming the URL and what to do.
"""

from __future__ import annotations

import os
import threading
from typing import Dict, List, Tuple

from ..errors import DataError

MISSING = ("NoSuchKey", "NoSuchBucket", "404", "NotFound")
REFUSED = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "AllAccessDisabled", "InvalidToken")
_CLIENTS: Dict[Tuple, object] = {}  # by process, timeout and AWS_* environment
_LOCK = threading.Lock()


class Refusal(DataError):
    """A final answer from the store: data/remote.py does not retry it."""


def split_url(url: str) -> Tuple[str, str]:
    """`s3://bucket/some/key` -> ("bucket", "some/key")."""
    bucket, _, key = url[len("s3://") :].partition("/")
    if not bucket:
        raise DataError(f"{url}: an S3 URL is s3://BUCKET/KEY")
    return bucket, key


def client(timeout_s: float):
    """A boto3 S3 client whose reads wait at most `timeout_s` (one per process and timeout: clients do not survive
    a fork)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise DataError("reading s3:// data needs boto3: pip install 'ddptrain[s3]'") from None
    key = (
        os.getpid(),
        round(timeout_s, 1),
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))),
    )
    with _LOCK:
        found = _CLIENTS.get(key)
        if found is None:
            config = Config(
                connect_timeout=min(10.0, timeout_s),
                read_timeout=timeout_s,
                retries={"max_attempts": 1, "mode": "standard"},
            )
            found = _CLIENTS[key] = boto3.session.Session().client("s3", config=config)
    return found


class Body:
    """An object's body as data/remote.py reads an HTTP response: `headers`, `status`, `read1`."""

    def __init__(self, answer: Dict):
        self.stream = answer["Body"]
        self.status = 200
        self.headers = {
            "Content-Type": answer.get("ContentType") or "",
            "Content-Length": str(answer.get("ContentLength", "")),
        }

    def read1(self, size: int) -> bytes:
        return self.stream.read(size)

    def __enter__(self) -> Body:
        return self

    def __exit__(self, *exc) -> None:
        self.stream.close()


def open_object(url: str, timeout_s: float, what: str) -> Body:
    """GET an object. A missing key or bucket, refused access and missing credentials are `Refusal`s naming the
    URL; a store that cannot be reached or answers 5xx is a ConnectionError (retried)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    bucket, key = split_url(url)
    try:
        return Body(client(timeout_s).get_object(Bucket=bucket, Key=key))
    except NoCredentialsError:
        raise Refusal(
            f"{what} {url}: no AWS credentials were found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
            "AWS_PROFILE), and AWS_ENDPOINT_URL for an S3-compatible store"
        ) from None
    except ClientError as error:
        raise _answer(url, what, error) from None
    except BotoCoreError as error:
        raise ConnectionError(f"{type(error).__name__}: {error}") from None


def _answer(url: str, what: str, error) -> Exception:
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    if code in MISSING or status == 404:
        return Refusal(f"{what} {url} is not in the store ({code or status}); check the --data URL")
    if code in REFUSED or status in (401, 403):
        return Refusal(
            f"{what} {url}: the store refuses access ({code or status}); check the credentials (AWS_ACCESS_KEY_ID, "
            "AWS_PROFILE) and the endpoint (AWS_ENDPOINT_URL)"
        )
    return ConnectionError(f"S3 {code or status}")


def list_keys(prefix_url: str, suffix: str, timeout_s: float) -> List[str]:
    """The `s3://` URLs of the objects under a prefix whose names end with `suffix`, sorted."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    bucket, prefix = split_url(prefix_url)
    found: List[str] = []
    try:
        pages = client(timeout_s).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            found += [f"s3://{bucket}/{o['Key']}" for o in page.get("Contents", []) if o["Key"].endswith(suffix)]
    except NoCredentialsError:
        raise Refusal(f"{prefix_url}: no AWS credentials were found (AWS_ACCESS_KEY_ID, AWS_PROFILE)") from None
    except ClientError as error:
        raise _answer(prefix_url, "the prefix", error) from None
    except BotoCoreError as error:
        raise DataError(f"{prefix_url}: the store cannot be reached ({error}); check AWS_ENDPOINT_URL") from None
    return sorted(found)
