""":mod:`migscope.core._redaction`: what is hidden, what stays readable, and a second pass.

The table is the documented rule (docs/schedule.md, "Redaction"): URL user info, credential
parameters, credential headers and keys, ``Bearer`` tokens, and on a command line every
``--header`` value and credential option.
"""

from __future__ import annotations

import pytest

from migscope.core._redaction import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_data,
    redact_text,
)

TEXT = [
    # the URL of issue 20: user info (user and password) and the api_key parameter
    (
        "http://alice:S3cretPW@prom:9090/?api_key=K3yV4lue",
        "http://***@prom:9090/?api_key=***",
    ),
    ("https://ghp_T0ken@github.com/org/repo.git", "https://***@github.com/org/repo.git"),
    ("http://a:p@ss@host/x", "http://***@host/x"),  # a raw "@" in the password
    (
        "postgres://u:pw@db:5432/x and redis://:pw@cache",
        "postgres://***@db:5432/x and redis://***@cache",
    ),
    (
        "http://prom:9090/api/v1/query?query=up&step=60",
        "http://prom:9090/api/v1/query?query=up&step=60",
    ),
    # credential parameters, case-insensitive, in the query, the fragment, anywhere
    ("http://h/?APIKEY=1&apikey=2&key=3&page=4", "http://h/?APIKEY=***&apikey=***&key=***&page=4"),
    (
        "http://h/?access_token=a&token=b&id_token=c",
        "http://h/?access_token=***&token=***&id_token=***",
    ),
    (
        "http://h/?password=a&secret=b&client_secret=c",
        "http://h/?password=***&secret=***&client_secret=***",
    ),
    ("http://h/cb#access_token=a&state=s", "http://h/cb#access_token=***&state=s"),
    (
        "https://acct.blob/x?sv=2021&sig=abc%2Bdef&se=2030",
        "https://acct.blob/x?sv=2021&sig=***&se=2030",
    ),
    (
        "https://b.s3/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F2026&X-Amz-Date=20260101"
        "&X-Amz-Security-Token=FQo&X-Amz-Signature=9f1",
        "https://b.s3/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=***&X-Amz-Date=20260101"
        "&X-Amz-Security-Token=***&X-Amz-Signature=***",
    ),
    (
        "https://storage/x?X-Goog-Signature=ab&X-Goog-Credential=cd",
        "https://storage/x?X-Goog-Signature=***&X-Goog-Credential=***",
    ),
    ("api%5Fkey=zz", "api%5Fkey=***"),
    ("export API_TOKEN=abc; run", "export API_TOKEN=***; run"),
    ("--token=abc --window=7d", "--token=*** --window=7d"),
    ('token="a b c" next', 'token="***" next'),
    ("Authorization=Bearer abc rest", "Authorization=*** rest"),
    # credential headers and keys written Name: value (to the end of the line or the quote)
    ("Authorization: Bearer hdrT0ken9", "Authorization: ***"),
    ("proxy-authorization: Basic YWxhZGRpbjpvcGVu", "proxy-authorization: ***"),
    ("X-Api-Key: k1\nX-Scope-OrgID: team-a", "X-Api-Key: ***\nX-Scope-OrgID: team-a"),
    ("Cookie: session=abc", "Cookie: ***"),
    ('{"password": "hunter2", "user": "bob"}', '{"password": "***", "user": "bob"}'),
    ("{'accessToken':'x1'}", "{'accessToken':'***'}"),
    ("client_secret: s3 # yaml", "client_secret: ***"),
    ("--header 'Authorization: Bearer x' -o json", "--header 'Authorization: ***' -o json"),
    ("retrying with Bearer eyJhbGciOi.x.y now", "retrying with Bearer *** now"),
    # names that are not credentials stay, and so does their value
    ("KeyError: 'weekly'", "KeyError: 'weekly'"),
    ("token_expiry: 2026-12-01", "token_expiry: 2026-12-01"),
    (
        "--bearer-token-file=/run/token --basic-auth-user=alice",
        "--bearer-token-file=/run/token --basic-auth-user=alice",
    ),
    ("monkey: 3, keys=4, passing=yes", "monkey: 3, keys=4, passing=yes"),
    (
        "migscope: error: cannot reach Prometheus at http://prom:9090/api/v1/x: timed out",
        "migscope: error: cannot reach Prometheus at http://prom:9090/api/v1/x: timed out",
    ),
    ("", ""),
]


@pytest.mark.parametrize(("text", "expected"), TEXT)
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # a second pass changes nothing


@pytest.mark.parametrize(
    "name",
    [
        "api_key", "APIKEY", "api-key", "X-Api-Key", "apiKey", "key", "access_token",
        "accesstoken", "X-Amz-Security-Token", "X-Amz-Credential", "X-Amz-Signature", "sig",
        "password", "passwd", "pwd", "client_secret", "Authorization", "Proxy-Authorization",
        "Cookie", "Set-Cookie", "X-Auth", "--token", "--password", "api%5Fkey",
    ],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "--bearer-token-file", "--basic-auth-user", "--basic-auth-password-file",
        "token_expiry", "KeyError", "keys", "monkey", "X-Scope-OrgID", "X-Amz-Date", "page",
        "--header-file", "", "-",
    ],
)  # fmt: skip
def test_names_that_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_argv_of_issue_20() -> None:
    argv = [
        "/usr/bin/python3", "-c", "from migscope.cli.main import main; main()", "analyze",
        "--prometheus", "http://alice:S3cretPW@prom:9090/?api_key=K3yV4lue",
        "--header", "Authorization: Bearer hdrT0ken9", "--header", "X-Scope-OrgID: team-a",
        "--window", "7d", "--out", "/var/lib/migscope/reports/20261207T050000Z",
    ]  # fmt: skip
    assert redact_argv(argv) == [
        "/usr/bin/python3", "-c", "from migscope.cli.main import main; main()", "analyze",
        "--prometheus", "http://***@prom:9090/?api_key=***",
        "--header", "Authorization: ***", "--header", "X-Scope-OrgID: ***",
        "--window", "7d", "--out", "/var/lib/migscope/reports/20261207T050000Z",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["curl", "-H", "Authorization: Bearer x", "u"], ["curl", "-H", "Authorization: ***", "u"]),
        (["--header=Authorization: Bearer x"], ["--header=Authorization: ***"]),
        (["--header", "no colon here"], ["--header", REDACTED]),
        (["--password", "pw", "--api-key=k"], ["--password", REDACTED, "--api-key=***"]),
        (["--client-secret", "s", "x"], ["--client-secret", REDACTED, "x"]),
        (["--token", "--verbose"], ["--token", "--verbose"]),  # a flag: nothing to hide
        (["--token="], ["--token="]),
        (
            ["--bearer-token-file", "/run/t", "--basic-auth-user", "alice", "--window", "7d"],
            ["--bearer-token-file", "/run/t", "--basic-auth-user", "alice", "--window", "7d"],
        ),
        (
            ["sh", "-c", "curl -u x http://u:pw@h/?token=t"],
            ["sh", "-c", "curl -u x http://***@h/?token=***"],
        ),
    ],
)
def test_redact_argv(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected
    assert redact_argv(expected) == expected


def test_redact_data_walks_json_like_values() -> None:
    class Path:
        def __str__(self) -> str:
            return "http://u:pw@h/"

    data = {
        "summary": ["querying http://u:pw@h/?api_key=k", "wasted: 606.9 GPU-hours"],
        "savings": {"gpus_freed": 2, "ok": True, "none": None, "ratio": 0.5},
        "token": "abc",
        "nested": ({"password": "p"}, Path()),
    }
    assert redact_data(data) == {
        "summary": ["querying http://***@h/?api_key=***", "wasted: 606.9 GPU-hours"],
        "savings": {"gpus_freed": 2, "ok": True, "none": None, "ratio": 0.5},
        "token": REDACTED,
        "nested": [{"password": REDACTED}, "http://***@h/"],
    }
