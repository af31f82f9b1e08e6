"""The scrubber's ``Bearer``/``Basic`` pattern: credentials, not English words; and where it would rewrite.

The pattern took any 8 letters after "basic" or "bearer" for a credential: a scenario's comment
"# A basic scenario for staging" was printed "# A basic <redacted> for staging", so ``k8s render``
put a changed file into the ConfigMap without a word. A credential has a digit, a base64 symbol or
a lower-then-upper letter; a word has none. ``scrubbed_lines`` names the lines it would rewrite, so
a command whose output must come out as written can refuse instead.
"""

from __future__ import annotations

import pytest

from loadtest.redact import REDACTED, scrub, scrubbed_lines


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
])
def test_credentials_after_basic_or_bearer_are_still_scrubbed(credential):
    assert scrub(credential).endswith(" " + REDACTED)


def test_scrubbed_lines_names_each_line_a_credential_starts_on():
    text = "name: x\n# key sk-abcdefghijklmnop\nbase_url: https://u:pw123456@h/v1\nmodel: m\n"
    assert scrubbed_lines(text) == [2, 3]
    assert scrubbed_lines("name: x\nmodel: m\n") == []
