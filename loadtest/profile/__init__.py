"""``loadtest profile``: the endpoint's prefill and decode curves, and what bounds them.

A profile is a load plan (:mod:`plan`) run through the ordinary run pipeline
(each sweep is a run folder of its own, analyzable with ``loadtest analyze``)
plus the pure fits of :mod:`loadtest.analysis.decode_fit` and
:mod:`loadtest.analysis.prefill_fit`; :mod:`runner` sequences it and
:mod:`output` writes ``profile.json``, the report section and the table.
"""
