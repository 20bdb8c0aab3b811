"""``blobstate.repository.translate.translate``: the SDKs' own exceptions (botocore's, Python's ``OSError``s,
anything whose text carries a service's code) become one typed line naming the URL, without its credentials, and
the fix; the whole chain (``__cause__``, ``__context__``) is looked at, a cycle included; anything else is left
alone (None)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from blobstate.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    EndpointUnreachableError,
    StorageError,
    StorageLocationError,
    WrongRegionError,
)
from blobstate.repository.translate import bucket_of, translate

S3 = "s3://AKIAIOSFODNN7EXAMPLE:hunter22@my-bucket/repo"


def client_error(code: str, op: str = "ListObjectsV2") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"{code} happened"}}, op)


def wrapped(exc: BaseException) -> StorageError:
    """As ``RetryingBlobStore`` hands it over: a ``StorageError`` caused by the SDK's exception."""
    try:
        raise StorageError("listing of job/ failed") from exc
    except StorageError as outer:
        return outer


@pytest.mark.parametrize("url, bucket", [("s3://b/p/q", "b"), ("gs://b", "b"), ("az://container/x?sas=1", "container"),
                                         ("file:///data", ""), ("/data/repo", ""), ("abfs://c@acct/x", "c"),
                                         ("s3://KEY:hunter22@b/r", "b"), ("gs://token@b", "b"), ("s3://b/p/u@x", "b"),
                                         ("az://KEY:hunter22@container/x", "container"),
                                         ("s3://KEY:hunt/er22@b/r", "b")])
def test_the_bucket_of_a_url_never_holds_its_user_info(url, bucket):
    assert bucket_of(url) == bucket


@pytest.mark.parametrize("exc", [client_error("NoSuchBucket"), wrapped(client_error("NoSuchBucket")),
                                 FileNotFoundError("The specified bucket does not exist")],
                         ids=["botocore", "wrapped", "text"])
def test_a_missing_bucket_is_one_line_naming_it(exc):
    error = translate(exc, "s3://my-bucket/repo")
    assert isinstance(error, BucketNotFoundError) and error.exit_code == 6
    assert str(error) == ("the bucket 'my-bucket' of s3://my-bucket/repo does not exist: check the bucket name in "
                          "--repo, or create the bucket first (blobstate never creates one)")


@pytest.mark.parametrize("url", [S3, "s3://user:hunter22@my-bucket/repo", "az://user:hunter22@my-bucket/repo",
                                 "s3://user:hunter22/AKIAIOSFODNN7EXAMPLE@my-bucket/repo"])
def test_a_missing_bucket_never_shows_the_urls_credentials(url):
    error = translate(client_error("NoSuchBucket"), url)
    assert isinstance(error, BucketNotFoundError) and "'my-bucket' of " in str(error)
    assert "hunter22" not in str(error) and "AKIAIOSFODNN7EXAMPLE" not in str(error) and "user" not in str(error)


def test_an_azure_container_is_called_a_container():
    error = translate(Exception("ErrorCode:ContainerNotFound"), "az://box/repo")
    assert isinstance(error, BucketNotFoundError) and "the container 'box' of az://box/repo" in str(error)


@pytest.mark.parametrize("exc, url, where", [
    (client_error("AccessDenied"), S3, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
    (client_error("InvalidAccessKeyId"), S3, "AWS_ACCESS_KEY_ID"),
    (wrapped(NoCredentialsError()), S3, "AWS_ACCESS_KEY_ID"),
    (Exception("403 Forbidden: caller lacks storage.objects.list"), "gs://b/r", "GOOGLE_APPLICATION_CREDENTIALS"),
    (Exception("AuthenticationFailed"), "abfs://c/r", "AZURE_STORAGE_CONNECTION_STRING"),
    (Exception("401 Unauthorized"), "myfs://b/r", "the storage options (--storage-option"),
])
def test_refused_credentials_name_where_the_credentials_come_from(exc, url, where):
    error = translate(exc, url)
    assert isinstance(error, AccessDeniedError) and where in str(error)
    assert "hunter22" not in str(error) and "AKIAIOSFODNN7EXAMPLE" not in str(error)


def test_a_local_directory_without_permission_names_the_directory_and_the_reason():
    error = translate(PermissionError(13, "Permission denied", "/data/repo/job"), "file:///data/repo")
    assert isinstance(error, AccessDeniedError)
    assert str(error).startswith("access denied to file:///data/repo ([Errno 13] Permission denied: '/data/repo/job'"
                                 "): check the permissions of the directory")


@pytest.mark.parametrize("exc", [client_error("PermanentRedirect"), client_error("AuthorizationHeaderMalformed"),
                                 Exception("301 Moved Permanently"),
                                 Exception("The bucket must be addressed using the specified endpoint")])
def test_the_wrong_region_says_how_to_set_it(exc):
    error = translate(exc, S3)
    assert isinstance(error, WrongRegionError) and "AWS_DEFAULT_REGION" in str(error)


@pytest.mark.parametrize("exc, endpoint", [
    (EndpointConnectionError(endpoint_url="http://127.0.0.1:9/my-bucket"), "http://127.0.0.1:9"),
    (wrapped(ConnectionRefusedError(111, "Connection refused")), ""),
    (Exception("ClientConnectorError: Cannot connect to host storage.local:9000 ssl:default"), "storage.local:9000"),
    (TimeoutError("timed out"), ""),
])
def test_an_unreachable_endpoint_names_it_when_known(exc, endpoint):
    error = translate(exc, S3)
    assert isinstance(error, EndpointUnreachableError)
    assert str(error).startswith(f"cannot reach the storage endpoint{' ' + endpoint if endpoint else ''} of "
                                 "s3://***@my-bucket/repo")


def test_a_location_error_passes_through_and_anything_else_is_left_alone():
    already = BucketNotFoundError("said once")
    assert translate(already, S3) is already and isinstance(already, StorageLocationError)
    assert translate(ValueError("a bug of ours"), S3) is None
    assert translate(client_error("InternalError"), S3) is None
    assert translate(FileNotFoundError("job/0/s/blobs/x"), S3) is None


def test_an_error_raised_while_handling_the_sdks_is_read_through_its_context():
    try:
        try:
            raise client_error("NoSuchBucket")
        except ClientError:
            raise StorageError("listing failed")  # noqa: B904 - as code without ``from`` does
    except StorageError as exc:
        assert exc.__cause__ is None and isinstance(translate(exc, S3), BucketNotFoundError)


def test_a_cycle_in_the_chain_ends():
    a, b = RuntimeError("outer"), RuntimeError("NoSuchBucket inside")
    a.__cause__, b.__context__ = b, a
    assert isinstance(translate(a, S3), BucketNotFoundError)


def chain(depth: int, marker_at: int) -> BaseException:
    """``depth`` exceptions each caused by the next; the one at ``marker_at`` carries a missing bucket's code."""
    errors = [RuntimeError("NoSuchBucket" if i == marker_at else f"level {i}") for i in range(depth)]
    for outer, inner in zip(errors, errors[1:], strict=False):
        outer.__cause__ = inner
    return errors[0]


def test_the_chain_is_read_eight_deep():
    assert isinstance(translate(chain(12, 7), S3), BucketNotFoundError)
    assert translate(chain(12, 8), S3) is None
