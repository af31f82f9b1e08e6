"""The prebuilt request head is the very bytes geventhttpclient's request() would send."""

from __future__ import annotations

from loadtest.client.stream import StreamingClient


def _library_head(client: StreamingClient, body: bytes) -> bytes:
    return client._http._build_request("POST", client.path, body=body, headers=client.headers).encode("latin-1")


def test_the_head_is_the_librarys_for_each_body_length():
    client = StreamingClient("http://127.0.0.1:9/v1?api-version=2024", "chat", headers={"X-Team": "perf"},
                             api_key="k-1")
    prebuilt = client._prebuilt
    assert prebuilt.usable
    for body in (b"", b"{}", b'{"model":"m","messages":[]}', b"x" * 70_000):
        assert prebuilt.head(len(body), body) == _library_head(client, body)
    assert b"Content-Length: 2\r\n" in prebuilt.head(2, b"{}")
    assert prebuilt.head(2, b"[]") is prebuilt.head(2, b"{}")  # built once per length


def test_an_http_proxy_gets_the_absolute_target(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = StreamingClient("http://127.0.0.5:8000/v1", "chat")
    head = client._prebuilt.head(2, b"{}")
    assert head == _library_head(client, b"{}")
    assert head.startswith(b"POST http://127.0.0.5:8000/v1/chat/completions HTTP/1.1\r\n")


def test_expect_continue_and_chunked_uploads_keep_the_librarys_request():
    for headers in ({"Expect": "100-continue"}, {"transfer-encoding": "chunked"}):
        assert not StreamingClient("http://127.0.0.1:9/v1", "chat", headers=headers)._prebuilt.usable
