"""Storage faults translated once into one-line messages that name the URL and the fix.

Every blob store call goes through ``RetryingBlobStore`` (``blobstate.repository.retry``), which hands a permanent
fault (or the last transient one) to ``translate``; the CLI's last line of defence (``blobstate.cli.exits``) and
``blobstate doctor`` use the same function, so a misspelled bucket reads the same from every command. The SDKs'
own texts (botocore, obstore's Rust client with its debug dump, the Azure and GCS clients) are recognised by the
service's error codes (``NoSuchBucket``, ``InvalidAccessKeyId``, ``PermanentRedirect``, ...) and exception types,
never shown whole: at most the code is kept, after redaction.
"""

from __future__ import annotations

import re

from blobstate.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    EndpointUnreachableError,
    StorageLocationError,
    WrongRegionError,
)

_MISSING = ("NoSuchBucket", "ContainerNotFound", "The specified bucket does not exist",
            "The specified container does not exist", "NoSuchContainer")
_DENIED = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoCredentialsError",
           "Unable to locate credentials", "AuthorizationFailure", "AuthenticationFailed", "InvalidToken",
           "ExpiredToken", "PermissionDenied", "403 Forbidden", "401 Unauthorized", "lacked the necessary privileges")
_REGION = ("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException",
           "301 Moved Permanently", "must be addressed using the specified endpoint")
_UNREACHABLE = ("EndpointConnectionError", "Could not connect to the endpoint", "error sending request",
                "ConnectTimeout", "Connection refused", "Name or service not known", "ClientConnectorError",
                "Temporary failure in name resolution", "ServiceRequestError", "Cannot connect to host",
                "ReadTimeout", "timed out", "TimeoutError", "ServerDisconnectedError", "Connection reset")
_ENDPOINT = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+")
#: ``host:port`` as aiohttp and the Azure SDK name it ("Cannot connect to host 127.0.0.1:9000")
_HOST_PORT = re.compile(r"\b(?:(?:\d{1,3}\.){3}\d{1,3}|localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{2,5}\b")
_AZURE = ("az", "abfs", "abfss")  # schemes whose bucket is called a container
_CODE = re.compile(r"<Code>(\w+)</Code>|\b(NoSuchBucket|InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|"
                   r"PermanentRedirect|AuthorizationHeaderMalformed|ContainerNotFound|AuthenticationFailed|"
                   r"NoCredentialsError|EndpointConnectionError)\b")


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _code(text: str) -> str:
    match = _CODE.search(text)
    return (match.group(1) or match.group(2)) if match else ""


def _display(url: str) -> str:
    from blobstate.config.options import redact

    return str(redact(url))


def bucket_of(url: str) -> str:
    """``s3://bucket/prefix`` -> ``bucket`` (the first path part after the scheme; '' for a local path), without the
    URL's user info (``s3://KEY:SECRET@bucket`` -> ``bucket``: credentials never reach a message); Azure's
    ``abfs://container@account/...`` -> ``container``."""
    from blobstate.config.options import split_userinfo

    if "://" not in url or url.startswith("file://"):
        return ""
    userinfo, rest = split_userinfo(url)
    if userinfo and rest.split("://", 1)[0].lower() in _AZURE and ":" not in userinfo:
        return userinfo  # adlfs's container@account (a container name never holds ':')
    return rest.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]


def missing_bucket(url: str, detail: str = "") -> BucketNotFoundError:
    """The error for a URL whose bucket (container) does not exist."""
    what = "container" if url.split("://", 1)[0].lower() in _AZURE else "bucket"
    return BucketNotFoundError(  # ``detail`` (the service's code) is left out: every command says the same
        f"the {what} {bucket_of(url)!r} of {_display(url)} does not exist: check the {what} name in --repo, "
        f"or create the {what} first (blobstate never creates one)")


def access_denied(url: str, detail: str = "") -> AccessDeniedError:
    """The error for refused credentials or permissions on ``url``."""
    code = f" ({_display(detail)})" if detail else ""
    if not bucket_of(url):
        return AccessDeniedError(f"access denied to {_display(url)}{code}: check the permissions of the directory "
                                 "(blobstate must read, write, list and delete there)")
    from blobstate.config.options import credential_sources

    where = credential_sources(url.split("://", 1)[0])
    return AccessDeniedError(
        f"access denied to {_display(url)}{code}: check the credentials ({where}) and that they may read, write, "
        "list and delete in this bucket")


def wrong_region(url: str, detail: str = "") -> WrongRegionError:
    """The error for a bucket addressed in the wrong region."""
    code = f" ({_display(detail)})" if detail else ""
    return WrongRegionError(
        f"{_display(url)} is in another region than the client addressed{code}: set AWS_DEFAULT_REGION (or "
        "--storage-option client_kwargs.region_name=...) to the bucket's region")


def unreachable(url: str, detail: str = "", endpoint: str = "") -> EndpointUnreachableError:
    """The error for a storage endpoint (``endpoint``, when known) that does not answer."""
    code = f" ({_display(detail)})" if detail else ""
    where = f" {endpoint}" if endpoint else ""
    return EndpointUnreachableError(
        f"cannot reach the storage endpoint{where} of {_display(url)}{code}: check the endpoint (--storage-option "
        "endpoint_url=... or BLOBSTATE_STORAGE_OPTIONS), the network and that the service runs")


def translate(exc: BaseException, url: str) -> StorageLocationError | None:
    """The one-line ``StorageLocationError`` for a storage fault on ``url``, or None when ``exc`` is none of a
    missing bucket/container, access denied, a wrong region or an unreachable endpoint (it then stays as it is).

    ``exc`` may be a ``StorageError`` wrapping the SDK's exception (``__cause__``): the whole chain is looked at.
    """
    if isinstance(exc, StorageLocationError):
        return exc
    chain = _chain(exc)
    texts = [f"{type(e).__name__}: {e}" for e in chain]
    text = "\n".join(texts)
    code = _code(text)
    if any(marker in text for marker in _MISSING):
        return missing_bucket(url, code or "NoSuchBucket")
    if code in ("PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException") or any(
            marker in text for marker in _REGION[3:]):
        return wrong_region(url, code)
    names = {type(e).__name__ for e in chain}
    if (any(isinstance(e, PermissionError) for e in chain) or any(marker in text for marker in _DENIED)
            or names & {"PermissionDeniedError", "NoCredentialsError", "ClientAuthenticationError"}):
        permission = next((e for e in chain if isinstance(e, PermissionError)), None)
        reason = str(permission).splitlines()[0][:160] if permission is not None and str(permission) else ""
        return access_denied(url, code or next((n for n in sorted(names) if "Credentials" in n), reason))
    if any(marker in text for marker in _UNREACHABLE) or any(
            isinstance(e, ConnectionRefusedError) for e in chain):
        endpoint = _ENDPOINT.search(text) or _HOST_PORT.search(text)
        return unreachable(url, code or "connection failed", _display(endpoint.group()) if endpoint else "")
    return None
