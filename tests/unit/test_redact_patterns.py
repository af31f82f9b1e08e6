"""The scrubber's ``Bearer``/``Basic`` pattern: credentials, not English words; and where it would rewrite.

The pattern took any 8 letters after "basic" or "bearer" for a credential: a scenario's comment
"# A basic scenario for staging" was printed "# A basic <redacted> for staging", so ``k8s render``
put a changed file into the ConfigMap without a word. A credential has a digit, a base64 symbol or
a lower-then-upper letter; a word has none. ``scrubbed_lines`` names the lines it would rewrite, so
a command whose output must come out as written can refuse instead.
"""

from __future__ import annotations

import pytest

from loadtest.redact import REDACTED, scrub, scrubbed_lines, url_secrets


@pytest.mark.parametrize("prose", [
    "# A basic scenario for the staging endpoint",
    "the bearer of the request",
    "Basic Authentication is off",
    "a basic tool-calling workload",
    "Bearer tokens are refused here",
])
def test_words_after_basic_or_bearer_are_left_as_written(prose):
    assert scrub(prose) == prose
    assert scrubbed_lines(prose) == []


@pytest.mark.parametrize("credential", [
    "Authorization: Bearer sk-inlineSECRET1234567890abcdef",
    "Authorization: Bearer abcdefgh12345",
    "Authorization: Basic dXNlcjpwYXNz",  # user:pass, base64: no digit, mixed case
    "Authorization: Basic dTpwdw==",
    "authorization: BEARER ABCDEFGHIJ9",
    # after an Authorization header's name, any value (a review: these passed the narrower rule)
    "Authorization: Bearer changemeplease",
    '"Authorization": "Bearer abcdefghijklmnop',
    "Authorization: Bearer my_secret-token.value",
    # elsewhere (a server's error body echoing the header): capitals only are not a word either
    "upstream said: bearer ABCDEFGHIJKLMNOPQRST",
    "rejected Bearer QWERTYUIOPASDF",
])
def test_credentials_after_basic_or_bearer_are_still_scrubbed(credential):
    assert scrub(credential).endswith(" " + REDACTED)


def test_scrubbed_lines_names_each_line_a_credential_starts_on():
    text = "name: x\n# key sk-abcdefghijklmnop\nbase_url: https://u:pw123456@h/v1\nmodel: m\n"
    assert scrubbed_lines(text) == [2, 3]
    assert scrubbed_lines("name: x\nmodel: m\n") == []


def test_a_dated_api_version_is_not_a_token_but_a_long_mixed_value_still_is():
    # Azure's preview versions have a token's shape (16+ letters and digits mixed): run.json read
    # "?api-version=<redacted>", losing the API version the run spoke
    for version in ("2024-10-01-preview", "2025-04-01-preview", "2024-02-15-preview", "2024-10-21"):
        assert url_secrets(f"https://x.openai.azure.com/openai/deployments/d?api-version={version}") == []
    assert url_secrets("https://h/v1?v=a1b2c3d4e5f6g7h8i9") == ["a1b2c3d4e5f6g7h8i9"]
    assert url_secrets("https://h/v1?v=2024-10-01-a1b2c3d4e5f6") == ["2024-10-01-a1b2c3d4e5f6"]  # not a version
