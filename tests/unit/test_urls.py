"""A path onto a base URL that carries a query, and a URL redacted for a message or run.json."""

from __future__ import annotations

import pytest

from loadtest.redact import public_url
from loadtest.urls import basic_auth, request_target, request_url, split_userinfo

#: asserts nothing about time: runs in make test's parallel pass
pytestmark = pytest.mark.untimed


def test_the_path_goes_before_the_base_urls_query():
    base = "http://u:pw@127.0.0.1:1/v1/?api_key=k1&api-version=2024"
    assert request_target(base, "/chat/completions", {"team": "perf"}) == \
        "/v1/chat/completions?api_key=k1&api-version=2024&team=perf"
    assert request_url(base, "/models") == "http://u:pw@127.0.0.1:1/v1/models?api_key=k1&api-version=2024"
    assert request_url("http://h/v1", "/chat/completions") == "http://h/v1/chat/completions"


def test_a_redacted_url_keeps_its_order_and_only_loses_its_secrets():
    url = request_url("http://u:sk-TRIALSECRET123@127.0.0.1:1/v1?api_key=sk-TRIALSECRET123&api-version=2024-10-21",
                      "/chat/completions")
    assert public_url(url) == \
        "http://<redacted>:<redacted>@127.0.0.1:1/v1/chat/completions?api_key=<redacted>&api-version=2024-10-21"
    # a short user or password is replaced where it is the credential, not wherever its letters occur
    assert public_url("https://u:1@10.1.1.1:8443/v1/users?x=1") == "https://<redacted>:<redacted>@10.1.1.1:8443/v1/users?x=1"
    assert public_url("notaurl") == "notaurl"


def test_userinfo_comes_off_for_basic_auth():
    assert split_userinfo("http://u%40corp:p%3Aw@gw:9091/x?y=1") == ("http://gw:9091/x?y=1", ("u@corp", "p:w"))
    assert split_userinfo("http://gw:9091/") == ("http://gw:9091/", None)
    assert basic_auth("u", "pw") == "Basic dTpwdw=="
