"""Rerank and score: the bodies the workload builds, the mock's parse and cost, the answers' checks, the errors."""

from __future__ import annotations

import orjson
import pytest

from loadtest.client.ranking import expected_results, read_ranking
from loadtest.client.record import RequestRecord
from loadtest.errors import InputError
from loadtest.mock.parse import BadRequest
from loadtest.mock.ranking import parse_rerank, parse_score, ranking_body
from loadtest.scenario import parse_scenario
from loadtest.workload import Workload


def _scenario(api: str, **workload) -> dict:
    return {"name": "r", "target": {"api": api, "model": "bge-reranker"}, "load": {"levels": [1]},
            "workload": {"prompt_tokens": {"mean": 6}, **workload}, "slo": {"e2e_ms": {"p95": 500}}}


@pytest.mark.parametrize("api", ["rerank", "score"])
def test_a_query_and_batch_size_documents_of_their_own_lengths(api):
    planned = Workload(parse_scenario(_scenario(api, batch_size=4, query_tokens={"mean": 3})), seed=1).next_request()
    body = orjson.loads(planned.body)
    query, docs = (body["query"], body["documents"]) if api == "rerank" else (body["text_1"], body["text_2"])
    assert len(query.split()) == 3 and len(docs) == 4 and all(len(d.split()) == 6 for d in docs)
    assert len(set(docs)) == 4 and body["model"] == "bge-reranker" and "stream" not in body
    assert (body.get("top_n") == 4) is (api == "rerank")  # every document back, the same on vLLM, Cohere, Jina
    assert planned.prompt_words == 3 + 4 * 6
    # the mock charges every pair the query's tokens and the document's: 4 × (3 + 6)
    req = (parse_rerank if api == "rerank" else parse_score)(planned.body)
    assert req.prompt_tokens == 4 * (3 + 6) and len(req.documents) == 4
    rec = RequestRecord(start_wall=0.0, start_perf=0.0)
    read_ranking(rec, ranking_body(req), api, body)
    assert rec.ok and rec.items == 4 and rec.prompt_tokens == 36 and rec.token_source == "usage"


def test_rerank_answers_are_checked_against_top_n_and_the_indices_sent():
    sent = {"query": "q", "documents": ["a", "b", "c"], "top_n": 2}
    assert expected_results("rerank", sent) == (3, 2)
    assert expected_results("rerank", {**sent, "top_n": 0}) == (3, 3)  # vLLM's 0: all of them
    assert expected_results("score", {"text_1": ["x", "y"], "text_2": ["a", "b"]}) == (2, 2)
    mock = ranking_body(parse_rerank(orjson.dumps({"model": "m", **sent})))
    assert len(orjson.loads(mock)["results"]) == 2  # the mock honours top_n, sorted by relevance
    cases = {
        b'{"results":[{"index":0,"relevance_score":0.9},{"index":0,"relevance_score":0.8}]}': "1 scored results for 2",
        b'{"results":[{"index":0,"relevance_score":0.9},{"index":1}]}': "1 scored results for 2",
        b'{"data":[]}': "no 'results' list",
        b'{"error":{"message":"model is not a reranker"}}': "model is not a reranker",
        b'[1, 2': "not JSON",
    }
    for payload, words in cases.items():
        rec = RequestRecord(start_wall=0.0, start_perf=0.0)
        read_ranking(rec, payload, "rerank", sent)
        assert not rec.ok and words in rec.error and rec.items == 3, (payload, rec.error)
    old = RequestRecord(start_wall=0.0, start_perf=0.0)  # older vLLM: only total_tokens
    read_ranking(old, b'{"results":[{"index":2,"relevance_score":1},{"index":0,"relevance_score":0}],'
                      b'"usage":{"total_tokens":12}}', "rerank", sent)
    assert old.ok and old.prompt_tokens == 12


def test_the_mock_refuses_bad_bodies_like_vllm():
    with pytest.raises(BadRequest, match="'documents'"):
        parse_rerank(b'{"model":"m","query":"q","documents":[]}')
    with pytest.raises(BadRequest, match="must pair up"):
        parse_score(b'{"model":"m","text_1":["a","b"],"text_2":["c","d","e"]}')
    assert parse_score(b'{"model":"m","text_1":["a b","c"],"text_2":["d","e f g"]}').prompt_tokens == 3 + 4


@pytest.mark.parametrize("api, data, line", [
    ("rerank", {"slo": {"ttft_ms": {"p95": 100}}}, "r.yaml: slo.ttft_ms: rerank answers are not streamed"),
    ("score", {"workload": {"tools": [{"type": "function", "function": {"name": "f"}}]}},
     "r.yaml: workload.tools: not with target.api score (score is not chat)"),
    ("rerank", {"workload": {"images": {"count": 1}}}, "r.yaml: workload.images: not with target.api rerank"),
    ("chat", {"workload": {"query_tokens": {"mean": 4}}},
     "r.yaml: workload.query_tokens: only with target.api rerank or score"),
    ("chat", {"workload": {"batch_size": 4}}, "r.yaml: workload.batch_size: only with target.api embeddings, rerank or score"),
    ("rank", {}, "r.yaml: target.api:"),
])
def test_ranking_fields_fail_in_one_line(api, data, line):
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "r", "target": {"api": api}, "load": {"levels": [1]}, **data}, "r.yaml")
    assert str(err.value).startswith(line) and "\n" not in str(err.value), str(err.value)
