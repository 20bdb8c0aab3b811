"""``blobstate.config.options``: ``KEY=VALUE`` options typed and nested, layers merged with the documented
precedence (environment < URL query < explicit), local URLs never split at a ``?``, and ``redact`` taking every
credential out of what reaches a message, a log line or a journal: URL user info, secret-looking keys and pairs,
authorization headers, AWS key ids, the environment's credentials and registered key material."""

from __future__ import annotations

import base64
import json

import pytest

from blobstate.config import options as o
from blobstate.config.options import REDACTED, coerce, display_url, merge, parse_options, redact, resolve
from blobstate.errors import ConfigurationError


@pytest.mark.parametrize("text, value", [
    ("true", True), (" Yes ", True), ("ON", True), ("false", False), ("no", False), ("off", False), ("none", None),
    ("NULL", None), ("42", 42), ("-7", -7), ("+3", 3), ("1.5", 1.5), (".5", 0.5), ("1e3", 1000.0), ("-2.5E-1", -0.25),
    ('{"a": [1, 2]}', {"a": [1, 2]}), ("[1, true]", [1, True]), ('"123"', "123"), ("{not json", "{not json"),
    ("eu-west-1", "eu-west-1"), ("", ""), ("0x10", "0x10"), ("1.2.3", "1.2.3"), (" spaced ", " spaced "),
])
def test_a_value_is_typed_as_the_docstring_says(text, value):
    result = coerce(text)
    assert result == value and type(result) is type(value)


def test_dotted_keys_nest_and_values_are_typed():
    assert parse_options(["anon=false", "client_kwargs.region_name=eu-west-1", "client_kwargs.verify=true",
                          "config_kwargs.s3.addressing_style=path", " key =a=b"]) == {
        "anon": False, "client_kwargs": {"region_name": "eu-west-1", "verify": True},
        "config_kwargs": {"s3": {"addressing_style": "path"}}, "key": "a=b"}


@pytest.mark.parametrize("items, why", [
    (["secret-value-without-equals"], "without '='"), (["=value"], "an empty name"),
    (["a..b=1"], "invalid storage option name 'a..b'"),
    ([".a=1"], "invalid"), (["a.=1"], "invalid"), (["a=1", "a.b=2"], "'a.b' conflicts with a plain value of 'a'"),
])
def test_a_malformed_option_is_refused_without_echoing_its_value(items, why):
    with pytest.raises(ConfigurationError, match=why) as info:
        parse_options(items)
    assert "secret-value" not in str(info.value) and info.value.exit_code == 2


def test_later_layers_win_and_nested_dicts_merge_key_by_key():
    base = {"anon": True, "client_kwargs": {"region_name": "us-east-1", "verify": False}, "keep": 1}
    merged = merge(base, None, {"anon": False, "client_kwargs": {"region_name": "eu-west-1"}}, {"keep": {"x": 1}})
    assert merged == {"anon": False, "client_kwargs": {"region_name": "eu-west-1", "verify": False}, "keep": {"x": 1}}
    assert base["client_kwargs"] == {"region_name": "us-east-1", "verify": False}  # layers are not changed
    assert merge() == {}


@pytest.mark.parametrize("url, clean, options", [
    ("s3://b/r?endpoint_url=http://127.0.0.1:9000&anon=false&client_kwargs.region_name=x",
     "s3://b/r", {"endpoint_url": "http://127.0.0.1:9000", "anon": False, "client_kwargs": {"region_name": "x"}}),
    ("s3://b/r?flag=", "s3://b/r", {"flag": ""}),
    ("s3://b/r#frag", "s3://b/r#frag", {}),
    ("file:///data/what?.sst", "file:///data/what?.sst", {}),
    ("/data/what?.sst", "/data/what?.sst", {}),
    ("memory://x?y=1", "memory://x?y=1", {}),
    ("LOCAL:///x?y=1", "LOCAL:///x?y=1", {}),
])
def test_a_remote_urls_query_is_options_and_a_local_url_is_never_split(url, clean, options):
    assert o.split_url(url) == (clean, options)


def test_the_environment_the_query_and_explicit_options_in_that_order():
    environ = {o.ENV_VAR: json.dumps({"anon": True, "endpoint_url": "http://env", "client_kwargs": {"a": 1}})}
    url, opts = resolve("s3://b/r?endpoint_url=http://query&client_kwargs.b=2", ["anon=false"], environ=environ)
    assert url == "s3://b/r"
    assert opts == {"anon": False, "endpoint_url": "http://query", "client_kwargs": {"a": 1, "b": 2}}
    assert resolve("s3://b/r", {"anon": None}, environ={})[1] == {"anon": None}
    assert resolve("s3://b/r", None, environ={})[1] == {}


@pytest.mark.parametrize("text, why", [("{not json", "is not valid JSON"), ("[1]", "must be a JSON object"),
                                       ('"s3cr3t"', "must be a JSON object")])
def test_a_malformed_environment_variable_is_refused_without_its_content(text, why):
    with pytest.raises(ConfigurationError, match=f"BLOBSTATE_STORAGE_OPTIONS {why}") as info:
        o.from_env({o.ENV_VAR: text})
    assert "s3cr3t" not in str(info.value)
    assert o.from_env({o.ENV_VAR: "  "}) == {} and o.from_env({}) == {}


@pytest.mark.parametrize("key", ["secret", "aws_secret_access_key", "password", "passwd", "token", "session_token",
                                 "credential", "sas_token", "sig", "signature", "account_key", "AccountKey",
                                 "connection_string", "private_key_id", "key", "api_key", "apikey", "sse_customer_key"])
def test_secret_looking_keys(key):
    assert o.is_secret_key(key)


@pytest.mark.parametrize("key", ["anon", "endpoint_url", "region_name", "bucket", "keyring_path", "design",
                                 "account_name"])
def test_keys_that_hold_no_secret(key):
    assert not o.is_secret_key(key)


def test_a_dict_keeps_its_shape_with_secret_values_hidden():
    value = {"key": "AKIAEXAMPLE", "secret": "s3cr3t", "anon": False, "token": None, "password": "",
             "client_kwargs": {"aws_session_token": "tok", "region_name": "eu"}, "list": ["a", {"sig": "x"}]}
    assert redact(value) == {"key": REDACTED, "secret": REDACTED, "anon": False, "token": None, "password": "",
                             "client_kwargs": {"aws_session_token": REDACTED, "region_name": "eu"},
                             "list": ["a", {"sig": REDACTED}]}
    assert redact(("a", 1)) == ("a", 1) and redact(5) == 5 and redact(None) is None


@pytest.mark.parametrize("text, hidden, kept", [
    ("s3://AKIAIOSFODNN7EXAMPLE:wJalr@bucket/repo", ["wJalr", "AKIAIOSFODNN7EXAMPLE"], ["s3://***@bucket/repo"]),
    ("s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY@bucket/repo",
     ["wJalrXUtnFEMI", "K7MDENG", "bPxRfiCYEXAMPLEKEY"], ["s3://***@bucket/repo"]),
    ("s3://user:a/b@bucket/repo failed, see http://127.0.0.1:9000/bucket/key@v2 and https://h:443/x@y",
     ["user", "a/b"], ["s3://***@bucket/repo", "http://127.0.0.1:9000/bucket/key@v2", "https://h:443/x@y"]),
    ("postgresql://user:pa%40ss@db:5432/x", ["pa%40ss", "user:"], ["@db:5432/x"]),
    ("DefaultEndpointsProtocol=https;AccountName=acc;AccountKey=abc+/=;EndpointSuffix=x", ["abc+/="],
     ["AccountName=acc", "AccountKey=***"]),
    ("https://acc.blob.core.windows.net/c?sv=2020&sig=AbCd%2B&se=2030", ["AbCd%2B"], ["sig=***", "sv=2020"]),
    ("{'X-Amz-Security-Token': b'FQoGZXIvYXdz', 'Host': 'h'}", ["FQoGZXIvYXdz"], ["'Host': 'h'"]),
    ("'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIA/2024, Signature=deadbeef'", ["deadbeef", "Credential="],
     ["'Authorization': b'***'"]),
    ("Authorization: Bearer eyJhbGciOi rest", ["eyJhbGciOi"], ["rest"]),
    ("the key id ASIAY34FZKBOKMUTVV7A leaked", ["ASIAY34FZKBOKMUTVV7A"], ["leaked"]),
    ('token: "abc def"', ["abc"], ["token"]),
    ("client_secret=xyz&scope=all", ["xyz"], ["scope=all"]),
])
def test_text_loses_every_credential_and_keeps_the_rest(text, hidden, kept):
    out = redact(text)
    assert all(h not in out for h in hidden), out
    assert all(k in out for k in kept), out


def test_literal_secrets_are_hidden_longest_first_and_short_ones_ignored():
    out = redact("a hunter22 and hunter2 and abc", secrets=["hunter2", "hunter22", "abc", 12345678])
    assert out == f"a {REDACTED} and {REDACTED} and abc"
    assert redact("id 12345678", secrets=[12345678]) == f"id {REDACTED}"


def test_secret_values_are_every_string_under_a_secret_key():
    assert sorted(o.secret_values({"key": "k1", "anon": "no", "nested": {"password": "p1", "token": None},
                                   "secret": 5})) == ["k1", "p1"]


@pytest.mark.parametrize("url, userinfo, rest", [
    ("s3://KEY:SEC/RET@b/r", "KEY:SEC/RET", "s3://b/r"), ("abfs://c@acct/x", "c", "abfs://acct/x"),
    ("s3://b/p/u@x", "", "s3://b/p/u@x"), ("http://h:9000/b/k@v", "", "http://h:9000/b/k@v"), ("/data", "", "/data")])
def test_split_userinfo_takes_what_redact_hides(url, userinfo, rest):
    assert o.split_userinfo(url) == (userinfo, rest)
    assert redact(url) == (rest.replace("://", f"://{REDACTED}@", 1) if userinfo else url)


def test_a_display_url_has_no_query_and_no_credentials():
    assert display_url("s3://u:p@bucket/repo?endpoint_url=http://x&secret=y") == "s3://***@bucket/repo"
    assert display_url("/data/repo") == "/data/repo"


def test_registered_key_material_is_hidden_in_every_text_form():
    material = bytes(range(200, 232))
    o.register_secret(material, "a-text-passphrase", "short")
    secrets = o.environment_secrets({})
    forms = [material.hex(), base64.b64encode(material).decode().rstrip("="),
             base64.urlsafe_b64encode(material).decode().rstrip("=")]
    assert all(f in secrets for f in forms) and "a-text-passphrase" in secrets and "short" not in secrets
    text = " ".join(forms) + " a-text-passphrase"
    assert redact(text, secrets=secrets) == " ".join([REDACTED] * 4)
    o.register_secret(b"ascii-key-material-123")
    assert "ascii-key-material-123" in o.environment_secrets({})


def test_the_environments_credentials_are_secrets_and_a_malformed_variable_adds_none():
    environ = {"AWS_SECRET_ACCESS_KEY": "wJalrXUtn", "AZURE_STORAGE_KEY": "", "HOME": "/root",
               o.ENV_VAR: json.dumps({"secret": "from-options", "anon": "visible"})}
    secrets = o.environment_secrets(environ)
    assert "wJalrXUtn" in secrets and "from-options" in secrets and "visible" not in secrets and "/root" not in secrets
    assert "wJalrXUtn" in o.environment_secrets({"AWS_SECRET_ACCESS_KEY": "wJalrXUtn", o.ENV_VAR: "{broken"})
