"""A server's error body becomes one readable line: in records, and in the run's error message.

A proxy's 502 page or Python's ``http.server`` answers a POST with a whole HTML
document; printed as it came, the run's "one clear line" was twelve lines of
markup.
"""

from __future__ import annotations

from loadtest.cli import main
from loadtest.client.wire import ERROR_TEXT_CHARS, error_message, one_line

PAGE = b"""<!DOCTYPE HTML>
<html lang="en">
    <head>
        <style>body { color: red }</style>
        <script>var x = "<b>not text</b>";</script>
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method ('POST').</p>
    </body>
</html>
"""


def test_an_html_error_page_is_its_text_on_one_line():
    assert error_message(PAGE) == "Error response Error response Error code: 501 Message: Unsupported method ('POST')."


def test_an_openai_error_keeps_its_message_on_one_line():
    assert error_message(b'{"error": {"message": "bad request:\\n  max_tokens   too large"}}') == "bad request: max_tokens too large"
    assert error_message(b"") == "(empty body)"
    assert error_message(b"upstream connect error\r\nor disconnect") == "upstream connect error or disconnect"


def test_a_long_body_is_cut_with_a_mark():
    text = error_message(b"x" * 1000)
    assert len(text) == ERROR_TEXT_CHARS and text.endswith("…")
    assert one_line("a\n\n b\t c") == "a b c"
    assert one_line("abcdef", limit=4) == "abc…"


def test_a_multi_line_error_is_printed_as_one_line(tmp_path, capsys, monkeypatch):
    """Whatever a message holds (here a server's error text with its newlines), stderr gets one line."""
    from loadtest import cli_read
    from loadtest.errors import TargetError

    def fails(_args):
        raise TargetError("http://127.0.0.1:9/v1 refused the request (HTTP 401): Unauthorized\n  see the docs\n")

    monkeypatch.setattr(cli_read, "_cmd_validate", fails)
    code = main(["validate", str(tmp_path / "any.yaml")])
    err = capsys.readouterr().err
    assert code == TargetError.exit_code
    assert err == "loadtest validate: error: http://127.0.0.1:9/v1 refused the request (HTTP 401): Unauthorized see the docs\n"
