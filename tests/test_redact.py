"""Secrets never reach memory, logs or exports: what is masked, and what must stay readable."""

from __future__ import annotations

import base64
import io
import json
import os
import random
import textwrap
import urllib.parse

import pytest

from acr_cli.domain import Arm, Decision, Feedback
from acr_cli.memory.store import Memory
from acr_cli.redact import MASK, LineRedactor, redact, secret_name

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documentation example
GIT_SHA = "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"
SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def pem_lines(kind: str = "RSA PRIVATE KEY", size: int = 1190) -> list[str]:
    """A private key as a tool prints it (random bytes: no real key is kept in the repository)."""
    body = base64.b64encode(random.Random(kind).randbytes(size)).decode()
    return [f"-----BEGIN {kind}-----", *(body[i:i + 64] for i in range(0, len(body), 64)), f"-----END {kind}-----"]


# ---------------------------------------------------------------- environment variables


@pytest.mark.parametrize("name", ["DB_PASS", "PASSWD", "PGPASSWORD", "GPG_PASSPHRASE", "MYSQL_PWD", "OPENAI_API_KEY",
                                  "APIKEY", "GITHUB_TOKEN", "AWS_SESSION_TOKEN", "NEXTAUTH_SECRET", "GH_AUTH",
                                  "HTTP_AUTHORIZATION", "OAUTH", "SERVICE_CREDENTIALS", "SESSION_COOKIE",
                                  "SLACK_WEBHOOK_URL", "SENTRY_DSN", "db_pass"])
def test_the_value_of_a_secret_named_variable_is_masked(monkeypatch, name):
    monkeypatch.setenv(name, "v4lue-of-the-secret")
    assert secret_name(name)
    out = redact("connecting with v4lue-of-the-secret to db.internal")
    assert "v4lue-of-the-secret" not in out and out == f"connecting with {MASK} to db.internal"


@pytest.mark.parametrize("name", ["PATH", "KEYBOARD_LAYOUT", "XKB_KEYMAP", "GIT_AUTHOR_NAME", "XAUTHORITY",
                                  "SSH_AUTH_SOCK", "PRIVATE_KEY_PATH", "TOKEN_FILE", "GIT_ASKPASS", "COMPASS_HOME",
                                  "BYPASS_PROXY", "PWD", "OLDPWD", "XDG_SESSION_TYPE", "SESSION_MANAGER",
                                  "TOKENIZERS_PARALLELISM", "HOME"])
def test_ordinary_variables_are_not_secret(monkeypatch, name):
    monkeypatch.setenv(name, "/home/alice/Jane Developer")
    assert not secret_name(name)
    assert redact("written by /home/alice/Jane Developer") == "written by /home/alice/Jane Developer"


def test_a_short_secret_value_is_left_alone(monkeypatch):
    # "1" or "admin" is everywhere in ordinary text: masking it would garble every log
    monkeypatch.setenv("DB_PASS", "1")
    monkeypatch.setenv("ADMIN_PASSWORD", "admin")
    assert redact("1 passed in 0.1s; user admin") == "1 passed in 0.1s; user admin"


def test_a_multi_line_secret_value_is_masked_line_by_line(monkeypatch):
    monkeypatch.setenv("DEPLOY_KEY", "first-line-of-it\nsecond-line-of-it")
    lines = LineRedactor()
    assert [lines.line(x) for x in ("first-line-of-it", "ok", "second-line-of-it")] == [MASK, "ok", MASK]


VALUE = "s3cr3t-Value-1234"  # made up
ODD_VALUE = "p@ss w0rd/&?=~>x1"  # made up: characters percent-encoding and base64 treat apart ('+' and '/')


def b64(data: str, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data.encode()).decode()


@pytest.mark.parametrize("value, encoded", [
    (VALUE, b64(VALUE)),
    (VALUE, b64(VALUE).rstrip("=")),
    (VALUE, VALUE.encode().hex()),
    (VALUE, VALUE.encode().hex().upper()),
    (ODD_VALUE, b64(ODD_VALUE)),
    (ODD_VALUE, b64(ODD_VALUE, urlsafe=True)),
    (ODD_VALUE, b64(ODD_VALUE, urlsafe=True).rstrip("=")),
    (ODD_VALUE, urllib.parse.quote(ODD_VALUE, safe="")),
    (ODD_VALUE, urllib.parse.quote(ODD_VALUE)),
    (ODD_VALUE, urllib.parse.quote_plus(ODD_VALUE)),
    (ODD_VALUE, urllib.parse.quote(ODD_VALUE, safe="").lower()),
])
def test_a_secret_variables_value_is_masked_encoded(monkeypatch, value, encoded):
    monkeypatch.setenv("DEPLOY_TOKEN", value)
    assert encoded != value
    assert redact(f"sent {encoded} to the server") == f"sent {MASK} to the server"


@pytest.mark.parametrize("before, after", [("alice:", ""), ("bob:", ""), ("carol:", ""), ('{"pw": "', '"}'),
                                           ("x", "y"), ("xy", "!")])
def test_a_secret_variables_value_is_masked_inside_a_longer_base64_string(monkeypatch, before, after):
    # HTTP Basic's base64("user:" + password), a docker config's "auth", an encoded JSON: the value falls
    # 0, 1 or 2 bytes into a group of three
    monkeypatch.setenv("REGISTRY_PASSWORD", VALUE)
    blob = b64(before + VALUE + after)
    out = redact(json.dumps({"auths": {"registry.example.com": {"auth": blob}}}))
    assert MASK in out and blob not in out
    left, right = json.loads(out)["auths"]["registry.example.com"]["auth"].split(MASK)
    assert len(left) <= len(b64(before)) and len(right) <= 4  # what stays holds a few bits of the value at most


def test_encodings_of_a_short_or_absent_value_are_left_alone(monkeypatch):
    monkeypatch.setenv("DB_PASS", "admin")  # too short to mask, encoded or not
    monkeypatch.setenv("API_TOKEN", VALUE)
    text = f"{b64('admin')} {'admin'.encode().hex()} {b64('hello world')} {GIT_SHA} {urllib.parse.quote('a b/c')}"
    assert redact(text) == text


@pytest.mark.parametrize("k", range(1, len(VALUE)))
def test_a_secret_variables_value_split_over_two_lines_is_masked(monkeypatch, k):
    monkeypatch.setenv("DEPLOY_TOKEN", VALUE)
    assert redact(f"token: {VALUE[:k]}\n    {VALUE[k:]} (expires)") == f"token: {MASK} (expires)"
    assert redact(f"token {VALUE[:k]}\r\n{VALUE[k:]}\n") == f"token {MASK}\n"
    event = json.dumps({"text": f"the token is {VALUE[:k]}\n{VALUE[k:]}."})  # a JSON event: \n escaped
    assert json.loads(redact(event)) == {"text": f"the token is {MASK}."}


@pytest.mark.parametrize("width", [32, 40, 64, 76])
def test_a_long_secret_value_wrapped_over_lines_is_masked(monkeypatch, width):
    value = base64.b64encode(random.Random(width).randbytes(150)).decode()  # a made-up key, 200 characters
    monkeypatch.setenv("SIGNING_KEY", value)
    shown = "\n".join(["signing key:", *textwrap.wrap(value, width), "ok"])
    assert redact(shown) == f"signing key:\n{MASK}\nok"


def test_line_by_line_each_part_of_a_split_value_of_8_characters_or_more_is_masked(monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", VALUE)
    for k in range(8, len(VALUE) - 7):
        lines = LineRedactor()
        assert [lines.line(x) for x in (f"token {VALUE[:k]}", f"  {VALUE[k:]} used", "ok")] == \
            [f"token {MASK}", f"  {MASK} used", "ok"]
    value = base64.b64encode(random.Random(1).randbytes(150)).decode()
    monkeypatch.setenv("SIGNING_KEY", value)
    lines = LineRedactor()
    out = [lines.line(x) for x in ["key: " + value[:10], *textwrap.wrap(value[10:], 40), "ok"]]
    assert out == ["key: " + MASK, *[MASK] * len(textwrap.wrap(value[10:], 40)), "ok"]


def test_pieces_of_a_secret_value_apart_from_each_other_stay_readable(monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", VALUE)
    text = f"{VALUE[:8]} is one thing\nand {VALUE[8:]} another"  # no line break between them
    assert redact(text) == text


def test_the_environment_is_read_again_when_it_changes(monkeypatch):
    assert redact("use late-arriving-secret") == "use late-arriving-secret"
    monkeypatch.setenv("LATE_TOKEN", "late-arriving-secret")
    assert redact("use late-arriving-secret") == f"use {MASK}"


def test_a_secret_written_as_an_assignment_is_masked():
    out = redact("DB_PASS=hunter2hunter2\ndb_pass: 'correcthorse'\nAuthorization: Basic dXNlcjpwYXNzd29yZA==\n"
                 "AUTHORIZATION: Bearer abc.def-ghi.jkl")
    assert "hunter2" not in out and "correcthorse" not in out and "dXNlcjpw" not in out and "abc.def" not in out
    assert out.startswith("DB_PASS=" + MASK) and "Authorization: Basic " + MASK in out
    assert out.endswith("AUTHORIZATION: Bearer " + MASK)


@pytest.mark.parametrize("text, secret", [
    # every attempt log holds the agent's JSON events, where a quote is escaped
    (json.dumps({"type": "tool_use", "content": 'DB_PASSWORD = "s3cretvalue99"'}), "s3cretvalue99"),
    (json.dumps({"text": 'I also set password: "hunter2hunter2"'}), "hunter2hunter2"),
    # a quoted value runs to its closing quote, spaces and all
    ("export PGPASSWORD='my secret pass phrase'", "secret pass phrase"),
    ('MY_TOKEN="tok en-with-space-1234"', "en-with-space"),
    ("PASSWORD='correct horse battery staple'", "horse battery"),
    # a backslash inside the value goes with it (a shell or JSON escape), never ends it
    ("password=abc\\defghij", "defghij"),
    ('password="Zx\\9kLmnopq"', "kLmnopq"),
    ("password=Hunter2xy\\Kq9mZ7pL3vB", "Kq9mZ7pL3vB"),
    (json.dumps({"c": "export DB_PASSWORD='Q7\\Lm2#xYz9pw'"}), "xYz9pw"),
])
def test_an_assignment_quoted_escaped_or_with_spaces_is_masked_whole(text, secret):
    out = redact(text)
    assert secret not in out and MASK in out
    if text.startswith("{"):
        json.loads(out)  # a JSON event stays JSON: the mask sits between the escaped quotes


@pytest.mark.parametrize("text", [
    json.dumps({"content": "SECRET_KEY=\nDATABASE_URL=postgres://db/app"}),  # an empty value, then the next line
    json.dumps({"c": "token:\tabcdef1234"}),
    json.dumps({"c": "password=\u00e9t\u00e9-2024"}),
])
def test_redacting_a_json_event_keeps_it_json(text):
    json.loads(redact(text))  # a backslash of an escape is never taken for an escaped quote


@pytest.mark.parametrize("text", [
    'passwordLabel = "Enter your password here"',  # a message that names the secret word is a label
    "passwordHelp = \"Your password can't be empty\"",
    'tokenizer = "bert base uncased"',
    'token_count = "12,345"',
    "SECRET_KEY=\nDATABASE_URL=postgres://db/app",  # an empty value: the next line is not it
])
def test_labels_and_counts_next_to_a_secret_word_stay_readable(text):
    assert redact(text) == text


def test_a_secret_variables_value_is_masked_where_it_is_escaped(monkeypatch):
    monkeypatch.setenv("DEPLOY_API_KEY", 'Zx9\\kQ2#mW7!"pL4v')
    value = os.environ["DEPLOY_API_KEY"]
    for shown in (repr(f"key {value}"), json.dumps(f"key {value}"), f"key {value}"):  # a log's argv line, an event
        assert "mW7" not in redact(shown), shown


# ---------------------------------------------------------------- shapes


@pytest.mark.parametrize("text", [
    f"aws_access_key_id,aws_secret_access_key\nAKIAIOSFODNN7EXAMPLE,{AWS_SECRET}",  # the console's CSV
    f"the key is {AWS_SECRET}.",
    f"EXPORTED={AWS_SECRET}",
    f'{{"SecretAccessKey": "{AWS_SECRET}"}}',
])
def test_a_bare_aws_secret_key_is_masked(text):
    out = redact(text)
    assert "bPxRfiCY" not in out and MASK in out


@pytest.mark.parametrize("text", [
    f"HEAD is now at {GIT_SHA} fix the parser",
    f"commit {GIT_SHA.upper()}",
    f"sha256:{SHA256}  dist/acr-0.4.0-py3-none-any.whl",
    f"{SHA256}\n{SHA256}",
    "/Users/Alice/Documents/Projects/MyApp2/X",
    "home/alice/projects/backend2/src/server1",
])
def test_digests_and_paths_are_not_taken_for_aws_keys(text):
    assert redact(text) == text


# Made-up tokens of each vendor's shape (prefix and length).
VENDOR_TOKENS = [
    "glpat-Zq8xW2vN4mK7pL9tR3sY",  # GitLab personal access token: 20 after the prefix
    "glpat-Zq8xW2vN4mK7pL9tR3sYbH6j.01.0f1e2d3c4",  # the newer format, routing part and checksum after dots
    "gldt-Zq8xW2vN4mK7pL9tR3sY",  # GitLab deploy token
    "npm_Zq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0eU2i",  # 36 after the prefix
    "pypi-AgEIcHlwaS5vcmc" + "CJGZmZjYzE3ZC1hYjQ1LTQ4ZmQtOWM2Ni1lMDBhMmE5Y2I2ZjEAAixbWzEsWyJhY3IiXV1d" * 2,
    "xapp-1-A0ZQ8XW2VN4-1234567890123-0f1e2d3c4b5a69788796a5b4c3d2e1f0",  # Slack app-level token
    "whsec_Zq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0",  # Stripe webhook secret
    "whsec_Zq8xW2vN4mK7/L9tR3sY+H6jD5cF1gA0==",  # Svix: base64
    "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",  # SendGrid: 22 and 43
    "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",  # Google OAuth client secret
    "hvs.CAESIZq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0eU2iGh4KHGh2cy5",  # Vault service token
    "hvb.AAAAAQZq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0eU2i",  # Vault batch token
]


@pytest.mark.parametrize("token", VENDOR_TOKENS)
def test_vendor_tokens_are_masked(token):
    assert redact(f"the deploy used {token} today") == f"the deploy used {MASK} today"
    assert redact(json.dumps({"text": f"set it to '{token}'"})) == json.dumps({"text": f"set it to '{MASK}'"})


@pytest.mark.parametrize("text", [
    "npm_config_cache=/home/alice/.npm npm_package_version=1.2.3 npm_lifecycle_event=test",
    "SG. is SendGrid's prefix; SG.send(message) returned 202",
    "wrote hvs.yaml, hvb.json and hvr.txt",
    "glpat- tokens expire; a glpat-XXXX placeholder",
    "pypi-AgEI starts every PyPI token; whsec_ starts a webhook secret; GOCSPX- a client secret",
    "xapp-1 is an app-level token's first part",
])
def test_vendor_prefixes_in_ordinary_text_stay_readable(text):
    assert redact(text) == text


@pytest.mark.parametrize("url, secret", [
    ("https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "XXXXXXXXXXXX"),
    ("https://discord.com/api/webhooks/123456789012345678/Abc_DEFghiJKL-mnopQRS", "Abc_DEFghi"),
    ("https://discordapp.com/api/webhooks/123456789012345678/Abc_DEFghiJKL-mnopQRS", "Abc_DEFghi"),
    ("https://contoso.webhook.office.com/webhookb2/0a1b@2c3d/IncomingWebhook/4e5f6a7b/8c9d", "4e5f6a7b"),
    ("https://prod-01.westus.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke"
     "?api-version=2016-06-01&sv=1.0&sig=Zm9vYmFyYmF6cXV4", "Zm9vYmFy"),
    ("https://api.example.com/v1/events?page=2&token=0123abcdef4567", "0123abcdef"),
    ("https://maps.example.com/api/js?key=Qk9PTUJPT01CT09N&callback=init", "Qk9PTUJP"),
    ("https://bucket.s3.amazonaws.com/file?X-Amz-Signature=8a9b0c1d2e3f4a5b6c7d", "8a9b0c1d"),
])
def test_webhook_urls_and_secret_query_parameters_are_masked(url, secret):
    out = redact(f"posting to {url} now")
    assert secret not in out and MASK in out
    assert out.startswith("posting to https://") and out.endswith(" now")  # where it went stays readable
    if "&callback=init" in url:
        assert "&callback=init" in out


def test_a_telegram_bot_token_is_masked_and_the_host_and_method_stay():
    out = redact("curl -s https://api.telegram.org/bot1234567890:AAZq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0e/sendMessage -d x=1")
    assert out == f"curl -s https://api.telegram.org/bot{MASK}/sendMessage -d x=1"


@pytest.mark.parametrize("text, secret, kept", [
    ("DefaultEndpointsProtocol=https;AccountName=acrdata;AccountKey=" + "Zq8xW2vN" * 11 + "==;EndpointSuffix=core.windows.net",
     "Zq8xW2vN", ["AccountName=acrdata;", ";EndpointSuffix=core.windows.net"]),
    ("Endpoint=sb://acr-bus.servicebus.windows.net/;SharedAccessKey=Zq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0eU2iGh4KHGh=",
     "Zq8xW2vN", ["Endpoint=sb://acr-bus.servicebus.windows.net/;"]),
    ("BlobEndpoint=https://acr.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b&sp=rl"
     "&se=2030-01-01T00:00:00Z&sig=Zq8xW2vN4mK7pL9tR3sY%3D;", "sp=rl", ["BlobEndpoint=https://acr.blob.core.windows.net/;"]),
    ("Authorization: SharedAccessSignature sr=acr.servicebus.windows.net&sig=Zq8xW2vN4mK7pL9tR3sY%3D&se=1700000000",
     "Zq8xW2vN", ["Authorization: SharedAccessSignature "]),
    (json.dumps({"c": "conn = \"AccountName=a;AccountKey=Zq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0eU2iGh4KHGh==\""}), "Zq8xW2vN", []),
])
def test_an_azure_connection_string_loses_its_key(text, secret, kept):
    out = redact(text)
    assert secret not in out and MASK in out and all(k in out for k in kept)
    if text.startswith("{"):
        json.loads(out)


@pytest.mark.parametrize("text, shown", [
    ("curl -u alice:Hunter2-horse https://api.example.com", "curl -u alice:{} https://api.example.com"),
    ("curl --user alice:Hunter2-horse -X POST https://x", "curl --user alice:{} -X POST https://x"),
    ("curl --user=alice:Hunter2-horse https://x", "curl --user=alice:{} https://x"),
    ("curl -ualice:Hunter2 https://x", "curl -ualice:{} https://x"),
    ("curl -sSu 'alice:my pass phrase' https://x", "curl -sSu 'alice:{}' https://x"),
    ("curl -U proxyuser:Pr0xyPass https://x", "curl -U proxyuser:{} https://x"),
    (json.dumps({"command": 'curl -u "alice:my pw" https://x'}), json.dumps({"command": 'curl -u "alice:{}" https://x'})),
    ("mysql -h db -u root -pS3cretPw appdb", "mysql -h db -u root -p{} appdb"),
    ("mysql --user=root --password=pw1 -P3306", "mysql --user=root --password={} -P3306"),
    ("mysqldump -uroot -p'my pass' appdb > dump.sql", "mysqldump -uroot -p{} appdb > dump.sql"),
])
def test_a_password_on_a_command_line_is_masked(text, shown):
    assert redact(text) == shown.replace("{}", MASK)


@pytest.mark.parametrize("text", [
    "curl -u alice https://api.example.com:8443/x",  # no password: curl prompts for it
    "curl -X POST -H 'Content-Type: application/json' https://host:8443/x",
    "docker run -u 1000:1000 image && git push -u origin main:main",
    "mysql -u root -p appdb",  # -p alone prompts
    "mysql -P3306 -h db:local",
])
def test_command_lines_without_a_password_stay_readable(text):
    assert redact(text) == text


def test_a_whole_private_key_is_masked():
    key = pem_lines("OPENSSH PRIVATE KEY")
    out = redact("\n".join(["wrote ~/.ssh/id_ed25519:", *key, "done"]))
    assert out == f"wrote ~/.ssh/id_ed25519:\n{MASK}\ndone"


def test_a_private_key_cut_off_is_masked_to_the_end():
    key = pem_lines("EC PRIVATE KEY")
    out = redact("\n".join(["head of the output", *key[:3]]))  # no END line: the output was cut
    assert out == f"head of the output\n{MASK}"


def test_the_end_of_a_private_key_in_an_output_tail_is_masked():
    key = pem_lines("PRIVATE KEY")
    out = redact("\n".join(["ok", "done", *key[3:], "12 passed in 0.3s"]))  # a verifier's last lines: no BEGIN
    assert out == f"ok\ndone\n{MASK}\n12 passed in 0.3s"
    assert not any(line[:20] in out for line in key[3:-1])


def test_a_private_key_inside_a_json_line_is_masked():
    key = "\n".join(pem_lines("RSA PRIVATE KEY"))
    line = json.dumps({"type": "item.completed", "text": key, "next": "ok"})  # one line, \n escaped
    out = redact(line)
    assert out == '{"type": "item.completed", "text": "' + MASK + '", "next": "ok"}'


def test_a_key_logged_line_by_line_is_masked_from_begin_to_end():
    key = pem_lines("RSA PRIVATE KEY")
    lines = LineRedactor()
    out = [lines.line(x) for x in ["$ cat deploy.pem", *key, "12 passed", "exit 0"]]
    assert out == ["$ cat deploy.pem", *[MASK] * len(key), "12 passed", "exit 0"]


def test_line_by_line_an_indented_or_numbered_key_is_masked_too():
    key = pem_lines("ENCRYPTED PRIVATE KEY")
    lines = LineRedactor()
    out = [lines.line(f"{n:6}\t{x}") for n, x in enumerate(key, 1)] + [lines.line("after")]
    assert out[-1] == "after" and all(MASK in x for x in out[:-1])
    assert not any(x[:16] in "".join(out) for x in key[1:-1])


@pytest.mark.parametrize("width", [64, 76])
def test_base64_wrapped_at_64_or_76_columns_is_masked_to_its_last_line(width):
    body = textwrap.wrap(base64.b64encode(random.Random(width).randbytes(500)).decode(), width)  # PEM-less, as base64 prints
    assert len(body[-1]) < width
    text = ["$ base64 deploy.der", *body, "Done", "exit 0"]
    assert redact("\n".join(text)) == "\n".join(["$ base64 deploy.der", *[MASK] * len(body), "Done", "exit 0"])
    lines = LineRedactor()
    assert [lines.line(x) for x in text] == ["$ base64 deploy.der", *[MASK] * len(body), "Done", "exit 0"]


def test_line_by_line_code_that_mentions_a_key_header_does_not_hide_the_rest():
    lines = LineRedactor()
    out = [lines.line(x) for x in ['if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):', "    return parse(line)"]]
    assert out[1] == "    return parse(line)"


def test_line_by_line_a_block_that_never_ends_stops_being_masked():
    lines = LineRedactor()
    lines.line("-----BEGIN PRIVATE KEY-----")
    out = [lines.line(f"row {i}") for i in range(LineRedactor.MAX_KEY_LINES + 5)]
    assert out[0] == MASK and out[-1] == f"row {LineRedactor.MAX_KEY_LINES + 4}"


# ---------------------------------------------------------------- what stays readable


@pytest.mark.parametrize("text", [
    "The function returns a dict mapping each key to its value; see acr_cli/memory/store.py:142.",
    "FAILED tests/test_parser.py::test_roundtrip - AssertionError: assert {'a': 1} == {'a': 2}",
    "12 passed, 1 failed in 3.21s",
    '{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":0,"output_tokens":96}}',
    "for key, value in sorted(items.items()):\n    print(key, value)",
    "max_tokens=4096, token_count: 12, password_min_length: 8",
    "  File \"/home/alice/project/src/module/handler.py\", line 142, in process_request",
    "see https://docs.github.com/en/webhooks/about-webhooks and https://example.com/search?q=key+points",
    "Editing src/Components/UserProfile/index.tsx and tests/fixtures/IntegrationTest2Fixtures_old.py",
    "passed: 3/4, compass: north-west, author: Jane Developer",
])
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


def test_redacting_twice_changes_nothing_more():
    text = "\n".join(["DB_PASS=hunter2hunter2", "https://api.example.com/x?token=0123abcdef4567&page=2",
                      "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
                      "postgres://bob:PGPASSPGPASS@db:5432/app", f"key {AWS_SECRET}", *VENDOR_TOKENS,
                      "curl -u alice:Hunter2-horse https://x", "mysql -uroot -pS3cretPw", "AccountName=a;AccountKey=Zq8x==;",
                      "https://api.telegram.org/bot1234567890:AAZq8xW2vN4mK7pL9tR3sYbH6jD5cF1gA0e/getMe", *pem_lines()[:4]])
    once = redact(text)
    assert redact(once) == once and "page=2" in once


# ---------------------------------------------------------------- memory and export


def test_export_carries_no_secret_even_from_rows_written_before_these_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("DB_PASS", "pg-pass-0451-zeta")
    arm = Arm("codex", "gpt-5.4", 2.5, 15.0)
    key = pem_lines()
    hook = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    mem = Memory.open(tmp_path / "m.sqlite")
    tid = mem.begin_task(source="live", kind="bug_fix", groups=["all"],
                         prompt=f"connect with pg-pass-0451-zeta and post to {hook}")
    fb = Feedback(arm, "failed", reason=f"aws said no to {AWS_SECRET}", verifier_tail="\n".join(key[4:]))
    mem.add_attempt(tid, 1, Decision(arm, "first"), fb, policy="fixed", verifier="./check.sh")
    mem.finish_task(tid, passed=False, score=0.0, cost_usd=0.1, final_arm=arm.id)
    # a row an older acr wrote with weaker rules: stored as it came
    mem.db.execute("INSERT INTO tasks (id, created_at, source, prompt) VALUES ('old', '2025-01-01T00:00:00Z', "
                   "'live', ?)", (f"old prompt: DB_PASS is pg-pass-0451-zeta, key {AWS_SECRET}",))
    mem.db.execute("INSERT INTO attempts (task_id, seq, agent, model, started_at, verdict, verifier_tail) VALUES "
                   "('old', 1, 'codex', 'gpt-5.4', '2025-01-01T00:00:00Z', 'failed', ?)", ("\n".join(key),))
    out = io.StringIO()
    mem.export(out)
    exported = out.getvalue()
    for secret in ("pg-pass-0451-zeta", "bPxRfiCY", "XXXXXXXXXXXX", *(line[:24] for line in key[1:-1])):
        assert secret not in exported, secret
    tasks = [json.loads(x) for x in exported.splitlines()]
    assert [t["id"] for t in tasks] == [tid, "old"]
    assert tasks[0]["prompt"] == f"connect with {MASK} and post to https://hooks.slack.com/services/{MASK}"
    assert tasks[0]["attempts"][0]["verifier"] == "./check.sh"  # the rest stays readable

    # importing an export written by an older acr stores it clean as well
    old_export = json.dumps({"type": "task", "id": "imp", "created_at": "2025-01-01T00:00:00Z",
                             "prompt": "pw pg-pass-0451-zeta", "attempts": [
                                 {"seq": 1, "agent": "codex", "model": "gpt-5.4", "started_at": "t",
                                  "verdict": "failed", "detail": f"denied: {AWS_SECRET}"}]})
    dst = Memory.open(tmp_path / "n.sqlite")
    assert dst.import_(io.StringIO(old_export + "\n")) == (1, 0)
    dump = "\n".join(str(tuple(r)) for t in ("tasks", "attempts") for r in dst.db.execute(f"SELECT * FROM {t}"))
    assert "pg-pass-0451-zeta" not in dump and "bPxRfiCY" not in dump and "denied: " + MASK in dump


def test_a_secret_added_while_another_variable_went_is_still_masked(monkeypatch):
    monkeypatch.setenv("ACR_TEST_PLAIN", "nothing secret here")
    redact("warm the cache")
    monkeypatch.delenv("ACR_TEST_PLAIN")
    monkeypatch.setenv("ACR_TEST_DB_PASS", "hunter2-correct-horse")  # same number of variables
    assert "hunter2-correct-horse" not in redact("connecting with hunter2-correct-horse")
